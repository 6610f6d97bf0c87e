#include "io/onnx_import.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "common/error.h"
#include "model/layers/layer_type.h"
#include "io/onnx_reader.h"

namespace lenet5 {

namespace {

constexpr int kImageSide = 28;  // MNIST's and Fashion-MNIST's images

// One trainable layer of the graph: the op that computes it, and its activation (fused into the op,
// or a separate Act after a pooling).
struct GraphLayer {
    const OnnxOp* op = nullptr;
    Activation act = Activation::None;
};

Activation activation_of(OnnxAct a) {
    switch (a) {
        case OnnxAct::Relu: return Activation::ReLU;
        case OnnxAct::Sigmoid: return Activation::Sigmoid;
        case OnnxAct::Tanh: return Activation::Tanh;
        case OnnxAct::None: break;
    }
    return Activation::None;
}

// A node name as a model file's layer name: one word of letters, digits and _ - . /
std::string layer_name(const std::string& node, size_t index) {
    std::string name;
    for (const char c : node) name += std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-./", c) ? c : '_';
    return name.empty() ? "layer" + std::to_string(index + 1) : name;
}

std::string dims_text(const std::vector<int64_t>& d) {
    std::string text;
    for (const int64_t x : d) text += (text.empty() ? "" : "x") + std::to_string(x);
    return text;
}

bool all_equal(const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [&](float x) { return x == v.front(); });
}

class Importer {
public:
    Importer(const OnnxGraph& g, std::string source) : g_(g), source_(std::move(source)) {}

    Model run() {
        read_input();
        walk();
        if (layers_.empty()) fail("the graph has no layer (Conv, pooling, Gemm or MatMul)");
        const auto hint = g_.metadata.find("lenet5.model");
        Model m = hint != g_.metadata.end() ? from_model_file(hint->second) : from_graph();
        m.outputs_softmax = softmax_;
        return m;
    }

private:
    [[noreturn]] void fail(const std::string& what) const { throw Error(source_ + ": " + what); }
    [[noreturn]] void fail(const OnnxOp& op, const std::string& what) const {
        fail("node '" + op.name + "' (" + op.op_type + "): " + what);
    }
    const std::vector<int64_t>& dims(int v) const { return g_.values[static_cast<size_t>(v)].dims; }

    void read_input() {
        const auto& d = dims(g_.input);
        if (d.size() == 3) {
            input_ = {static_cast<int>(d[0]), static_cast<int>(d[1]), static_cast<int>(d[2])};
        } else if (d.size() == 1 && d[0] == kImageSide * kImageSide) {
            input_ = {1, kImageSide, kImageSide};  // the image flattened
        } else if (d.size() == 1) {
            input_ = {static_cast<int>(d[0]), 1, 1};  // a vector: one value per map
        } else {
            fail("input '" + g_.input_name + "' is N x " + dims_text(d) + "; lenet5 takes N x C x H x W or N x values");
        }
    }

    // The graph as input scaling, padding and a chain of layers.
    void walk() {
        int v = g_.input;
        for (size_t k = 0; k < g_.ops.size(); ++k) {
            const OnnxOp& op = g_.ops[k];
            if (op.kind == OnnxOpKind::Add)
                fail(op, "adds two activations (a residual connection); lenet5 takes a chain of layers");
            if (op.in != v) fail(op, "does not read the node before it; lenet5 takes a chain of layers");
            v = op.out;
            const bool first = layers_.empty();
            switch (op.kind) {
                case OnnxOpKind::Affine: scale(op, first); break;
                case OnnxOpKind::Pad: pad(op, first); break;
                case OnnxOpKind::Conv:
                    if (op.kh != op.kw || op.sh != op.sw || op.pt != op.pl || op.pt != op.pb || op.pt != op.pr)
                        fail(op, "lenet5 takes square kernels with equal strides and padding on every side");
                    if (op.pt >= op.kh) fail(op, "lenet5 takes padding smaller than the kernel");
                    layers_.push_back({&op, activation_of(op.act)});
                    break;
                case OnnxOpKind::MaxPool:
                case OnnxOpKind::AvgPool:
                    if (op.kh != op.kw || op.sh != op.sw || op.pt || op.pl || op.pb || op.pr)
                        fail(op, "lenet5 takes square, unpadded pooling windows with equal strides");
                    layers_.push_back({&op, Activation::None});
                    break;
                case OnnxOpKind::Dense: layers_.push_back({&op, activation_of(op.act)}); break;
                case OnnxOpKind::Layer: layers_.push_back({&op, Activation::None}); break;
                case OnnxOpKind::Act:
                    if (first || layers_.back().act != Activation::None)
                        fail(op, "follows no layer it can be the activation of");
                    layers_.back().act = activation_of(op.act);
                    break;
                case OnnxOpKind::Reshape: reshape(op); break;
                case OnnxOpKind::Softmax:
                    if (k + 1 != g_.ops.size() || first) fail(op, "lenet5 takes a Softmax only at the end, after a layer");
                    softmax_ = true;
                    break;
                case OnnxOpKind::Add: break;  // refused above
            }
        }
    }

    // x * factor + addend on the pixels in [0, 1], before any layer: the input scaling.
    void scale(const OnnxOp& op, bool first) {
        if (!first || padded_)
            fail(op, "lenet5 takes arithmetic with constants only on the input, before any padding or layer (or "
                     "folded into the layer before it)");
        if (!all_equal(op.factor) || !all_equal(op.addend) || op.act != OnnxAct::None)
            fail(op, "scales the input by position or map; lenet5 takes one factor and one offset for every value");
        scaling_ = {op.factor.front(), op.addend.front()};
    }

    // Padding of a one-map input image, centred as image_to_input does, with the background value.
    void pad(const OnnxOp& op, bool first) {
        const auto &in = dims(op.in), &out = dims(op.out);
        if (!first || padded_ || in.size() != 3 || in[0] != 1)
            fail(op, "lenet5 takes padding only of a one-map input image, before any layer");
        if (op.pt != (out[1] - in[1]) / 2 || op.pl != (out[2] - in[2]) / 2)
            fail(op, "lenet5 takes the image centred in its padding (as many rows above as below, or one fewer)");
        if (op.pad_value != scaling_.value(0))
            fail(op, "pads with " + std::to_string(op.pad_value) + ", not the background (a 0 pixel's value, " +
                         std::to_string(scaling_.value(0)) + ")");
        padded_ = true;
        input_ = {1, static_cast<int>(out[1]), static_cast<int>(out[2])};
    }

    // A Flatten, or a Reshape to the maps a window layer slides over (what `export` writes).
    void reshape(const OnnxOp& op) {
        const auto& out = dims(op.out);
        if (out.size() == 1) return;
        const auto& in = dims(op.in);
        if (out.size() == 3 && (out == in || in.size() == 1)) return;
        fail(op, "reshapes to a shape lenet5 does not take (a flatten, or maps after a fully connected layer)");
    }

    Loss loss() const {
        return softmax_ || layers_.back().act == Activation::None ? Loss::SoftmaxCrossEntropy : Loss::SquaredError;
    }

    Model from_graph() {
        std::string name = source_.substr(source_.find_last_of('/') + 1);
        name = layer_name(name.substr(0, name.rfind('.')), 0);
        NetworkBuilder b(name, input_);
        b.scaling(scaling_);
        for (size_t k = 0; k < layers_.size(); ++k) {
            const OnnxOp& op = *layers_[k].op;
            const std::string n = layer_name(op.name, k);
            try {
                if (op.kind == OnnxOpKind::Conv)
                    b.conv(n, static_cast<int>(dims(op.out)[0]), op.kh, layers_[k].act, group_table(op), op.sh, op.pt);
                else if (op.kind == OnnxOpKind::Dense)
                    b.fully_connected(n, static_cast<int>(dims(op.out)[0]), layers_[k].act);
                else if (op.kind == OnnxOpKind::Layer)
                    add_by_settings(b, layer_type(op.layer), n, layers_[k].act, op.settings);
                else
                    b.pool(n, op.kind == OnnxOpKind::MaxPool ? LayerKind::MaxPool : LayerKind::AvgPool, op.kh, op.sh,
                           layers_[k].act);
            } catch (const Error& e) {
                fail(op, e.what());
            }
        }
        b.loss(loss());
        Model m;
        try {
            m.net = b.build();
        } catch (const Error& e) {
            fail(e.what());
        }
        m.text = model_file_text(m.net);
        m.weights = weights(m.net);
        return m;
    }

    // A grouped convolution as a connection table: each output map reads the input maps of its group
    // (the graph's weights between groups are zero). One group: every map reads every map (empty).
    std::vector<std::vector<int>> group_table(const OnnxOp& op) const {
        if (op.groups == 1) return {};
        const int out = static_cast<int>(dims(op.out)[0]), in = static_cast<int>(dims(op.in)[0]);
        std::vector<std::vector<int>> table(static_cast<size_t>(out), std::vector<int>(static_cast<size_t>(in), 0));
        for (int o = 0; o < out; ++o)
            for (int i = 0; i < in; ++i) table[size_t(o)][size_t(i)] = o / (out / op.groups) == i / (in / op.groups);
        return table;
    }

    // The model file `export` stored: the same network, with its tables, subsampling and recipe.
    Model from_model_file(const std::string& text) {
        Model m = parse_model(text, source_ + " (its lenet5.model metadata)");
        if (m.net.layers.size() != layers_.size())
            fail("its lenet5.model metadata has " + std::to_string(m.net.layers.size()) + " layers, the graph " +
                 std::to_string(layers_.size()));
        if (!(m.net.scaling.scale == scaling_.scale && m.net.scaling.shift == scaling_.shift) ||
            m.net.input.h != input_.h || m.net.input.w != input_.w)
            fail("its lenet5.model metadata does not match the graph's input");
        m.weights = weights(m.net);
        return m;
    }

    // The graph's weights in `net`'s parameter layout, checked against the layers' shapes.
    std::vector<float> weights(const Network& net) const {
        std::vector<float> p(net.param_count, 0.0f);
        for (size_t k = 0; k < net.layers.size(); ++k) {
            const LayerSpec& l = net.layers[k];
            const OnnxOp& op = *layers_[k].op;
            const auto& out = dims(op.out);
            const bool own = op.kind == OnnxOpKind::Layer;  // a kind's own operator: it keeps the shape it reads
            const bool window = l.kind != LayerKind::FullyConnected && !own;
            const bool same_kind = own                                   ? op.layer == l.kind && op.settings == l.attr
                                   : l.kind == LayerKind::MaxPool        ? op.kind == OnnxOpKind::MaxPool
                                   : l.kind == LayerKind::AvgPool        ? op.kind == OnnxOpKind::AvgPool
                                   : l.kind == LayerKind::FullyConnected ? op.kind == OnnxOpKind::Dense
                                                                         : op.kind == OnnxOpKind::Conv;
            const bool same_shape = own      ? g_.values[static_cast<size_t>(op.out)].size() == l.out.size()
                                    : window ? out.size() == 3 && out[0] == l.out.c && out[1] == l.out.h && out[2] == l.out.w
                                             : out.size() == 1 && out[0] == l.out.c;
            if (!same_kind || !same_shape || layers_[k].act != l.activation || (window && op.kh != l.kernel))
                fail(op, "does not match layer " + l.name + " of the network");
            std::copy(op.bias.begin(), op.bias.end(), p.begin() + static_cast<std::ptrdiff_t>(l.bias_offset));
            if (l.kind == LayerKind::Subsample) subsample_weights(l, op, p);
            else if (l.kind == LayerKind::Conv) conv_weights(l, op, p);
            else if (l.kind == LayerKind::FullyConnected)
                std::copy(op.weight.begin(), op.weight.end(), p.begin() + static_cast<std::ptrdiff_t>(l.weight_offset));
        }
        return p;
    }

    // Each connection's kernel; the kernels of the pairs a connection table leaves out must be zero.
    void conv_weights(const LayerSpec& l, const OnnxOp& op, std::vector<float>& p) const {
        const size_t kk = static_cast<size_t>(l.kernel) * static_cast<size_t>(l.kernel), maps = static_cast<size_t>(l.in.c);
        std::vector<bool> used(op.weight.size() / kk, false);
        for (size_t j = 0; j < l.conn_in.size(); ++j) {
            const size_t pair = static_cast<size_t>(l.conn_out[j]) * maps + static_cast<size_t>(l.conn_in[j]);
            used[pair] = true;
            std::copy_n(op.weight.begin() + static_cast<std::ptrdiff_t>(pair * kk), kk,
                        p.begin() + static_cast<std::ptrdiff_t>(l.weight_offset + j * kk));
        }
        for (size_t pair = 0; pair < used.size(); ++pair)
            if (!used[pair] && std::any_of(op.weight.begin() + static_cast<std::ptrdiff_t>(pair * kk),
                                           op.weight.begin() + static_cast<std::ptrdiff_t>((pair + 1) * kk),
                                           [](float w) { return w != 0.0f; }))
                fail(op, "has weights where the connection table of " + l.name + " has none (output map " +
                             std::to_string(pair / maps) + ", input map " + std::to_string(pair % maps) + ")");
    }

    // One coefficient per map: every tap of the map's own kernel, nothing across maps.
    void subsample_weights(const LayerSpec& l, const OnnxOp& op, std::vector<float>& p) const {
        const size_t kk = static_cast<size_t>(l.kernel) * static_cast<size_t>(l.kernel), maps = static_cast<size_t>(l.in.c);
        for (size_t o = 0; o < maps; ++o)
            for (size_t i = 0; i < maps; ++i)
                for (size_t t = 0; t < kk; ++t) {
                    const float w = op.weight[(o * maps + i) * kk + t];
                    if (w != (i == o ? op.weight[(o * maps + o) * kk] : 0.0f))
                        fail(op, "is not a subsampling (one weight per map, the same at every tap) as " + l.name + " is");
                }
        for (size_t o = 0; o < maps; ++o) p[l.weight_offset + o] = op.weight[(o * maps + o) * kk];
    }

    const OnnxGraph& g_;
    std::string source_;
    Shape input_;
    InputScaling scaling_{1.0f, 0.0f};  // the graph's input is the pixels in [0, 1]
    bool padded_ = false, softmax_ = false;
    std::vector<GraphLayer> layers_;
};

}  // namespace

Model import_onnx(const OnnxGraph& graph, const std::string& source) { return Importer(graph, source).run(); }

Model import_onnx_for_training(const OnnxGraph& graph, const std::string& source) {
    const auto& d = graph.values[static_cast<size_t>(graph.input)].dims;
    const bool image = d.size() == 3 && d[0] == 1 && d[1] >= kImageSide && d[2] >= kImageSide;
    if (!image && !(d.size() == 1 && d[0] == kImageSide * kImageSide))
        throw Error(source + ": input '" + graph.input_name + "' is N x " + dims_text(d) +
                    "; training takes the images as N x 1 x H x W (H, W at least 28) or N x 784");
    Model m = import_onnx(graph, source);
    if (m.net.classes != 10)
        throw Error(source + ": the network has " + std::to_string(m.net.classes) +
                    " outputs; MNIST and Fashion-MNIST have 10 classes");
    return m;
}

Model read_onnx_model(const std::string& path) { return import_onnx(read_onnx(path), path); }

Model read_onnx_model_for_training(const std::string& path) { return import_onnx_for_training(read_onnx(path), path); }

}  // namespace lenet5
