// Shared by the test suites: synthetic data, relative errors, the real MNIST
// (when fetched), and the check that pins a variant to the `cpu` reference.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/host_engine.h"
#include "io/checkpoint.h"
#include "io/mnist.h"
#include "model/model_file.h"
#include "model/network.h"
#include "common/rng.h"
#include "train/trainer.h"

namespace lenet5::test {

// ||v - ref|| / ||ref|| (or ||v|| when ref is all zeros).
inline double relative_error(const std::vector<float>& v, const std::vector<float>& ref) {
    EXPECT_EQ(v.size(), ref.size());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < std::min(v.size(), ref.size()); ++i) {
        diff += (static_cast<double>(v[i]) - ref[i]) * (static_cast<double>(v[i]) - ref[i]);
        norm += static_cast<double>(ref[i]) * ref[i];
    }
    if (!std::isfinite(diff)) return INFINITY;
    return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// The real MNIST folder, or "" when it has not been fetched (the caller then skips;
// with LENET5_REQUIRE_MNIST set, as in CI, the test fails instead).
inline std::string mnist_dir() {
    const std::string dir = resolve_data_dir("");
    try {
        load_mnist(dir, Split::Test, 1);
        return dir;
    } catch (const std::exception& e) {
        if (std::getenv("LENET5_REQUIRE_MNIST")) ADD_FAILURE() << "MNIST is required here: " << e.what();
        return "";
    }
}

// Options for a short training run of `variant` on the real MNIST in `dir`.
inline TrainOptions quick_options(const std::string& variant, const std::string& dir, int train_limit,
                                  int test_limit, int batch, int epochs) {
    TrainOptions o;
    o.engine.variant = variant;
    o.data_dir = dir;
    o.train_limit = train_limit;
    o.test_limit = test_limit;
    o.batch = batch;
    o.epochs = epochs;
    return o;
}

inline std::unique_ptr<Engine> cpu_engine(const Network& net) {
    return std::make_unique<HostEngine>(net, "cpu", cpu_ops(), 1);
}

// Runs one training step (forward, backward, update) of `batch` samples on an
// engine and records everything the reference check compares.
struct StepRecord {
    std::vector<std::vector<float>> outputs;  // per layer
    double loss = 0;
    std::vector<float> gradients, params_after;
};

inline StepRecord record_step(Engine& e, const Network& net, const Dataset& data, int batch, uint64_t seed) {
    e.upload(Split::Train, data);
    e.upload(Split::Test, data);
    e.set_params(init_params(net, seed));
    Rng rng(seed + 1);
    e.set_order(shuffled_order(data.count, rng));
    e.take_counters();
    // Two steps, so the momentum buffer is exercised; record the second.
    for (int step = 0; step < 2; ++step) {
        e.forward(Split::Train, step * batch, batch);
        e.backward();
        if (step == 0) e.update(0.05f, 0.9f, 5e-4f);
    }
    StepRecord r;
    for (size_t k = 0; k < net.layers.size(); ++k) r.outputs.push_back(e.layer_output(k));
    r.gradients = e.gradients();
    e.update(0.05f, 0.9f, 5e-4f);
    r.params_after = e.params();
    const Counters c = e.take_counters();
    r.loss = c.loss_sum / static_cast<double>(c.samples);
    return r;
}

// Asserts that `variant` (an engine for `net`) matches `cpu` on the same batches from the
// same parameters: every layer output, the loss, every gradient and the parameters after
// the update, each with ||v - ref|| / ||ref|| < 1e-4.
inline void expect_matches_cpu(Engine& variant, const Network& net, int batch, double tolerance = 1e-4) {
    const Dataset data = random_dataset(2 * batch + 3, 42 + static_cast<uint64_t>(batch));
    auto ref_engine = cpu_engine(net);
    const StepRecord ref = record_step(*ref_engine, net, data, batch, 7);
    const StepRecord got = record_step(variant, net, data, batch, 7);
    for (size_t k = 0; k < net.layers.size(); ++k)
        EXPECT_LT(relative_error(got.outputs[k], ref.outputs[k]), tolerance)
            << variant.variant() << " layer " << net.layers[k].name << " output, batch " << batch;
    EXPECT_NEAR(got.loss, ref.loss, tolerance * std::abs(ref.loss)) << variant.variant() << " loss, batch " << batch;
    for (const auto& l : net.layers) {
        auto slice = [&](const std::vector<float>& v, size_t off, size_t n) {
            return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(off),
                                      v.begin() + static_cast<std::ptrdiff_t>(off + n));
        };
        EXPECT_LT(relative_error(slice(got.gradients, l.weight_offset, l.weight_count),
                                 slice(ref.gradients, l.weight_offset, l.weight_count)),
                  tolerance)
            << variant.variant() << " " << l.name << " weight gradient, batch " << batch;
        EXPECT_LT(relative_error(slice(got.gradients, l.bias_offset, l.bias_count),
                                 slice(ref.gradients, l.bias_offset, l.bias_count)),
                  tolerance)
            << variant.variant() << " " << l.name << " bias gradient, batch " << batch;
    }
    EXPECT_LT(relative_error(got.params_after, ref.params_after), tolerance)
        << variant.variant() << " parameters after the update, batch " << batch;
}

// The same for LeNet-5.
inline void expect_matches_cpu(Engine& variant, int batch, double tolerance = 1e-4) {
    expect_matches_cpu(variant, lenet5_network(), batch, tolerance);
}

// Saves `params` as the checkpoint of `m` after one epoch, with no momentum, as `train` writes it.
inline void save_model_checkpoint(const Model& m, std::vector<float> params, const std::string& path) {
    Checkpoint c;
    c.network_hash = m.net.hash();
    c.network_description = m.net.describe();
    c.model_text = m.text;
    c.epoch = 1;
    c.params = std::move(params);
    c.velocity.assign(c.params.size(), 0.0f);
    save_checkpoint(path, c);
}

}  // namespace lenet5::test
