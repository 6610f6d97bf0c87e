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

void fuse_activations(InferGraph& g) {
    std::vector<int> readers(g.values.size(), 0);
    for (const InferOp& op : g.ops) {
        ++readers[op.in];
        if (op.in2 >= 0) ++readers[op.in2];
    }
    std::vector<InferOp> kept;
    for (InferOp& op : g.ops) {
        if (op.kind == InferOpKind::Act && !kept.empty()) {
            InferOp& prev = kept.back();
            const bool fusable = prev.kind == InferOpKind::Conv || prev.kind == InferOpKind::Dense ||
                                 prev.kind == InferOpKind::Add;
            if (fusable && prev.act == InferAct::None && prev.out == op.in && readers[op.in] == 1 &&
                op.in != g.output) {
                prev.act = op.act;
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
    fuse_activations(g);
    assign_slots(g);
}

}  // namespace lenet5
