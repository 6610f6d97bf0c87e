#include "opencl/opencl_program.h"

#include <algorithm>
#include <sstream>

#include "common/error.h"

namespace lenet5 {
namespace {

// A convolution whose window covers its whole input and that reads every input map (C5) is a
// fully connected layer with the same weight layout: connection j = o*IC + i holds
// W[o][i][ky][kx] = W[o][(i*IH + ky)*IW + kx].
bool conv_is_fc(const LayerSpec& l) {
    return l.kind == LayerKind::Conv && l.kernel == l.in.h && l.kernel == l.in.w && l.pad == 0 &&
           l.connections() == l.in.c * l.out.c;
}

const char* act_name(Activation a) {
    switch (a) {
        case Activation::Tanh: return "ACT_TANH";
        case Activation::Sigmoid: return "ACT_SIGMOID";
        case Activation::ReLU: return "ACT_RELU";
        case Activation::None: break;
    }
    return "ACT_NONE";
}

// Which layers start a convolution + subsampling pair (pair_conv) and where the fully connected
// layers begin (pairs_end), or why the per-sample kernels cannot run the network.
struct Pairs {
    std::vector<bool> pair_conv;
    size_t pairs_end = 0;
    std::string refusal;  // empty when the network fits
};

Pairs find_pairs(const Network& net) {
    const auto& layers = net.layers;
    const size_t L = layers.size();
    Pairs r{std::vector<bool>(L, false), 0, ""};
    for (size_t k = 0; k < L; ++k) {
        const LayerSpec& l = layers[k];
        if (l.kind != LayerKind::Conv && l.kind != LayerKind::Subsample && l.kind != LayerKind::FullyConnected)
            return {{}, 0, std::string("the per-sample OpenCL kernels have no ") + kind_name(l.kind) + " layers; layer " +
                               l.name + " is one"};
        if (l.kind == LayerKind::Conv && (l.stride != 1 || l.pad))
            return {{}, 0, "the per-sample OpenCL kernels support convolutions of stride 1 without padding; layer " +
                               l.name + " has another"};
        const bool pair = l.kind == LayerKind::Conv && k + 1 < L && layers[k + 1].kind == LayerKind::Subsample;
        if (pair) {
            if (k != r.pairs_end)
                return {{}, 0, "the per-sample OpenCL kernels need the convolution + subsampling pairs before the fully "
                               "connected layers; layer " + l.name + " comes after one"};
            r.pair_conv[k] = true;
            r.pairs_end = k + 2;
            ++k;
        } else if (l.kind != LayerKind::FullyConnected && !conv_is_fc(l)) {
            return {{}, 0, "the per-sample OpenCL kernels run each convolution fused with the subsampling after it; "
                           "layer " + l.name + " is not part of such a pair"};
        }
    }
    const LayerSpec& last = layers.back();
    if (r.pairs_end == L)
        return {{}, 0, "the per-sample OpenCL kernels need the last layer (" + last.name + ") to be fully connected"};
    if (net.loss == Loss::SoftmaxCrossEntropy && last.activation != Activation::None)
        return {{}, 0, "the per-sample OpenCL kernels need the last layer (" + last.name +
                           ") without activation: it is fused with the softmax"};
    return r;
}

std::string table(const std::string& name, const std::vector<int32_t>& values) {
    std::ostringstream s;
    s << "__constant int " << name << "[] = {";
    for (size_t i = 0; i < values.size(); ++i) s << (i ? ", " : "") << values[i];
    s << "};\n";
    return s.str();
}

// Lays out a work area: each call reserves `floats` and returns where they start.
struct Area {
    size_t size = 0;
    size_t take(size_t floats) {
        const size_t at = size;
        size += floats;
        return at;
    }
};

std::string loss_call(const Network& net, size_t y_at, size_t delta_at) {
    const LayerSpec& last = net.layers.back();
    std::ostringstream s;
    if (net.loss == Loss::SoftmaxCrossEntropy)
        s << "    softmax_loss(work + " << y_at << ", " << last.out.size() << ", label, scale, delta + " << delta_at
          << ", loss, hit);\n";
    else
        s << "    squared_loss(work + " << y_at << ", " << last.out.size() << ", " << act_name(last.activation)
          << ", label, scale, delta + " << delta_at << ", loss, hit);\n";
    return s.str();
}

// A network that starts fully connected: step.cl's SPREAD_FIRST kernels. The tail's forward has
// its own work area (the first layer's outputs at 0, then each layer's, then the lane sums); its
// backward is NETWORK_BACKWARD. In step_update and step_run a parameter's gradient reads the group's
// own rows (act, delta), and the first layer's input from the sample's input (first_in).
void spread_first(const Network& net, const DeviceLayout& layout, int lanes, SampleProgram& p, std::ostringstream& s) {
    const auto& layers = net.layers;
    const size_t L = layers.size();
    const LayerSpec& first = layers[0];
    p.spread = true;
    p.first_outputs = static_cast<size_t>(first.out.size());
    p.tail_begin = L > 1 ? layout.weights(1).device : layout.size();
    Area tail;
    std::vector<size_t> out(L, 0);
    tail.take(p.first_outputs);
    size_t most_lanes = 0;
    for (size_t k = 1; k < L; ++k) {
        out[k] = tail.take(static_cast<size_t>(layers[k].out.size()));
        most_lanes = std::max(most_lanes, static_cast<size_t>(layers[k].out.size()) * static_cast<size_t>(lanes));
    }
    const size_t part_at = tail.take(most_lanes);
    p.tail_work = std::max(tail.size, p.backward_work);

    s << "#define SPREAD_FIRST 1\n#define FIRST_OUT " << p.first_outputs << "\n#define FIRST_AT " << p.output_at[0]
      << "\n#define TAIL_BEGIN " << p.tail_begin << "\n#define TAIL_FLOATS " << layout.size() - p.tail_begin
      << "\n#define TAIL_WORK " << p.tail_work << "\n#define FIRST_W "
      << layout.weights(0).device << "\n#define FIRST_B " << layout.bias(0).device << "\n#define FIRST_IN "
      << first.in.size() << "\n";
    // The first layer's rows [row0, row0 + rows) of the sample whose input is x, from the parameters
    // `params`, into the sample's activations `acts` (first_rows_forward's chunks).
    s << "#define NETWORK_FIRST_ROWS(x, params, part, acts, row0, rows) \\\n    fc_rows_forward(x, params + "
      << layout.weights(0).device << ", params + " << layout.bias(0).device << ", " << first.in.size() << ", "
      << first.out.size() << ", " << act_name(first.activation) << ", part, acts + " << p.output_at[0]
      << ", row0, rows)\n";
    std::ostringstream fw;
    for (size_t k = 1; k < L; ++k) {
        const LayerSpec& l = layers[k];
        fw << "    fc_forward(work + " << out[k - 1] << ", params + " << layout.weights(k).device << ", params + "
           << layout.bias(k).device << ", " << l.in.size() << ", " << l.out.size() << ", " << act_name(l.activation)
           << ", work + " << part_at << ", work + " << out[k] << ", act + " << p.output_at[k] << "); \\\n";
    }
    s << "#define NETWORK_TAIL_FORWARD \\\n" << fw.str() << loss_call(net, out[L - 1], p.output_at[L - 1]);
    std::ostringstream gr;
    for (size_t k = 0; k < L; ++k) {
        const auto& w = layout.weights(k);
        const auto& b = layout.bias(k);
        const int I = layers[k].in.size();
        gr << "    if (p >= " << w.device << " && p < " << w.device + w.count << ") g = fc_weight_gradient("
           << (k ? "act" : "first_in") << ", delta, 1, (p - " << w.device << ") / " << I << ", (p - " << w.device << ") % "
           << I << ", " << p.output_at[k] << ", " << (k ? p.output_at[k - 1] : 0) << ", 0); \\\n";
        gr << "    if (p >= " << b.device << " && p < " << b.device + b.count << ") g = fc_bias_gradient(delta, 1, p - "
           << b.device << ", " << p.output_at[k] << ", 0); \\\n";
    }
    s << "#define NETWORK_STEP_GRADIENTS \\\n" << gr.str() << "\n";
}

// Where layer k's input is in a sample's activations (the network's input, or layer k-1's output).
size_t input_at(const SampleProgram& p, size_t k) { return k ? p.output_at[k - 1] : 0; }

// The distance between rows (or maps) in the work area where a layer function's items read several
// at one column: an odd number of floats, so that they fall in different __local banks
// (sample_layers.cl's pair_forward and pair_backward use the same rule).
size_t bank_stride(size_t floats) { return floats | 1; }

// The gradients kernel's work-groups (step.cl's batch_gradient): the flat ranges (the layout but
// the fully connected layers' weights) GRAD_PARAMS parameters a group, then each fully connected
// layer's weights in tiles of GRAD_LANES outputs by GRAD_PARAMS inputs.
void write_gradient_groups(const std::vector<LayerSpec>& layers, const DeviceLayout& layout, size_t pairs_end,
                           int grad_params, int grad_lanes, SampleProgram& p, std::ostringstream& s) {
    const size_t P = static_cast<size_t>(grad_params), rows = static_cast<size_t>(grad_lanes);
    std::ostringstream flat, tiles;
    size_t flat_floats = 0, at = 0, tile_groups = 0;
    // A flat range [at, end) of the layout: the flat parameters from flat_floats on.
    const auto range = [&](size_t end) {
        if (end == at) return;
        flat << "(j) < " << flat_floats + (end - at) << " ? (j) - " << flat_floats << " + " << at << " : ";
        flat_floats += end - at;
    };
    for (size_t k = pairs_end; k < layers.size(); ++k) {
        const auto& w = layout.weights(k);
        range(w.device);
        at = w.device + w.count;
        const size_t O = static_cast<size_t>(layers[k].out.size()), I = static_cast<size_t>(layers[k].in.size());
        const size_t n = (O + rows - 1) / rows * ((I + P - 1) / P);
        tiles << "    if (tile < " << n << ") return fc_weight_tile(acts, deltas, count, " << O << ", " << I << ", "
              << p.output_at[k] << ", " << input_at(p, k) << ", " << w.device
              << ", tile, sums); \\\n    tile -= " << n << "; \\\n";
        tile_groups += n;
    }
    range(layout.size());
    const size_t flat_groups = (flat_floats + P - 1) / P;
    p.gradient_groups = flat_groups + tile_groups;
    s << "#define FLAT_FLOATS " << flat_floats << "\n#define FLAT_GROUPS " << flat_groups << "\n#define GRAD_GROUPS "
      << p.gradient_groups << "\n#define NETWORK_FLAT_PARAM(j) (" << flat.str() << "PARAM_FLOATS)\n";
    s << "#define NETWORK_FC_TILES \\\n" << tiles.str() << "\n";
}

}  // namespace

const std::vector<SampleKnob>& sample_knobs() {
    static const std::vector<SampleKnob> knobs{
        {"FWD_RUN", {5, 4, 8}},     // forward convolution outputs per item, at most
        {"BWD_RUN", {8, 4}},        // input-delta outputs per item, at most
        {"FC_LANES", {16, 8, 32}},  // items of a fully connected forward row (up to LANES)
    };
    return knobs;
}

std::string knob_options(const std::string& knobs) {
    std::string options;
    std::istringstream in(knobs);
    for (std::string item; std::getline(in, item, ',');) {
        const size_t eq = item.find('=');
        const std::string name = item.substr(0, eq);
        const auto knob = std::find_if(sample_knobs().begin(), sample_knobs().end(),
                                       [&](const SampleKnob& k) { return name == k.name; });
        const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
        if (knob == sample_knobs().end() ||
            std::none_of(knob->values.begin(), knob->values.end(), [&](int v) { return std::to_string(v) == value; }))
            throw Error("the per-sample kernels have no knob setting '" + item + "'");
        options += " -D" + item;
    }
    return options;
}

std::string sample_refusal(const Network& net) { return find_pairs(net).refusal; }

SampleProgram sample_program(const Network& net, const DeviceLayout& layout, int group, int lanes, int grad_params,
                             int grad_lanes) {
    const auto& layers = net.layers;
    const size_t L = layers.size();
    const Pairs pairs = find_pairs(net);
    if (!pairs.refusal.empty()) throw Error(pairs.refusal);
    const std::vector<bool>& pair_conv = pairs.pair_conv;
    const size_t pairs_end = pairs.pairs_end;
    const LayerSpec& last = layers.back();

    SampleProgram p;
    const size_t G = static_cast<size_t>(group);
    // A sample's activations: the input, then each layer's output.
    p.act_floats = static_cast<size_t>(net.input.size());
    for (const auto& l : layers) {
        p.output_at.push_back(p.act_floats);
        p.act_floats += static_cast<size_t>(l.out.size());
    }
    if (pairs_end > 0) {
        p.run_begin = layout.weights(0).device;
        p.run_floats = layout.bias(pairs_end - 1).device + layout.bias(pairs_end - 1).count - p.run_begin;
    }
    auto run_at = [&](const DeviceLayout::Block& b) { return b.device - p.run_begin; };

    // The work areas. Forward: the input, each pair's pooled output and each fully connected
    // output, and one area for a pair's convolution output or a fully connected layer's lane sums.
    // Backward: each delta the layers pass down, and, shared by the pairs, the staged input, the
    // convolution's delta (or a fully connected layer's part sums) and the tap sums.
    Area fwd, bwd;
    std::vector<size_t> fwd_out(L), bwd_delta(L);
    // The input's copy in the work area: before a first convolution pair its rows are an odd number of
    // floats apart (pair_forward's items read several rows at one column: __local bank conflicts).
    const size_t input_w = static_cast<size_t>(net.input.w), input_xw = pairs_end > 0 ? bank_stride(input_w) : input_w;
    fwd.take(static_cast<size_t>(net.input.c) * static_cast<size_t>(net.input.h) * input_xw);
    size_t most_lanes = 0, most_input = 0, most_conv = 0, most_padded = 0;
    for (size_t k = 0; k < L; ++k) {
        const LayerSpec& l = layers[k];
        const size_t out = static_cast<size_t>(l.out.size());
        if (pair_conv[k]) {
            // Backward keeps the convolution's delta padded by K-1 around each map, except in the first pair.
            const size_t pad = k ? static_cast<size_t>(l.kernel - 1) : 0;
            // pair_backward's strides (sample_layers.cl): odd rows of the staged input, odd maps of the delta.
            most_input = std::max(most_input, static_cast<size_t>(l.in.c) * static_cast<size_t>(l.in.h) *
                                                  bank_stride(static_cast<size_t>(l.in.w)));
            most_conv = std::max(most_conv, out);
            most_padded = std::max(most_padded, static_cast<size_t>(l.out.c) *
                                                    bank_stride((static_cast<size_t>(l.out.h) + 2 * pad) *
                                                                (static_cast<size_t>(l.out.w) + 2 * pad)));
            continue;
        }
        fwd_out[k] = fwd.take(out);
        bwd_delta[k] = bwd.take(out);
        if (k >= pairs_end) most_lanes = std::max(most_lanes, out * static_cast<size_t>(lanes));
    }
    // The pairs' convolution outputs (forward) and deltas (backward) share their areas with the
    // fully connected layers' part sums, which run at other times.
    const size_t conv_at = fwd.take(std::max(most_conv, most_lanes)), part_at = conv_at;
    size_t most_fc_input = 0;
    for (size_t k = pairs_end; k < L; ++k) most_fc_input = std::max(most_fc_input, static_cast<size_t>(layers[k].in.size()));
    const size_t dc_floats = std::max(most_padded, most_fc_input);
    const size_t stage_at = bwd.take(most_input), dc_at = bwd.take(dc_floats), red_at = bwd.take(G);
    p.forward_work = fwd.size;
    p.backward_work = bwd.size;

    std::ostringstream s;
    int max_k = 1;
    for (size_t k = 0; k < pairs_end; k += 2) max_k = std::max(max_k, layers[k].kernel);
    s << "#define MAX_K " << max_k << "\n";
    s << "#define SG " << group << "\n#define LANES " << lanes << "\n#define INPUT_FLOATS " << net.input.size()
      << "\n#define INPUT_W " << net.input.w << "\n#define INPUT_XW " << input_xw
      << "\n#define ACT_FLOATS " << p.act_floats << "\n#define RUN_FLOATS " << p.run_floats << "\n#define PARAM_FLOATS "
      << layout.size() << "\n#define FORWARD_WORK " << p.forward_work << "\n#define BACKWARD_WORK " << p.backward_work
      << "\n";
    for (size_t k = 0; k < pairs_end; k += 2) {
        const LayerSpec& l = layers[k];
        // The connections reading each input map, for the backward pass to the pair's input.
        std::vector<int32_t> in_begin{0}, in_conn;
        for (int i = 0; i < l.in.c; ++i) {
            for (int j = 0; j < l.connections(); ++j)
                if (l.conn_in[static_cast<size_t>(j)] == i) in_conn.push_back(j);
            in_begin.push_back(static_cast<int32_t>(in_conn.size()));
        }
        const std::string n = std::to_string(k);
        s << table("conn_begin_" + n, l.conn_begin) << table("conn_in_" + n, l.conn_in)
          << table("conn_out_" + n, l.conn_out) << table("in_begin_" + n, in_begin) << table("in_conn_" + n, in_conn);
    }

    // The calls (one per line of each macro). Work offsets are "work + n", the sample's rows "act + n" and "delta + n".
    auto pair_shape = [&](size_t k) {
        const LayerSpec& c = layers[k];
        const LayerSpec& pool = layers[k + 1];
        std::ostringstream a;
        a << c.out.c << ", " << c.out.h << ", " << c.out.w << ", " << c.kernel << ", " << act_name(c.activation) << ", "
          << pool.kernel << ", " << pool.out.h << ", " << pool.out.w;
        return a.str();
    };
    std::ostringstream fw;
    for (size_t k = 0; k < L; ++k) {
        const LayerSpec& l = layers[k];
        const size_t in_work = k == 0 ? 0 : fwd_out[k - 1];
        if (pair_conv[k]) {
            const LayerSpec& pool = layers[k + 1];
            const std::string n = std::to_string(k);
            fw << "    pair_forward(work + " << in_work << ", pp + " << run_at(layout.weights(k)) << ", pp + "
               << run_at(layout.bias(k)) << ", pp + " << run_at(layout.weights(k + 1)) << ", pp + "
               << run_at(layout.bias(k + 1)) << ", conn_begin_" << n << ", conn_in_" << n << ", " << l.in.h << ", "
               << l.in.w << ", " << (k == 0 ? input_xw : static_cast<size_t>(l.in.w)) << ", " << pair_shape(k) << ", "
               << act_name(pool.activation) << ", work + " << conv_at << ", act + " << p.output_at[k]
               << ", work + " << fwd_out[k + 1] << ", act + " << p.output_at[k + 1] << "); \\\n";
            ++k;
        } else {
            fw << "    fc_forward(work + " << in_work << ", params + " << layout.weights(k).device << ", params + "
               << layout.bias(k).device << ", " << l.in.size() << ", " << l.out.size() << ", " << act_name(l.activation)
               << ", work + " << part_at << ", work + " << fwd_out[k] << ", act + " << p.output_at[k] << "); \\\n";
        }
    }
    fw << loss_call(net, fwd_out[L - 1], p.output_at[L - 1]);
    s << "#define NETWORK_FORWARD \\\n" << fw.str();

    std::ostringstream bw;
    bw << "    copy_to_work(work + " << bwd_delta[L - 1] << ", delta + " << p.output_at[L - 1] << ", " << last.out.size()
       << "); \\\n    SYNC(); \\\n";
    for (size_t k = L; k-- > pairs_end;) {
        if (k == 0) break;  // a fully connected first layer passes nothing down
        const LayerSpec& l = layers[k];
        // fc_backward's parts: as many as the items, the part area and the outputs allow.
        const size_t I = static_cast<size_t>(l.in.size()), columns = I % 4 ? I : I / 4;
        const size_t parts = std::max<size_t>(1, std::min({G / columns, dc_floats / I, static_cast<size_t>(l.out.size())}));
        bw << "    fc_backward(work + " << bwd_delta[k] << ", params + " << layout.weights(k).device << ", " << I
           << ", " << l.out.size() << ", act + " << p.output_at[k - 1] << ", " << act_name(layers[k - 1].activation)
           << ", " << parts << ", work + " << dc_at << ", work + " << bwd_delta[k - 1] << ", delta + "
           << p.output_at[k - 1] << "); \\\n";
    }
    for (size_t k = pairs_end; k >= 2;) {
        k -= 2;
        const LayerSpec& l = layers[k];
        const std::string n = std::to_string(k);
        const bool prev = k > 0;
        bw << "    pair_backward(work + " << bwd_delta[k + 1] << ", act + " << p.output_at[k] << ", act + "
           << input_at(p, k) << ", pp + " << run_at(layout.weights(k)) << ", pp + " << run_at(layout.weights(k + 1))
           << ", conn_begin_" << n << ", conn_in_" << n << ", conn_out_" << n << ", in_begin_" << n << ", in_conn_" << n
           << ", " << l.in.c << ", " << l.in.h << ", " << l.in.w << ", " << pair_shape(k) << ", work + " << stage_at
           << ", work + " << dc_at << ", work + " << red_at << ", part, " << run_at(layout.weights(k)) << ", "
           << run_at(layout.bias(k)) << ", " << run_at(layout.weights(k + 1)) << ", " << run_at(layout.bias(k + 1))
           << ", " << (prev ? 1 : 0) << ", " << (prev ? act_name(layers[k - 1].activation) : "ACT_NONE") << ", work + "
           << (prev ? bwd_delta[k - 1] : 0) << ", delta + " << (prev ? p.output_at[k - 1] : 0) << "); \\\n";
    }
    s << "#define NETWORK_BACKWARD \\\n" << bw.str() << "\n";

    // Each block of the layout: the pairs' span from the samples' shares, a fully connected
    // layer's weights and biases from its deltas and inputs (the blocks do not overlap); the
    // padding stays zero.
    std::ostringstream gr;
    if (p.run_floats)
        gr << "    if (p >= " << p.run_begin << " && p < " << p.run_begin + p.run_floats
           << ") g = pair_gradient(partials, count, p - " << p.run_begin << ", lane); \\\n";
    for (size_t k = pairs_end; k < L; ++k) {
        const auto& w = layout.weights(k);
        const auto& b = layout.bias(k);
        const int I = layers[k].in.size();
        gr << "    if (p >= " << w.device << " && p < " << w.device + w.count
           << ") g = fc_weight_gradient(acts, deltas, count, (p - " << w.device << ") / " << I << ", (p - "
           << w.device << ") % " << I << ", " << p.output_at[k] << ", " << input_at(p, k) << ", lane); \\\n";
        gr << "    if (p >= " << b.device << " && p < " << b.device + b.count
           << ") g = fc_bias_gradient(deltas, count, p - " << b.device << ", " << p.output_at[k] << ", lane); \\\n";
    }
    s << "#define GRAD_PARAMS " << grad_params << "\n#define GRAD_LANES " << grad_lanes << "\n";
    s << "#define NETWORK_GRADIENTS \\\n" << gr.str() << "\n";
    write_gradient_groups(layers, layout, pairs_end, grad_params, grad_lanes, p, s);
    if (pairs_end == 0) {
        spread_first(net, layout, lanes, p, s);
        p.rows_per_group = G / static_cast<size_t>(lanes);
    }
    p.source = s.str();
    return p;
}

}  // namespace lenet5
