// The network, described once as a sequence of layers. Every variant implements
// the layer kinds, not the network; a new model is a new description.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lenet5 {

enum class LayerKind {
    Conv,            // valid KxK convolution, stride 1, over the input maps its connection list names
    Subsample,       // KxK non-overlapping sum, times one trainable coefficient per map, plus a bias
    FullyConnected,  // out = W in + b, W is [out][in]
};

enum class Activation { Tanh, None };

struct Shape {
    int c = 0, h = 0, w = 0;
    int size() const { return c * h * w; }
};

struct LayerSpec {
    std::string name;
    LayerKind kind = LayerKind::FullyConnected;
    Activation activation = Activation::Tanh;
    Shape in, out;
    int kernel = 0;  // Conv: KxK window; Subsample: KxK pooling window

    // Conv only: the (output map, input map) pairs, sorted by output then input.
    // Connection j owns the KxK weights at weight_offset + j*K*K.
    // conn_begin[o]..conn_begin[o+1] are the connections of output map o.
    std::vector<int32_t> conn_out, conn_in, conn_begin;

    // Where this layer's parameters live in the flat parameter buffer.
    // Conv: connections x K x K weights; Subsample: one coefficient per map;
    // FullyConnected: out x in weights. Then one bias per output map/unit.
    size_t weight_offset = 0, weight_count = 0;
    size_t bias_offset = 0, bias_count = 0;

    int connections() const { return static_cast<int>(conn_in.size()); }
    // Inputs feeding one output unit (for initialisation).
    int fan_in(int out_map) const;
};

struct Network {
    std::string name;
    Shape input;
    int classes = 0;
    std::vector<LayerSpec> layers;  // the last one produces the logits
    size_t param_count = 0;

    // A stable text description of the layer shapes and connections, and its
    // 64-bit FNV-1a hash (checkpoints record it so they load only into the same network).
    std::string describe() const;
    uint64_t hash() const;
};

// Builders used to describe networks.
class NetworkBuilder {
public:
    NetworkBuilder(std::string name, Shape input) { net_.name = std::move(name); net_.input = input; }
    // connections[o][i] != 0 when output map o reads input map i; empty = all.
    NetworkBuilder& conv(const std::string& name, int maps, int kernel, Activation act,
                         const std::vector<std::vector<int>>& connections = {});
    NetworkBuilder& subsample(const std::string& name, int window, Activation act);
    NetworkBuilder& fully_connected(const std::string& name, int units, Activation act);
    Network build();

private:
    Shape current() const { return net_.layers.empty() ? net_.input : net_.layers.back().out; }
    void place(LayerSpec& layer);
    Network net_;
};

// LeNet-5 (LeCun et al. 1998) with a softmax output, as in DESIGN.md.
Network lenet5_network();

// LeCun's Table I: c3_table()[o][i] != 0 when C3 map o reads S2 map i.
std::vector<std::vector<int>> c3_table();

// Throws Error unless `v` (named `what` in the message) has one value per parameter.
void check_param_count(const Network& net, const std::vector<float>& v, const char* what);

// Seeded initialisation, identical for every variant: weights uniform in
// +-sqrt(3 / fan_in) (variance 1/fan_in, LeCun's rule for tanh), subsampling
// coefficients 1/(K*K) (a plain average), biases 0.
std::vector<float> init_params(const Network& net, uint64_t seed);

}  // namespace lenet5
