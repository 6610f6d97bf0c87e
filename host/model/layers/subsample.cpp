// subsample: LeCun's trainable subsampling. Each KxK window (non-overlapping) is summed, times one
// trainable coefficient per map, plus a bias per map.
//   model file: subsample NAME window=K [act=A]
//   parameters: one coefficient per map, then one bias per map
#include "common/error.h"
#include "model/layers/activation.h"
#include "model/layers/layer_type.h"

namespace lenet5 {
namespace {

void read(const LayerType&, LayerLine& s, NetworkBuilder& b, const std::string& name) {
    const int window = static_cast<int>(s.integer("window", 1, kMaxLayerDim, std::nullopt));
    b.subsample(name, window, s.activation(Activation::None));
}

void write(const LayerType&, const LayerSpec& l, std::ostream& t) { t << " window=" << l.kernel; }

// The coefficients start as a plain average, 1/(K*K).
void init(const LayerSpec& l, float* p, Rng&) {
    for (size_t i = 0; i < l.weight_count; ++i) p[l.weight_offset + i] = 1.0f / static_cast<float>(l.kernel * l.kernel);
}

// out[c][y][x] = act(coef[c] * sum of the KxK window + bias[c]).
void forward(const LayerSpec& l, const float* p, const float* in, float* out, const Draw&) {
    const int K = l.kernel, OH = l.out.h, OW = l.out.w, IH = l.in.h, IW = l.in.w;
    const float* coef = p + l.weight_offset;
    const float* b = p + l.bias_offset;
    for (int c = 0; c < l.out.c; ++c)
        for (int y = 0; y < OH; ++y)
            for (int x = 0; x < OW; ++x) {
                float s = 0.0f;
                for (int ky = 0; ky < K; ++ky)
                    for (int kx = 0; kx < K; ++kx) s += in[(c * IH + y * K + ky) * IW + x * K + kx];
                out[(c * OH + y) * OW + x] = activate(l.activation, coef[c] * s + b[c]);
            }
}

void backward(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout, float* din,
              float* g, const Draw&) {
    const int K = l.kernel, OH = l.out.h, OW = l.out.w, IH = l.in.h, IW = l.in.w;
    activation_backward(l.activation, out, dout, l.out.size());
    const float* coef = p + l.weight_offset;
    for (int c = 0; c < l.out.c; ++c) {
        float gcoef = 0.0f, gbias = 0.0f;
        for (int y = 0; y < OH; ++y)
            for (int x = 0; x < OW; ++x) {
                const float d = dout[(c * OH + y) * OW + x];
                float s = 0.0f;
                for (int ky = 0; ky < K; ++ky)
                    for (int kx = 0; kx < K; ++kx) {
                        const int at = (c * IH + y * K + ky) * IW + x * K + kx;
                        s += in[at];
                        if (din) din[at] = d * coef[c];
                    }
                gcoef += d * s;
                gbias += d;
            }
        g[l.weight_offset + c] += gcoef;
        g[l.bias_offset + c] += gbias;
    }
}

}  // namespace

NetworkBuilder& NetworkBuilder::subsample(const std::string& name, int window, Activation act) {
    LayerSpec l = next(name, LayerKind::Subsample, act);
    l.kernel = window;
    l.stride = window;
    if (window < 1) throw Error("layer " + name + ": window must be at least 1");
    if (l.in.h % window || l.in.w % window) throw Error("layer " + name + ": input not divisible by window");
    l.out = {l.in.c, l.in.h / window, l.in.w / window};
    l.weight_count = static_cast<size_t>(l.out.c);
    l.bias_count = static_cast<size_t>(l.out.c);
    return add(std::move(l));
}

const LayerType& subsample_layer() {
    static const LayerType t{LayerKind::Subsample, "subsample",
                             "LeCun's KxK subsampling: a trainable coefficient and bias per map", {}, read, write, init,
                             forward, backward};
    return t;
}

}  // namespace lenet5
