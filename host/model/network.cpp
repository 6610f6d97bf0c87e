#include "model/network.h"

#include <cmath>
#include <sstream>

#include "common/error.h"
#include "common/hash.h"
#include "common/rng.h"
#include "model/layers/layer_type.h"

namespace lenet5 {

const char* kind_name(LayerKind kind) { return layer_type(kind).word; }

const char* activation_name(Activation a) {
    switch (a) {
        case Activation::Tanh: return "tanh";
        case Activation::None: return "none";
        case Activation::Sigmoid: return "sigmoid";
        case Activation::ReLU: return "relu";
    }
    return "?";
}

const char* loss_name(Loss loss) { return loss == Loss::SquaredError ? "squared" : "softmax"; }

LayerSpec NetworkBuilder::next(const std::string& name, LayerKind kind, Activation act) const {
    LayerSpec l;
    l.name = name;
    l.kind = kind;
    l.activation = act;
    l.in = current();
    return l;
}

NetworkBuilder& NetworkBuilder::add(LayerSpec layer) {
    layer.weight_offset = net_.param_count;
    layer.bias_offset = layer.weight_offset + layer.weight_count;
    net_.param_count = layer.bias_offset + layer.bias_count;
    net_.layers.push_back(std::move(layer));
    return *this;
}

Network NetworkBuilder::build() {
    if (net_.layers.empty()) throw Error("network " + net_.name + " has no layers");
    const LayerSpec& last = net_.layers.back();
    if (net_.loss == Loss::SoftmaxCrossEntropy && last.activation != Activation::None)
        throw Error("layer " + last.name + ": the softmax loss needs the last layer without activation (it is " +
                    activation_name(last.activation) + ")");
    net_.classes = current().size();
    return net_;
}

// What is added after LeNet-5's layers appears only when it differs from LeNet-5's
// (stride, padding, loss, input scaling), so checkpoints saved before those existed still load.
std::string Network::describe() const {
    std::ostringstream s;
    s << name << " input " << input.c << 'x' << input.h << 'x' << input.w;
    if (!scaling.is_default()) s << " scale " << scaling.scale << " shift " << scaling.shift;
    s << '\n';
    for (const auto& l : layers) {
        s << l.name << ' ' << kind_name(l.kind) << " k" << l.kernel;
        if ((l.kind == LayerKind::Conv && l.stride != 1) || l.kind == LayerKind::MaxPool || l.kind == LayerKind::AvgPool)
            s << " s" << l.stride;
        if (l.pad) s << " p" << l.pad;
        s << ' ' << l.out.c << 'x' << l.out.h << 'x' << l.out.w << ' ' << activation_name(l.activation) << " params "
          << l.weight_count << '+' << l.bias_count;
        if (!l.conn_in.empty()) {
            s << " conn";
            for (size_t j = 0; j < l.conn_in.size(); ++j) s << ' ' << l.conn_out[j] << ':' << l.conn_in[j];
        }
        for (const float a : l.attr) s << " a" << a;
        s << '\n';
    }
    if (loss != Loss::SoftmaxCrossEntropy) s << "loss " << loss_name(loss) << '\n';
    return s.str();
}

uint64_t Network::hash() const {
    const std::string text = describe();
    return fnv1a(text.data(), text.size());
}

void check_param_count(const Network& net, const std::vector<float>& v, const char* what) {
    if (v.size() != net.param_count)
        throw Error(std::string(what) + " has " + std::to_string(v.size()) + " values, the network needs " +
                    std::to_string(net.param_count));
}

std::vector<float> init_params(const Network& net, uint64_t seed) {
    std::vector<float> p(net.param_count, 0.0f);
    Rng rng(seed);
    for (const auto& l : net.layers)
        if (const auto init = layer_type(l.kind).init) init(l, p.data(), rng);
    return p;
}

}  // namespace lenet5
