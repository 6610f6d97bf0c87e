// An inference graph read from ONNX (onnx_reader.h): operations over per-sample tensors in
// execution order, the batch the leading dimension of every activation. Shapes are known when
// the graph is built; weights are laid out as the executors read them.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lenet5 {

enum class InferAct { None, Relu, Sigmoid, Tanh };

enum class InferOpKind {
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
};

struct InferOp {
    InferOpKind kind = InferOpKind::Act;
    std::string name, op_type;  // the ONNX node's name (or "node N") and operator
    int in = -1, in2 = -1, out = -1;  // value ids
    InferAct act = InferAct::None;    // fused into Conv, Dense, Add, Affine; the function of Act
    // Conv and pooling: window, strides, padding (top/left, bottom/right); Pad: its padding
    int kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
    bool count_include_pad = false;
    int groups = 1;             // Conv: the file's groups (the weight below is expanded to one group)
    std::vector<float> weight;  // Conv: [out maps][in maps][kh][kw]; Dense: [out][in]
    std::vector<float> bias;    // Conv, Dense: one per output map / unit (zeros when absent)
    std::vector<float> factor, addend;  // Affine: broadcast to the per-sample shape
    float pad_value = 0.0f;             // Pad
};

struct InferValue {
    std::vector<int64_t> dims;  // per sample (the batch dimension removed)
    int64_t size() const {
        int64_t n = 1;
        for (const int64_t d : dims) n *= d;
        return n;
    }
};

struct InferGraph {
    std::vector<InferValue> values;
    std::vector<InferOp> ops;
    int input = -1, output = -1;
    std::string input_name, output_name;
    std::map<std::string, std::string> metadata;  // the model's metadata_props (e.g. lenet5.model)
    // Where each value lives: values that are never alive at the same time share a slot (an op's
    // output never shares its inputs' slot; a Reshape's output is its input's slot).
    std::vector<int> slot_of;
    std::vector<int64_t> slot_floats;  // per sample
};

// Folds what can be folded, each op into the one before it when that op's output feeds only it:
// consecutive Affines into one, an Affine constant per map or unit into the Conv or Dense before
// it, each activation into the Conv, Dense, Add or Affine before it. Then assigns the slots.
// Called by the reader; exposed for tests of hand-made graphs.
void finish_graph(InferGraph& g);

const char* act_name(InferAct act);

inline float activate(InferAct a, float x) {
    switch (a) {
        case InferAct::Relu: return x > 0.0f ? x : 0.0f;
        case InferAct::Sigmoid: return 1.0f / (1.0f + std::exp(-x));
        case InferAct::Tanh: return std::tanh(x);
        case InferAct::None: break;
    }
    return x;
}

// dst[x] = activate(act, src[x]) for x < n, the branch outside the loop so that each vectorises.
inline void activate_into(const float* src, int n, InferAct act, float* dst) {
    if (act == InferAct::None)
        for (int x = 0; x < n; ++x) dst[x] = src[x];
    else if (act == InferAct::Relu)
        for (int x = 0; x < n; ++x) dst[x] = src[x] > 0.0f ? src[x] : 0.0f;
    else
        for (int x = 0; x < n; ++x) dst[x] = activate(act, src[x]);
}

}  // namespace lenet5
