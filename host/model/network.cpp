#include "model/network.h"

#include <cmath>
#include <sstream>

#include "common/error.h"
#include "common/hash.h"
#include "common/rng.h"

namespace lenet5 {

int LayerSpec::fan_in(int out_map) const {
    switch (kind) {
        case LayerKind::Conv:
            return (conn_begin[static_cast<size_t>(out_map) + 1] - conn_begin[static_cast<size_t>(out_map)]) *
                   kernel * kernel;
        case LayerKind::Subsample:
        case LayerKind::MaxPool:
        case LayerKind::AvgPool: return kernel * kernel;
        case LayerKind::FullyConnected: return in.size();
    }
    return 1;
}

const char* kind_name(LayerKind kind) {
    switch (kind) {
        case LayerKind::Conv: return "conv";
        case LayerKind::Subsample: return "subsample";
        case LayerKind::FullyConnected: return "fc";
        case LayerKind::MaxPool: return "maxpool";
        case LayerKind::AvgPool: return "avgpool";
    }
    return "?";
}

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

namespace {
// Output positions of a window of `kernel` sliding by `stride` over `in` (padded by `pad` each side).
int sliding_positions(int in, int kernel, int stride, int pad) {
    return in + 2 * pad < kernel ? 0 : (in + 2 * pad - kernel) / stride + 1;
}
}  // namespace

void NetworkBuilder::place(LayerSpec& layer) {
    layer.weight_offset = net_.param_count;
    layer.bias_offset = layer.weight_offset + layer.weight_count;
    net_.param_count = layer.bias_offset + layer.bias_count;
}

NetworkBuilder& NetworkBuilder::conv(const std::string& name, int maps, int kernel, Activation act,
                                     const std::vector<std::vector<int>>& connections, int stride, int pad) {
    LayerSpec l;
    l.name = name;
    l.kind = LayerKind::Conv;
    l.activation = act;
    l.in = current();
    l.kernel = kernel;
    l.stride = stride;
    l.pad = pad;
    if (maps < 1 || kernel < 1 || stride < 1 || pad < 0 || pad >= kernel)
        throw Error("layer " + name + ": needs maps, kernel and stride of at least 1 and 0 <= padding < kernel");
    l.out = {maps, sliding_positions(l.in.h, kernel, stride, pad), sliding_positions(l.in.w, kernel, stride, pad)};
    if (l.out.h <= 0 || l.out.w <= 0) throw Error("layer " + name + ": kernel larger than its (padded) input");
    if (!connections.empty() && static_cast<int>(connections.size()) != maps)
        throw Error("layer " + name + ": connection table needs one row per output map");
    for (int o = 0; o < maps; ++o) {
        l.conn_begin.push_back(static_cast<int32_t>(l.conn_in.size()));
        for (int i = 0; i < l.in.c; ++i) {
            if (connections.empty() || connections[static_cast<size_t>(o)].at(static_cast<size_t>(i))) {
                l.conn_out.push_back(o);
                l.conn_in.push_back(i);
            }
        }
    }
    l.conn_begin.push_back(static_cast<int32_t>(l.conn_in.size()));
    l.weight_count = l.conn_in.size() * static_cast<size_t>(kernel * kernel);
    l.bias_count = static_cast<size_t>(maps);
    place(l);
    net_.layers.push_back(std::move(l));
    return *this;
}

NetworkBuilder& NetworkBuilder::subsample(const std::string& name, int window, Activation act) {
    LayerSpec l;
    l.name = name;
    l.kind = LayerKind::Subsample;
    l.activation = act;
    l.in = current();
    l.kernel = window;
    l.stride = window;
    if (window < 1) throw Error("layer " + name + ": window must be at least 1");
    if (l.in.h % window || l.in.w % window) throw Error("layer " + name + ": input not divisible by window");
    l.out = {l.in.c, l.in.h / window, l.in.w / window};
    l.weight_count = static_cast<size_t>(l.out.c);
    l.bias_count = static_cast<size_t>(l.out.c);
    place(l);
    net_.layers.push_back(std::move(l));
    return *this;
}

NetworkBuilder& NetworkBuilder::pool(const std::string& name, LayerKind kind, int window, int stride,
                                     Activation act) {
    LayerSpec l;
    l.name = name;
    l.kind = kind;
    l.activation = act;
    l.in = current();
    l.kernel = window;
    l.stride = stride ? stride : window;
    if (kind != LayerKind::MaxPool && kind != LayerKind::AvgPool) throw Error("layer " + name + ": not a pooling kind");
    if (window < 1 || l.stride < 1) throw Error("layer " + name + ": window and stride must be at least 1");
    l.out = {l.in.c, sliding_positions(l.in.h, window, l.stride, 0), sliding_positions(l.in.w, window, l.stride, 0)};
    if (l.out.h <= 0 || l.out.w <= 0) throw Error("layer " + name + ": window larger than its input");
    place(l);
    net_.layers.push_back(std::move(l));
    return *this;
}

NetworkBuilder& NetworkBuilder::fully_connected(const std::string& name, int units, Activation act) {
    LayerSpec l;
    l.name = name;
    l.kind = LayerKind::FullyConnected;
    l.activation = act;
    l.in = current();
    if (units < 1) throw Error("layer " + name + ": needs at least 1 unit");
    l.out = {units, 1, 1};
    l.weight_count = static_cast<size_t>(units) * static_cast<size_t>(l.in.size());
    l.bias_count = static_cast<size_t>(units);
    place(l);
    net_.layers.push_back(std::move(l));
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
        if (l.kind == LayerKind::Conv) {
            s << " conn";
            for (size_t j = 0; j < l.conn_in.size(); ++j) s << ' ' << l.conn_out[j] << ':' << l.conn_in[j];
        }
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

namespace {
// 3 * the weights' variance times fan_in: 1 (LeCun) for tanh and the rest, 2 (He) for ReLU.
float gain(const LayerSpec& l) { return l.activation == Activation::ReLU ? 6.0f : 3.0f; }
}  // namespace

std::vector<float> init_params(const Network& net, uint64_t seed) {
    std::vector<float> p(net.param_count, 0.0f);
    Rng rng(seed);
    for (const auto& l : net.layers) {
        float* w = p.data() + l.weight_offset;
        switch (l.kind) {
            case LayerKind::Subsample:
                for (size_t i = 0; i < l.weight_count; ++i) w[i] = 1.0f / static_cast<float>(l.kernel * l.kernel);
                break;
            case LayerKind::Conv: {
                const size_t kk = static_cast<size_t>(l.kernel * l.kernel);
                for (size_t j = 0; j < l.conn_in.size(); ++j) {
                    const float a = std::sqrt(gain(l) / static_cast<float>(l.fan_in(l.conn_out[j])));
                    for (size_t k = 0; k < kk; ++k) w[j * kk + k] = rng.uniform(-a, a);
                }
                break;
            }
            case LayerKind::MaxPool:
            case LayerKind::AvgPool: break;
            case LayerKind::FullyConnected: {
                const float a = std::sqrt(gain(l) / static_cast<float>(l.in.size()));
                for (size_t i = 0; i < l.weight_count; ++i) w[i] = rng.uniform(-a, a);
                break;
            }
        }
    }
    return p;
}

}  // namespace lenet5
