#include "infer/infer_graph.h"

#include <algorithm>

namespace lenet5 {

const char* act_name(InferAct act) {
    switch (act) {
        case InferAct::Relu: return "relu";
        case InferAct::Sigmoid: return "sigmoid";
        case InferAct::Tanh: return "tanh";
        case InferAct::None: break;
    }
    return "none";
}

namespace {

// How many ops read each value (the graph's output counts as one more reader).
std::vector<int> readers(const InferGraph& g) {
    std::vector<int> n(g.values.size(), 0);
    for (const InferOp& op : g.ops) {
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
bool fold_into(const InferGraph& g, InferOp& prev, const InferOp& op) {
    if (prev.act != InferAct::None) return false;
    if (op.kind == InferOpKind::Act) {
        if (prev.kind != InferOpKind::Conv && prev.kind != InferOpKind::Dense && prev.kind != InferOpKind::Add &&
            prev.kind != InferOpKind::Affine)
            return false;
        prev.act = op.act;
        return true;
    }
    if (prev.kind == InferOpKind::Affine) {  // (x f1 + a1) f2 + a2
        for (size_t e = 0; e < prev.factor.size(); ++e) {
            prev.addend[e] = prev.addend[e] * op.factor[e] + op.addend[e];
            prev.factor[e] *= op.factor[e];
        }
        prev.act = op.act;
        return true;
    }
    if (prev.kind != InferOpKind::Conv && prev.kind != InferOpKind::Dense) return false;
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

void fold(InferGraph& g) {
    const std::vector<int> reads = readers(g);
    std::vector<InferOp> kept;
    for (InferOp& op : g.ops) {
        if ((op.kind == InferOpKind::Act || op.kind == InferOpKind::Affine) && !kept.empty()) {
            InferOp& prev = kept.back();
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

// Greedy: an op's output takes the first free slot (growing it if needed); a slot frees after
// the last op that reads a value in it.
void assign_slots(InferGraph& g) {
    const int n = static_cast<int>(g.values.size());
    std::vector<int> last_read(n, -1);
    for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
        last_read[g.ops[i].in] = i;
        if (g.ops[i].in2 >= 0) last_read[g.ops[i].in2] = i;
    }
    last_read[g.output] = static_cast<int>(g.ops.size());
    g.slot_of.assign(n, -1);
    g.slot_floats.clear();
    std::vector<int> busy_until;  // per slot: the last op that reads what it holds
    auto take = [&](int value, int from) {
        for (size_t s = 0; s < busy_until.size(); ++s)
            if (busy_until[s] < from) {
                g.slot_of[value] = static_cast<int>(s);
                busy_until[s] = std::max(last_read[value], from);
                g.slot_floats[s] = std::max(g.slot_floats[s], g.values[value].size());
                return;
            }
        g.slot_of[value] = static_cast<int>(busy_until.size());
        busy_until.push_back(std::max(last_read[value], from));
        g.slot_floats.push_back(g.values[value].size());
    };
    take(g.input, 0);
    for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
        const InferOp& op = g.ops[i];
        if (op.kind == InferOpKind::Reshape) {
            const int s = g.slot_of[op.in];
            g.slot_of[op.out] = s;
            busy_until[s] = std::max(busy_until[s], last_read[op.out]);
        } else {
            take(op.out, i);  // busy from op i on: never one of its own inputs' slots
        }
    }
}

}  // namespace

void finish_graph(InferGraph& g) {
    fold(g);
    assign_slots(g);
}

}  // namespace lenet5
