// dropout: in training, each input is kept with probability 1 - rate and scaled by 1 / (1 - rate)
// (inverted dropout), else zeroed; in inference it passes its input through. Which inputs are kept
// comes from the run's seed, the layer, the step, the sample and the unit (layer_type.h's Draw), so
// every variant drops the same ones; the backward draws them again rather than storing a mask.
//   model file: dropout NAME [rate=0.5]       ONNX: Dropout (its ratio input)
//   the generic OpenCL kernels: cl_kernels/layers/dropout.cl
#include "model/layers/activation.h"
#include "model/layers/layer_type.h"

namespace lenet5 {
namespace {

// The factor input i is multiplied by: 0 or 1 / (1 - rate) in training, 1 in inference.
float factor(const LayerSpec& l, const Draw& d, int i) {
    const float rate = l.attr[0];
    if (!d.training) return 1.0f;
    return draw_uniform(d, static_cast<uint32_t>(i)) < rate ? 0.0f : 1.0f / (1.0f - rate);
}

void forward(const LayerSpec& l, const float*, const float* in, float* out, const Draw& d) {
    for (int i = 0; i < l.out.size(); ++i) out[i] = activate(l.activation, in[i] * factor(l, d, i));
}

void backward(const LayerSpec& l, const float*, const float*, const float* out, float* dout, float* din, float*,
              const Draw& d) {
    activation_backward(l.activation, out, dout, l.out.size());
    if (din)
        for (int i = 0; i < l.in.size(); ++i) din[i] = dout[i] * factor(l, d, i);
}

}  // namespace

const LayerType& dropout_layer() {
    static const LayerType t{LayerKind::Dropout, "dropout", "zeroes each input with probability rate in training",
                             {{"rate", 0.0f, 0.99f, 0.5f}}, read_settings, write_settings, nullptr, forward, backward,
                             true, "layers/dropout.cl", "Dropout"};
    return t;
}

}  // namespace lenet5
