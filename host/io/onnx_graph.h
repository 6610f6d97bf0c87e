// An ONNX file as the reader (onnx_reader.h) understands it: operations over per-sample tensors in
// execution order, the batch the leading dimension of every activation, shapes known, constants
// folded. It is a step on the way, not a model: onnx_import.h turns it into the Network that every
// command and engine runs.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/layers/layer_kind.h"

namespace lenet5 {

enum class OnnxAct { None, Relu, Sigmoid, Tanh };

enum class OnnxOpKind {
    Conv,     // 2-D, one group: out[o][y][x] = act(bias[o] + sum w[o][i][ky][kx] in[i][y*s-p+ky][x*s-p+kx])
    MaxPool,  // 2-D windows; padding never wins
    AvgPool,  // 2-D windows; count_include_pad says whether padding counts in the divisor
    Dense,    // out[o] = act(sum_i weight[o][i] in[i] + bias[o]) (Gemm, MatMul), in flattened
    Add,      // out = act(in + in2), in2 another activation of the same shape
    Affine,   // out = act(in * factor + addend): Add, Sub, Mul, Div by constants, folded together
    Pad,      // constant padding of each map: pt/pl/pb/pr rows and columns of pad_value
    Act,      // out = act(in)
    Softmax,  // over a per-sample vector
    Reshape,  // the same floats under another shape (Flatten, Reshape): no work, the buffer is shared
    Layer,    // a registered layer kind's own operator (layers/layer_type.h's onnx_op): `layer`, `settings`
};

struct OnnxOp {
    OnnxOpKind kind = OnnxOpKind::Act;
    std::string name, op_type;  // the ONNX node's name (or "node N") and operator
    int in = -1, in2 = -1, out = -1;  // value ids
    OnnxAct act = OnnxAct::None;    // fused into Conv, Dense, Add, Affine; the function of Act
    // Conv and pooling: window, strides, padding (top/left, bottom/right); Pad: its padding
    int kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
    bool count_include_pad = false;
    int groups = 1;             // Conv: the file's groups (the weight below is expanded to one group)
    std::vector<float> weight;  // Conv: [out maps][in maps][kh][kw]; Dense: [out][in]
    std::vector<float> bias;    // Conv, Dense: one per output map / unit (zeros when absent)
    std::vector<float> factor, addend;  // Affine: broadcast to the per-sample shape
    float pad_value = 0.0f;             // Pad
    LayerKind layer{};                  // Layer: the kind, and its settings from the node's inputs after the data
    std::vector<float> settings;
};

struct OnnxValue {
    std::vector<int64_t> dims;  // per sample (the batch dimension removed)
    int64_t size() const {
        int64_t n = 1;
        for (const int64_t d : dims) n *= d;
        return n;
    }
};

struct OnnxGraph {
    std::vector<OnnxValue> values;
    std::vector<OnnxOp> ops;
    int input = -1, output = -1;
    std::string input_name, output_name;
    std::map<std::string, std::string> metadata;  // the model's metadata_props (e.g. lenet5.model)
};

// Folds what can be folded, each op into the one before it when that op's output feeds only it:
// consecutive Affines into one, an Affine constant per map or unit into the Conv or Dense before
// it, each activation into the Conv, Dense, Add or Affine before it.
// Called by the reader; exposed for tests of hand-made graphs.
void finish_graph(OnnxGraph& g);

const char* act_name(OnnxAct act);

}  // namespace lenet5
