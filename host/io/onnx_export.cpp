#include "io/onnx_export.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cstdint>

#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "common/error.h"
#include "model/layers/layer_type.h"
#include "model/model_file.h"

namespace lenet5 {
namespace {

constexpr int64_t kOpset = 13;  // Pad takes its pads and value as inputs; every operator we use exists

// Appends nodes and initializers to a graph; each returns the name of the tensor it made.
class GraphWriter {
public:
    explicit GraphWriter(onnx::GraphProto& graph) : graph_(graph) {}

    std::string floats(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
        onnx::TensorProto& t = tensor(name, dims, onnx::TensorProto::FLOAT);
        t.mutable_float_data()->Reserve(static_cast<int>(values.size()));
        for (float v : values) t.add_float_data(v);
        return name;
    }

    std::string int64s(const std::string& name, const std::vector<int64_t>& values) {
        onnx::TensorProto& t = tensor(name, {static_cast<int64_t>(values.size())}, onnx::TensorProto::INT64);
        for (int64_t v : values) t.add_int64_data(v);
        return name;
    }

    // A node with one output named `output`; attributes are added on the returned node.
    onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output) {
        onnx::NodeProto& n = *graph_.add_node();
        n.set_op_type(op);
        n.set_name(output);
        for (const auto& in : inputs) n.add_input(in);
        n.add_output(output);
        return n;
    }

    static void ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& values) {
        onnx::AttributeProto& a = *n.add_attribute();
        a.set_name(name);
        a.set_type(onnx::AttributeProto::INTS);
        for (int64_t v : values) a.add_ints(v);
    }

    static void integer(onnx::NodeProto& n, const std::string& name, int64_t value) {
        onnx::AttributeProto& a = *n.add_attribute();
        a.set_name(name);
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(value);
    }

    // A graph input or output: float [N, dims...], N a free batch dimension.
    static void value_info(onnx::ValueInfoProto& v, const std::string& name, const std::vector<int64_t>& dims) {
        v.set_name(name);
        onnx::TypeProto_Tensor& t = *v.mutable_type()->mutable_tensor_type();
        t.set_elem_type(onnx::TensorProto::FLOAT);
        t.mutable_shape()->add_dim()->set_dim_param("N");
        for (int64_t d : dims) t.mutable_shape()->add_dim()->set_dim_value(d);
    }

private:
    onnx::TensorProto& tensor(const std::string& name, const std::vector<int64_t>& dims, int type) {
        onnx::TensorProto& t = *graph_.add_initializer();
        t.set_name(name);
        t.set_data_type(type);
        for (int64_t d : dims) t.add_dims(d);
        return t;
    }

    onnx::GraphProto& graph_;
};

// `count` parameters from `offset` of the flat buffer.
std::vector<float> slice(const std::vector<float>& params, size_t offset, size_t count) {
    return std::vector<float>(params.begin() + static_cast<std::ptrdiff_t>(offset),
                              params.begin() + static_cast<std::ptrdiff_t>(offset + count));
}

// Our connection list as a dense [maps][in maps][K][K] kernel: zeros where the table has no connection.
std::vector<float> dense_conv_weights(const LayerSpec& l, const std::vector<float>& params) {
    const size_t kk = static_cast<size_t>(l.kernel) * static_cast<size_t>(l.kernel);
    std::vector<float> w(static_cast<size_t>(l.out.c) * static_cast<size_t>(l.in.c) * kk, 0.0f);
    const float* src = params.data() + l.weight_offset;
    for (size_t j = 0; j < l.conn_in.size(); ++j) {
        const size_t dst = (static_cast<size_t>(l.conn_out[j]) * static_cast<size_t>(l.in.c) + static_cast<size_t>(l.conn_in[j])) * kk;
        for (size_t k = 0; k < kk; ++k) w[dst + k] = src[j * kk + k];
    }
    return w;
}

// Subsampling as a depthwise kernel [maps][1][K][K]: every tap of map c is coefficient[c].
std::vector<float> subsample_weights(const LayerSpec& l, const std::vector<float>& params) {
    const size_t kk = static_cast<size_t>(l.kernel) * static_cast<size_t>(l.kernel);
    std::vector<float> w;
    w.reserve(static_cast<size_t>(l.out.c) * kk);
    for (int c = 0; c < l.out.c; ++c) w.insert(w.end(), kk, params[l.weight_offset + static_cast<size_t>(c)]);
    return w;
}

std::vector<float> biases(const LayerSpec& l, const std::vector<float>& params) {
    return slice(params, l.bias_offset, l.bias_count);
}

// The pixels [0, 1] -> the network's input, as image_to_input (preprocess.h) does it.
std::string preprocess(GraphWriter& g, const Network& net, int rows, int cols) {
    if (net.input.c != 1)
        throw Error("export: model " + net.name + " takes " + std::to_string(net.input.c) +
                    " input maps; the images have one");
    if (net.input.h < rows || net.input.w < cols)
        throw Error("export: model " + net.name + "'s input " + std::to_string(net.input.h) + "x" +
                    std::to_string(net.input.w) + " is smaller than the " + std::to_string(rows) + "x" +
                    std::to_string(cols) + " images");
    g.node("Mul", {"image", g.floats("scale", {}, {net.scaling.scale})}, "multiplied");
    g.node("Add", {"multiplied", g.floats("shift", {}, {net.scaling.shift})}, "scaled");
    if (net.input.h == rows && net.input.w == cols) return "scaled";
    const int64_t top = (net.input.h - rows) / 2, left = (net.input.w - cols) / 2;
    const int64_t bottom = net.input.h - rows - top, right = net.input.w - cols - left;
    // The border is the background, a 0 pixel's value: the shift.
    g.node("Pad", {"scaled", g.int64s("pads", {0, 0, top, left, 0, 0, bottom, right}), "shift"}, "padded");
    return "padded";
}

std::string activation_node(GraphWriter& g, const LayerSpec& l, const std::string& y);

// One layer's nodes from `input`; returns the name of its output (after the activation).
// `flat`: the tensor is [N, features] (after a Gemm) rather than [N, C, H, W].
std::string layer_nodes(GraphWriter& g, const LayerSpec& l, const std::vector<float>& params, const std::string& input,
                        bool& flat) {
    const std::string& n = l.name;
    const int64_t k = l.kernel, s = l.stride;
    const std::string y = n + "_out";
    std::string x = input;
    const LayerType& kind = layer_type(l.kind);
    if (kind.onnx_op) {  // a kind's own operator, its settings as scalar inputs after the data
        std::vector<std::string> inputs{x};
        for (size_t i = 0; i < kind.settings.size(); ++i)
            inputs.push_back(g.floats(n + "_" + kind.settings[i].key, {}, {l.attr.at(i)}));
        g.node(kind.onnx_op, inputs, y);
        return activation_node(g, l, y);
    }
    if (flat && l.kind != LayerKind::FullyConnected) {  // maps again, for a layer that slides a window
        x = n + "_maps";
        g.node("Reshape", {input, g.int64s(n + "_shape", {0, l.in.c, l.in.h, l.in.w})}, x);
        flat = false;
    }
    switch (l.kind) {
        case LayerKind::Conv: {
            auto& c = g.node("Conv",
                             {x, g.floats(n + "_W", {l.out.c, l.in.c, k, k}, dense_conv_weights(l, params)),
                              g.floats(n + "_B", {l.out.c}, biases(l, params))},
                             y);
            GraphWriter::ints(c, "kernel_shape", {k, k});
            GraphWriter::ints(c, "strides", {s, s});
            GraphWriter::ints(c, "pads", {l.pad, l.pad, l.pad, l.pad});
            break;
        }
        case LayerKind::Subsample: {
            auto& c = g.node("Conv",
                             {x, g.floats(n + "_W", {l.out.c, 1, k, k}, subsample_weights(l, params)),
                              g.floats(n + "_B", {l.out.c}, biases(l, params))},
                             y);
            GraphWriter::ints(c, "kernel_shape", {k, k});
            GraphWriter::ints(c, "strides", {k, k});
            GraphWriter::integer(c, "group", l.out.c);
            break;
        }
        case LayerKind::MaxPool:
        case LayerKind::AvgPool: {
            auto& p = g.node(l.kind == LayerKind::MaxPool ? "MaxPool" : "AveragePool", {x}, y);
            GraphWriter::ints(p, "kernel_shape", {k, k});
            GraphWriter::ints(p, "strides", {s, s});
            break;
        }
        case LayerKind::FullyConnected: {
            std::string in = x;
            if (!flat) {
                in = n + "_flat";
                GraphWriter::integer(g.node("Flatten", {x}, in), "axis", 1);
            }
            flat = true;
            auto& m = g.node("Gemm",
                             {in, g.floats(n + "_W", {l.out.c, l.in.size()}, slice(params, l.weight_offset, l.weight_count)),
                              g.floats(n + "_B", {l.out.c}, biases(l, params))},
                             y);
            GraphWriter::integer(m, "transB", 1);
            break;
        }
        default: break;  // the kinds with their own operator, above
    }
    return activation_node(g, l, y);
}

// Layer l's activation after its output y, if it has one; the name of what it made.
std::string activation_node(GraphWriter& g, const LayerSpec& l, const std::string& y) {
    const std::string& n = l.name;
    switch (l.activation) {
        case Activation::None: return y;
        case Activation::Tanh: return g.node("Tanh", {y}, n + "_tanh").output(0);
        case Activation::Sigmoid: return g.node("Sigmoid", {y}, n + "_sigmoid").output(0);
        case Activation::ReLU: return g.node("Relu", {y}, n + "_relu").output(0);
    }
    return y;
}

}  // namespace

onnx::ModelProto onnx_model(const Network& net, const std::vector<float>& params, int rows, int cols) {
    check_param_count(net, params, "the parameters");
    onnx::ModelProto model;
    model.set_ir_version(onnx::IR_VERSION);
    model.set_producer_name("lenet5-cl");
    model.set_producer_version(LENET5_VERSION);
    onnx::OperatorSetIdProto& opset = *model.add_opset_import();
    opset.set_domain("");
    opset.set_version(kOpset);
    onnx::GraphProto& graph = *model.mutable_graph();
    graph.set_name(net.name);
    const std::string output = net.loss == Loss::SoftmaxCrossEntropy ? "logits" : "outputs";
    graph.set_doc_string("lenet5-cl model " + net.name + ". Input 'image': float [N, 1, " + std::to_string(rows) +
                         ", " + std::to_string(cols) + "], pixels in [0, 1] (byte / 255). Output '" + output +
                         "': float [N, " + std::to_string(net.classes) + "], " +
                         (net.loss == Loss::SoftmaxCrossEntropy ? "the scores before the softmax"
                                                                : "the last layer's outputs (squared-error model)") +
                         "; the predicted class is the arg-max.");
    GraphWriter g(graph);
    GraphWriter::value_info(*graph.add_input(), "image", {1, rows, cols});
    std::string x = preprocess(g, net, rows, cols);
    bool flat = false;
    for (const LayerSpec& l : net.layers) x = layer_nodes(g, l, params, x, flat);
    if (!flat) GraphWriter::integer(g.node("Flatten", {x}, output), "axis", 1);
    else g.node("Identity", {x}, output);
    GraphWriter::value_info(*graph.add_output(), output, {net.classes});
    return model;
}

std::string export_checkpoint(const std::string& checkpoint_path, const std::string& onnx_path) {
    const Checkpoint c = load_checkpoint(checkpoint_path);
    const Model m = checkpoint_model(c, checkpoint_path);
    const Network& net = m.net;
    onnx::ModelProto model = onnx_model(net, c.params);
    onnx::StringStringEntryProto& epoch = *model.add_metadata_props();
    epoch.set_key("lenet5.epochs_trained");
    epoch.set_value(std::to_string(c.epoch));
    // The model file: `train --model` of the export gets the connection tables, the trainable
    // subsampling and the training recipe back (onnx_import.h).
    onnx::StringStringEntryProto& text = *model.add_metadata_props();
    text.set_key("lenet5.model");
    text.set_value(m.text);
    try {
        onnx::checker::check_model(model);
    } catch (const std::exception& e) {
        throw Error("export: the ONNX checker rejects the model built from " + checkpoint_path + ": " + e.what());
    }
    std::string bytes;
    if (!model.SerializeToString(&bytes)) throw Error("export: cannot serialise the ONNX model of " + checkpoint_path);
    write_file_atomic(onnx_path, bytes);
    return "lenet5: exported " + checkpoint_path + " (model " + net.name + ", epoch " + std::to_string(c.epoch) +
           ", " + std::to_string(net.param_count) + " parameters) to " + onnx_path + " (ONNX opset " +
           std::to_string(kOpset) + ", input 'image' [N,1,28,28] in [0,1], output '" + model.graph().output(0).name() + "')";
}

}  // namespace lenet5
