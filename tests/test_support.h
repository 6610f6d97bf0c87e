// Shared by the test suites: synthetic data, relative errors, the real MNIST
// (when fetched), and the check that pins a variant to the `cpu` reference.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/engine.h"
#include "engine/host_engine.h"
#include "engine/reference_check.h"
#include "io/checkpoint.h"
#include "io/mnist.h"
#include "model/model_file.h"
#include "model/network.h"
#include "common/rng.h"
#include "train/trainer.h"

namespace lenet5::test {

using lenet5::relative_error;  // the rule of engine/reference_check.h
using lenet5::StepRecord;

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

// Two training steps (so the momentum buffer is exercised) on an engine; the second's record.
inline StepRecord record_step(Engine& e, const Network& net, const Dataset& data, int batch, uint64_t seed) {
    return record_steps(e, net, data, batch, 2, seed).back();
}

// Asserts that `variant` (an engine for `net`) matches `cpu` on the same two batches from the same
// parameters by the library's rule (reference_check.h): every layer output, the loss, every
// gradient and the parameters after each update.
inline void expect_matches_cpu(Engine& variant, const Network& net, int batch, double tolerance = kReferenceTolerance) {
    const Dataset data = random_dataset(2 * batch + 3, 42 + static_cast<uint64_t>(batch));
    auto ref_engine = cpu_engine(net);
    const auto ref = record_steps(*ref_engine, net, data, batch, 2, 7);
    const auto got = record_steps(variant, net, data, batch, 2, 7);
    for (const Comparison& c : compare_steps(net, got, ref))
        EXPECT_LT(c.error, tolerance) << variant.variant() << " " << c.layer << " " << c.what << " (" << c.phase
                                      << "), batch " << batch;
}

// The same for LeNet-5.
inline void expect_matches_cpu(Engine& variant, int batch, double tolerance = kReferenceTolerance) {
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

// An engine made for inference (EngineRequest::inference) with `params` set: it keeps them, takes no
// part in an exchange, and refuses every training call with one line naming the call.
inline void expect_refuses_training(Engine& engine, const std::vector<float>& params) {
    engine.set_params(params);
    EXPECT_EQ(engine.params(), params);
    EXPECT_EQ(engine.exchange_port(), nullptr);
    const std::vector<std::pair<std::string, std::function<void()>>> calls{
        {"upload()", [&] { engine.upload(Split::Train, random_dataset(4, 1)); }},
        {"set_order()", [&] { engine.set_order({0, 1, 2, 3}); }},
        {"forward()", [&] { engine.forward(Split::Test, 0, 1); }},
        {"backward()", [&] { engine.backward(); }},
        {"update()", [&] { engine.update(0.1f, 0.9f, 0.0f); }},
        {"gradients()", [&] { engine.gradients(); }},
        {"set_gradients()", [&] { engine.set_gradients(params); }},
        {"momentum_buffer()", [&] { engine.momentum_buffer(); }},
        {"set_momentum_buffer()", [&] { engine.set_momentum_buffer(params); }},
        {"adam_state()", [&] { engine.adam_state(); }},
        {"set_adam_state()", [&] { engine.set_adam_state({}); }},
    };
    for (const auto& [name, call] : calls) {
        try {
            call();
            ADD_FAILURE() << name << " ran on an inference engine";
        } catch (const Error& e) {
            EXPECT_EQ(std::string(e.what()), engine.variant() +
                                                 ": this engine was made for inference (infer, set_params, params); it runs no " +
                                                 name);
        }
    }
}

}  // namespace lenet5::test
