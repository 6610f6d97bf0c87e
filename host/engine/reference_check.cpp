#include "engine/reference_check.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/rng.h"

namespace lenet5 {

double relative_error(const std::vector<float>& v, const std::vector<float>& ref) {
    if (v.size() != ref.size()) return std::numeric_limits<double>::infinity();
    double diff = 0, norm = 0;
    for (size_t i = 0; i < v.size(); ++i) {
        const double d = static_cast<double>(v[i]) - ref[i];
        diff += d * d;
        norm += static_cast<double>(ref[i]) * ref[i];
    }
    if (!std::isfinite(diff)) return std::numeric_limits<double>::infinity();
    return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

namespace {

// What every recording starts from: `data` as both splits, init_params(net, seed), the order
// shuffled from seed + 1, the counters emptied.
void start_steps(Engine& e, const Network& net, const Dataset& data, uint64_t seed) {
    e.upload(Split::Train, data);
    e.upload(Split::Test, data);
    e.set_params(init_params(net, seed));
    Rng rng(seed + 1);
    e.set_order(shuffled_order(data.count, rng));
    e.take_counters();
}

}  // namespace

std::vector<StepRecord> record_steps(Engine& e, const Network& net, const Dataset& data, int batch, int steps,
                                     uint64_t seed, const StepRates& rates) {
    start_steps(e, net, data, seed);
    std::vector<StepRecord> records;
    for (int step = 0; step < steps; ++step) {
        e.forward(Split::Train, step * batch, batch);
        e.backward();
        StepRecord r;
        for (size_t k = 0; k < net.layers.size(); ++k) r.outputs.push_back(e.layer_output(k));
        r.gradients = e.gradients();
        e.update(rates.lr, rates.momentum, rates.weight_decay);
        r.params_after = e.params();
        const Counters c = e.take_counters();
        r.loss = c.loss_sum / static_cast<double>(c.samples);
        records.push_back(std::move(r));
    }
    return records;
}

std::vector<StepRecord> record_training_path(Engine& e, const Network& net, const Dataset& data, int batch, int steps,
                                             uint64_t seed, bool read_every_step, const StepRates& rates) {
    start_steps(e, net, data, seed);
    std::vector<StepRecord> records;
    for (int step = 0; step < steps; ++step) {
        e.forward(Split::Train, step * batch, batch);
        e.backward();
        e.update(rates.lr, rates.momentum, rates.weight_decay);
        if (!read_every_step && step + 1 < steps) continue;
        StepRecord r;  // no gradients: a fused step need not keep them
        r.params_after = e.params();
        const Counters c = e.take_counters();
        r.loss = c.loss_sum / static_cast<double>(c.samples);
        records.push_back(std::move(r));
    }
    return records;
}

namespace {

double relative_error(double v, double ref) {
    const double diff = std::abs(v - ref);
    if (!std::isfinite(diff)) return std::numeric_limits<double>::infinity();
    return ref != 0 ? diff / std::abs(ref) : diff;
}

std::vector<float> slice(const std::vector<float>& v, size_t offset, size_t count) {
    if (offset + count > v.size()) return {};
    return {v.begin() + static_cast<std::ptrdiff_t>(offset), v.begin() + static_cast<std::ptrdiff_t>(offset + count)};
}

// A layer's weights followed by its biases.
std::vector<float> layer_params(const std::vector<float>& v, const LayerSpec& l) {
    std::vector<float> p = slice(v, l.weight_offset, l.weight_count);
    const std::vector<float> b = slice(v, l.bias_offset, l.bias_count);
    p.insert(p.end(), b.begin(), b.end());
    return p;
}

}  // namespace

std::vector<Comparison> compare_steps(const Network& net, const std::vector<StepRecord>& got,
                                      const std::vector<StepRecord>& ref) {
    std::vector<Comparison> rows;
    auto add = [&](const std::string& layer, const char* phase, const char* what, double error) {
        for (auto& r : rows)
            if (r.layer == layer && r.phase == phase && r.what == what) {
                r.error = std::max(r.error, error);
                return;
            }
        rows.push_back({layer, phase, what, error});
    };
    for (size_t s = 0; s < std::min(got.size(), ref.size()); ++s) {
        const StepRecord &g = got[s], &r = ref[s];
        for (size_t k = 0; k < std::min(g.outputs.size(), r.outputs.size()); ++k)
            add(net.layers[k].name, "forward", "output", relative_error(g.outputs[k], r.outputs[k]));
        add("network", "forward", "loss", relative_error(g.loss, r.loss));
        for (auto it = net.layers.rbegin(); !g.gradients.empty() && it != net.layers.rend(); ++it) {  // backward's order
            const LayerSpec& l = *it;
            if (l.weight_count)
                add(l.name, "backward", "weight gradient",
                    relative_error(slice(g.gradients, l.weight_offset, l.weight_count),
                                   slice(r.gradients, l.weight_offset, l.weight_count)));
            if (l.bias_count)
                add(l.name, "backward", "bias gradient",
                    relative_error(slice(g.gradients, l.bias_offset, l.bias_count),
                                   slice(r.gradients, l.bias_offset, l.bias_count)));
        }
        for (const LayerSpec& l : net.layers)
            if (l.weight_count || l.bias_count)
                add(l.name, "update", "parameters",
                    relative_error(layer_params(g.params_after, l), layer_params(r.params_after, l)));
    }
    return rows;
}

}  // namespace lenet5
