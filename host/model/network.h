// The network, described once as a sequence of layers. Every variant implements
// the layer kinds, not the network; a new model is a new description.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/layers/layer_kind.h"

namespace lenet5 {

enum class Activation { Tanh, None, Sigmoid, ReLU };

// The loss on the last layer's outputs: softmax cross-entropy over the logits (the last
// layer then has no activation), or 0.5 * sum (y - t)^2 against the one-hot label (seed 004).
enum class Loss { SoftmaxCrossEntropy, SquaredError };

const char* kind_name(LayerKind kind);
const char* activation_name(Activation a);
const char* loss_name(Loss loss);

struct Shape {
    int c = 0, h = 0, w = 0;
    int size() const { return c * h * w; }
};

struct LayerSpec {
    std::string name;
    LayerKind kind = LayerKind::FullyConnected;
    Activation activation = Activation::Tanh;
    Shape in, out;
    int kernel = 0;  // Conv: KxK window; Subsample and pooling: KxK window
    int stride = 1;  // Conv and pooling (Subsample: = kernel)
    int pad = 0;     // Conv: zeros added on every side of each input map

    // Conv only: the (output map, input map) pairs, sorted by output then input.
    // Connection j owns the KxK weights at weight_offset + j*K*K.
    // conn_begin[o]..conn_begin[o+1] are the connections of output map o.
    std::vector<int32_t> conn_out, conn_in, conn_begin;

    // Where this layer's parameters live in the flat parameter buffer.
    // Conv: connections x K x K weights; Subsample: one coefficient per map;
    // FullyConnected: out x in weights. Then one bias per output map/unit.
    size_t weight_offset = 0, weight_count = 0;
    size_t bias_offset = 0, bias_count = 0;

    // A kind's own settings (layers/layer_type.h's LayerType::settings), in its order.
    std::vector<float> attr;

    int connections() const { return static_cast<int>(conn_in.size()); }
};

// How an image's bytes become the network's input: byte / 255 * scale + shift. The border around
// the image (an input larger than 28x28) takes a 0 byte's value, `shift`: the background. The
// default maps the pixels to [-1, 1] (bit for bit byte / 127.5 - 1); a network imported from ONNX
// takes what its graph does to pixels in [0, 1].
struct InputScaling {
    float scale = 2.0f, shift = -1.0f;
    float value(int byte) const { return static_cast<float>(byte) / 255.0f * scale + shift; }
    bool is_default() const { return scale == 2.0f && shift == -1.0f; }
    bool is_identity() const { return scale == 1.0f && shift == 0.0f; }
};

struct Network {
    std::string name;
    Shape input;
    InputScaling scaling;
    int classes = 0;
    Loss loss = Loss::SoftmaxCrossEntropy;
    std::vector<LayerSpec> layers;  // the last one produces the outputs (logits for softmax)
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
                         const std::vector<std::vector<int>>& connections = {}, int stride = 1, int pad = 0);
    NetworkBuilder& subsample(const std::string& name, int window, Activation act);
    // kind MaxPool or AvgPool; stride 0 = the window (non-overlapping).
    NetworkBuilder& pool(const std::string& name, LayerKind kind, int window, int stride = 0,
                         Activation act = Activation::None);
    NetworkBuilder& fully_connected(const std::string& name, int units, Activation act);
    // Any kind: a layer `name` of `kind` reading the output so far, for its home to fill in (its
    // shapes and parameter counts), then add() it: its parameters are placed after the others'.
    // (The methods above are the homes' own, host/model/layers/.)
    LayerSpec next(const std::string& name, LayerKind kind, Activation act) const;
    NetworkBuilder& add(LayerSpec layer);
    NetworkBuilder& scaling(InputScaling scaling) {
        net_.scaling = scaling;
        return *this;
    }
    NetworkBuilder& loss(Loss loss) {
        net_.loss = loss;
        return *this;
    }
    // Throws Error if the loss does not fit the last layer (softmax needs no activation on it).
    Network build();

    Shape output() const { return current(); }       // the last layer's output shape, or the input's
    const Network& so_far() const { return net_; }  // the layers added so far

private:
    Shape current() const { return net_.layers.empty() ? net_.input : net_.layers.back().out; }
    Network net_;
};

// LeNet-5 (LeCun et al. 1998) with a softmax output, as in DESIGN.md: the built-in
// model file models/lenet5.net.
Network lenet5_network();

// Throws Error unless `v` (named `what` in the message) has one value per parameter.
void check_param_count(const Network& net, const std::vector<float>& v, const char* what);

// Seeded initialisation, identical for every variant: weights uniform in
// +-sqrt(3 / fan_in) (variance 1/fan_in, LeCun's rule for tanh; twice that for ReLU,
// He's rule), subsampling coefficients 1/(K*K) (a plain average), biases 0.
std::vector<float> init_params(const Network& net, uint64_t seed);

}  // namespace lenet5
