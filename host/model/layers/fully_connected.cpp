// fc: a fully connected layer, out = act(W in + b) with W [out][in] over the flattened input.
//   model file: fc NAME units=N [act=A]
//   parameters: out x in weights, then one bias per unit
#include <cmath>

#include "common/error.h"
#include "model/layers/activation.h"
#include "model/layers/layer_type.h"

namespace lenet5 {
namespace {

constexpr size_t kMaxWeights = 1u << 30;  // refused before anything is allocated (model files)

void read(const LayerType&, LayerLine& s, NetworkBuilder& b, const std::string& name) {
    const int units = static_cast<int>(s.integer("units", 1, kMaxLayerMaps, std::nullopt));
    const Activation act = s.activation(Activation::None);
    if (static_cast<size_t>(b.output().size()) * static_cast<size_t>(units) > kMaxWeights)
        s.fail("layer " + name + " has too many weights");
    b.fully_connected(name, units, act);
}

void write(const LayerType&, const LayerSpec& l, std::ostream& t) { t << " units=" << l.out.c; }

void init(const LayerSpec& l, float* p, Rng& rng) {
    const float a = std::sqrt(init_gain(l.activation) / static_cast<float>(l.in.size()));
    for (size_t i = 0; i < l.weight_count; ++i) p[l.weight_offset + i] = rng.uniform(-a, a);
}

// out[o] = act(sum_i W[o][i] in[i] + b[o]).
void forward(const LayerSpec& l, const float* p, const float* in, float* out, const Draw&) {
    const int I = l.in.size();
    const float* W = p + l.weight_offset;
    const float* b = p + l.bias_offset;
    for (int o = 0; o < l.out.size(); ++o) {
        float s = b[o];
        for (int i = 0; i < I; ++i) s += W[o * I + i] * in[i];
        out[o] = activate(l.activation, s);
    }
}

void backward(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout, float* din,
              float* g, const Draw&) {
    const int I = l.in.size(), O = l.out.size();
    activation_backward(l.activation, out, dout, O);
    const float* W = p + l.weight_offset;
    float* gW = g + l.weight_offset;
    for (int o = 0; o < O; ++o) {
        for (int i = 0; i < I; ++i) gW[o * I + i] += dout[o] * in[i];
        g[l.bias_offset + o] += dout[o];
    }
    if (din)
        for (int i = 0; i < I; ++i) {
            float s = 0.0f;
            for (int o = 0; o < O; ++o) s += W[o * I + i] * dout[o];
            din[i] = s;
        }
}

}  // namespace

NetworkBuilder& NetworkBuilder::fully_connected(const std::string& name, int units, Activation act) {
    LayerSpec l = next(name, LayerKind::FullyConnected, act);
    if (units < 1) throw Error("layer " + name + ": needs at least 1 unit");
    l.out = {units, 1, 1};
    l.weight_count = static_cast<size_t>(units) * static_cast<size_t>(l.in.size());
    l.bias_count = static_cast<size_t>(units);
    return add(std::move(l));
}

const LayerType& fully_connected_layer() {
    static const LayerType t{LayerKind::FullyConnected, "fc", "fully connected: out = W in + b over the flattened input",
                             {}, read, write, init, forward, backward};
    return t;
}

}  // namespace lenet5
