#include "io/onnx_graph.h"

#include <algorithm>

namespace lenet5 {

const char* act_name(OnnxAct act) {
    switch (act) {
        case OnnxAct::Relu: return "relu";
        case OnnxAct::Sigmoid: return "sigmoid";
        case OnnxAct::Tanh: return "tanh";
        case OnnxAct::None: break;
    }
    return "none";
}

namespace {

// How many ops read each value (the graph's output counts as one more reader).
std::vector<int> readers(const OnnxGraph& g) {
    std::vector<int> n(g.values.size(), 0);
    for (const OnnxOp& op : g.ops) {
        ++n[size_t(op.in)];
        if (op.in2 >= 0) ++n[size_t(op.in2)];
    }
    ++n[size_t(g.output)];
    return n;
}

// Whether v (per-sample, over maps of `plane` elements each) holds one value per map.
bool per_map(const std::vector<float>& v, int64_t plane) {
    for (size_t e = 0; e < v.size(); ++e)
        if (v[e] != v[e - e % size_t(plane)]) return false;
    return true;
}

// Folds `op` (an Affine or Act) into `prev`, whose output only `op` reads; false if it cannot.
bool fold_into(const OnnxGraph& g, OnnxOp& prev, const OnnxOp& op) {
    if (prev.act != OnnxAct::None) return false;
    if (op.kind == OnnxOpKind::Act) {
        if (prev.kind != OnnxOpKind::Conv && prev.kind != OnnxOpKind::Dense && prev.kind != OnnxOpKind::Add &&
            prev.kind != OnnxOpKind::Affine)
            return false;
        prev.act = op.act;
        return true;
    }
    if (prev.kind == OnnxOpKind::Affine) {  // (x f1 + a1) f2 + a2
        for (size_t e = 0; e < prev.factor.size(); ++e) {
            prev.addend[e] = prev.addend[e] * op.factor[e] + op.addend[e];
            prev.factor[e] *= op.factor[e];
        }
        prev.act = op.act;
        return true;
    }
    if (prev.kind != OnnxOpKind::Conv && prev.kind != OnnxOpKind::Dense) return false;
    const auto& dims = g.values[size_t(prev.out)].dims;
    const int64_t maps = dims[0], plane = g.values[size_t(prev.out)].size() / maps;
    if (!per_map(op.factor, plane) || !per_map(op.addend, plane)) return false;
    const size_t per_output = prev.weight.size() / size_t(maps);
    for (int64_t o = 0; o < maps; ++o) {
        const float f = op.factor[size_t(o * plane)], a = op.addend[size_t(o * plane)];
        for (size_t k = 0; k < per_output; ++k) prev.weight[size_t(o) * per_output + k] *= f;
        prev.bias[size_t(o)] = prev.bias[size_t(o)] * f + a;
    }
    prev.act = op.act;
    return true;
}

void fold(OnnxGraph& g) {
    const std::vector<int> reads = readers(g);
    std::vector<OnnxOp> kept;
    for (OnnxOp& op : g.ops) {
        if ((op.kind == OnnxOpKind::Act || op.kind == OnnxOpKind::Affine) && !kept.empty()) {
            OnnxOp& prev = kept.back();
            if (prev.out == op.in && reads[size_t(op.in)] == 1 && fold_into(g, prev, op)) {
                prev.out = op.out;
                prev.name += "+" + op.name;
                continue;
            }
        }
        kept.push_back(std::move(op));
    }
    g.ops = std::move(kept);
}

}  // namespace

void finish_graph(OnnxGraph& g) { fold(g); }

}  // namespace lenet5
