#include "network.h"

#include <cmath>
#include <sstream>

#include "error.h"
#include "rng.h"

namespace lenet5 {

int LayerSpec::fan_in(int out_map) const {
    switch (kind) {
        case LayerKind::Conv:
            return (conn_begin[static_cast<size_t>(out_map) + 1] - conn_begin[static_cast<size_t>(out_map)]) *
                   kernel * kernel;
        case LayerKind::Subsample: return kernel * kernel;
        case LayerKind::FullyConnected: return in.size();
    }
    return 1;
}

void NetworkBuilder::place(LayerSpec& layer) {
    layer.weight_offset = net_.param_count;
    layer.bias_offset = layer.weight_offset + layer.weight_count;
    net_.param_count = layer.bias_offset + layer.bias_count;
}

NetworkBuilder& NetworkBuilder::conv(const std::string& name, int maps, int kernel, Activation act,
                                     const std::vector<std::vector<int>>& connections) {
    LayerSpec l;
    l.name = name;
    l.kind = LayerKind::Conv;
    l.activation = act;
    l.in = current();
    l.kernel = kernel;
    l.out = {maps, l.in.h - kernel + 1, l.in.w - kernel + 1};
    if (l.out.h <= 0 || l.out.w <= 0) throw Error("layer " + name + ": kernel larger than its input");
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
    if (l.in.h % window || l.in.w % window) throw Error("layer " + name + ": input not divisible by window");
    l.out = {l.in.c, l.in.h / window, l.in.w / window};
    l.weight_count = static_cast<size_t>(l.out.c);
    l.bias_count = static_cast<size_t>(l.out.c);
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
    l.out = {units, 1, 1};
    l.weight_count = static_cast<size_t>(units) * static_cast<size_t>(l.in.size());
    l.bias_count = static_cast<size_t>(units);
    place(l);
    net_.layers.push_back(std::move(l));
    return *this;
}

Network NetworkBuilder::build() {
    net_.classes = current().size();
    return net_;
}

std::vector<std::vector<int>> c3_table() {
    // LeCun et al. 1998, Table I: rows are the six S2 maps, columns the sixteen C3 maps.
    static const char* const grid[6] = {
        // 0123456789012345
        "X   XXX  XXXX XX",
        "XX   XXX  XXXX X",
        "XXX   XXX  X XXX",
        " XXX  XXXX  X XX",
        "  XXX  XXXX XX X",
        "   XXX  XXXX XXX",
    };
    std::vector<std::vector<int>> table(16, std::vector<int>(6, 0));
    for (int i = 0; i < 6; ++i)
        for (int o = 0; o < 16; ++o) table[static_cast<size_t>(o)][static_cast<size_t>(i)] = grid[i][o] == 'X';
    return table;
}

Network lenet5_network() {
    return NetworkBuilder("lenet5", {1, 32, 32})
        .conv("C1", 6, 5, Activation::Tanh)
        .subsample("S2", 2, Activation::Tanh)
        .conv("C3", 16, 5, Activation::Tanh, c3_table())
        .subsample("S4", 2, Activation::Tanh)
        .conv("C5", 120, 5, Activation::Tanh)
        .fully_connected("F6", 84, Activation::Tanh)
        .fully_connected("output", 10, Activation::None)
        .build();
}

std::string Network::describe() const {
    static const char* const kinds[] = {"conv", "subsample", "fc"};
    std::ostringstream s;
    s << name << " input " << input.c << 'x' << input.h << 'x' << input.w << '\n';
    for (const auto& l : layers) {
        s << l.name << ' ' << kinds[static_cast<int>(l.kind)] << " k" << l.kernel << ' ' << l.out.c << 'x'
          << l.out.h << 'x' << l.out.w << (l.activation == Activation::Tanh ? " tanh" : " none") << " params "
          << l.weight_count << '+' << l.bias_count;
        if (l.kind == LayerKind::Conv) {
            s << " conn";
            for (size_t j = 0; j < l.conn_in.size(); ++j) s << ' ' << l.conn_out[j] << ':' << l.conn_in[j];
        }
        s << '\n';
    }
    return s.str();
}

uint64_t Network::hash() const {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : describe()) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

void check_param_count(const Network& net, const std::vector<float>& v, const char* what) {
    if (v.size() != net.param_count)
        throw Error(std::string(what) + " has " + std::to_string(v.size()) + " values, the network needs " +
                    std::to_string(net.param_count));
}

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
                    const float a = std::sqrt(3.0f / static_cast<float>(l.fan_in(l.conn_out[j])));
                    for (size_t k = 0; k < kk; ++k) w[j * kk + k] = rng.uniform(-a, a);
                }
                break;
            }
            case LayerKind::FullyConnected: {
                const float a = std::sqrt(3.0f / static_cast<float>(l.in.size()));
                for (size_t i = 0; i < l.weight_count; ++i) w[i] = rng.uniform(-a, a);
                break;
            }
        }
    }
    return p;
}

}  // namespace lenet5
