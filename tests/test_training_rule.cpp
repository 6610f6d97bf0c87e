// Nesterov momentum and label smoothing (engine.h's TrainingRule): the cpu reference against a hand
// computation, and every other variant against the cpu reference by the rule of the other variant
// tests (reference_check.h), on the steps that read the gradients before the update and on the
// fused steps that do not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/engine_factory.h"
#include "engine/preprocess.h"
#include "host_ops.h"
#include "test_support.h"
#ifdef LENET5_HAVE_OPENCL
#include "opencl/opencl_batch_engine.h"
#endif

using namespace lenet5;

namespace {

const TrainingRule kBoth{true, 0.1f};

std::unique_ptr<Engine> engine_with(const Network& net, const std::string& variant, const TrainingRule& rule) {
    EngineRequest request;
    request.variant = variant;
    request.rule = rule;
    return make_engine(net, request);
}

// The parameters after each of `steps` steps from init_params(net, 7), without reading the
// gradients in between: the OpenCL engines then fuse the gradients into the update.
std::vector<std::vector<float>> fused_steps(Engine& e, const Network& net, const Dataset& data, int batch, int steps) {
    e.upload(Split::Train, data);
    e.set_params(init_params(net, 7));
    Rng rng(8);
    e.set_order(shuffled_order(data.count, rng));
    std::vector<std::vector<float>> after;
    for (int step = 0; step < steps; ++step) {
        e.forward(Split::Train, step * batch, batch);
        e.backward();
        e.update(0.05f, 0.9f, 5e-4f);
        after.push_back(e.params());
    }
    return after;
}

// `got` (an engine of `net` built with `rule`) against cpu with the same rule.
void expect_matches_cpu(Engine& got, const Network& net, int batch, const TrainingRule& rule) {
    SCOPED_TRACE(got.variant() + " batch " + std::to_string(batch) + (rule.nesterov ? " nesterov" : "") +
                 " smoothing " + std::to_string(rule.label_smoothing));
    const Dataset data = random_dataset(3 * batch + 1, 42 + static_cast<uint64_t>(batch));
    auto ref = engine_with(net, "cpu", rule);
    for (const Comparison& c : compare_steps(net, record_steps(got, net, data, batch, 2, 7), record_steps(*ref, net, data, batch, 2, 7)))
        EXPECT_LT(c.error, kReferenceTolerance) << c.layer << " " << c.what << " (" << c.phase << ")";
    const auto want = fused_steps(*ref, net, data, batch, 3), have = fused_steps(got, net, data, batch, 3);
    for (size_t s = 0; s < want.size(); ++s)
        EXPECT_LT(relative_error(have[s], want[s]), kReferenceTolerance) << "parameters after fused step " << s + 1;
}

}  // namespace

// Smoothing 0.1 over 10 classes: the target is 0.91 on the label and 0.01 elsewhere; the loss stays
// the cross-entropy against the label.
TEST(TrainingRule, CpuSmoothedSoftmaxMatchesAHandComputation) {
    const float logits[3] = {1.0f, 2.0f, 0.5f};
    const double e[3] = {std::exp(1.0), std::exp(2.0), std::exp(0.5)}, sum = e[0] + e[1] + e[2];
    float d[3];
    bool correct = false;
    const float loss = softmax_cross_entropy(logits, 3, 0, 0.3f, 0.5f, d, correct);
    EXPECT_NEAR(loss, -std::log(e[0] / sum), 1e-6);
    EXPECT_FALSE(correct);
    EXPECT_NEAR(d[0], 0.5 * (e[0] / sum - (0.7 + 0.1)), 1e-7);
    EXPECT_NEAR(d[1], 0.5 * (e[1] / sum - 0.1), 1e-7);
    EXPECT_NEAR(d[2], 0.5 * (e[2] / sum - 0.1), 1e-7);
}

// v = 0.9 * 0.5 + (0.2 + 0.01 * 1) = 0.66; p = 1 - 0.1 * (0.21 + 0.9 * 0.66) = 0.9196.
TEST(TrainingRule, CpuNesterovUpdateMatchesAHandComputation) {
    float p = 1.0f, v = 0.5f;
    const float g = 0.2f;
    cpu_ops().update(&p, &v, &g, 1, 0.1f, 0.9f, 0.01f, true);
    EXPECT_NEAR(v, 0.66, 1e-7);
    EXPECT_NEAR(p, 0.9196, 1e-7);
    p = 1.0f, v = 0.5f;
    cpu_ops().update(&p, &v, &g, 1, 0.1f, 0.9f, 0.01f, false);  // plain: p = 1 - 0.1 * 0.66
    EXPECT_NEAR(p, 0.934, 1e-7);
}

// Each rule changes what cpu computes (so a variant that ignored it would not match it).
TEST(TrainingRule, EachRuleChangesTheCpuSteps) {
    const Network net = lenet5_network();
    const Dataset data = random_dataset(17, 3);
    auto steps = [&](const TrainingRule& rule) {
        auto e = engine_with(net, "cpu", rule);
        return record_steps(*e, net, data, 8, 2, 7);
    };
    const auto plain = steps({}), nesterov = steps({true, 0.0f}), smoothed = steps({false, 0.1f});
    EXPECT_EQ(nesterov[0].gradients, plain[0].gradients);
    EXPECT_GT(relative_error(nesterov[1].params_after, plain[1].params_after), 1e-4);
    EXPECT_GT(relative_error(smoothed[0].gradients, plain[0].gradients), 1e-3);
    EXPECT_EQ(smoothed[0].loss, plain[0].loss);  // the reported loss stays the plain cross-entropy
}

TEST(TrainingRule, SmoothingASquaredErrorModelIsRefused) {
    try {
        engine_with(load_model("mlp").net, "cpu", {false, 0.1f});
        ADD_FAILURE() << "smoothing was taken for the squared error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("label smoothing needs a softmax cross-entropy loss; model mlp uses"),
                  std::string::npos)
            << e.what();
    }
}

// Every variant this build has (the OpenCL ones on their per-sample path for LeNet-5), with both
// rules and with each alone; the MLP at batch 1 takes the per-sample engine's one-sample steps
// (step_update, persistent runs) with Nesterov. A test a variant, each well under a minute.
class TrainingRuleVariant : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainingRuleVariant, MatchesCpu) {
    const Network lenet5 = lenet5_network(), mlp = load_model("mlp").net;
    for (const TrainingRule& rule : {kBoth, TrainingRule{true, 0.0f}, TrainingRule{false, 0.1f}}) {
        auto e = engine_with(lenet5, GetParam(), rule);
        for (int batch : {1, 8}) expect_matches_cpu(*e, lenet5, batch, rule);
    }
    auto e = engine_with(mlp, GetParam(), {true, 0.0f});
    expect_matches_cpu(*e, mlp, 1, {true, 0.0f});
}

std::vector<std::string> variants_but_cpu() {
    std::vector<std::string> v = built_variants();
    v.erase(std::remove(v.begin(), v.end(), "cpu"), v.end());
    return v;
}

INSTANTIATE_TEST_SUITE_P(TrainingRule, TrainingRuleVariant, ::testing::ValuesIn(variants_but_cpu()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                             std::string name = param.param;
                             std::replace(name.begin(), name.end(), '-', '_');
                             return name;
                         });

#ifdef LENET5_HAVE_OPENCL
// The batch-level OpenCL engine (the CNN's path) on LeNet-5: its batch_sgd, fc_sgd and fc_sgd_data
// updates and its loss kernels.
TEST(TrainingRule, BatchLevelOpenCLMatchesCpu) {
    const Network net = lenet5_network();
    const auto rt = std::make_shared<DeviceRuntime>(select_opencl_device(-1));
    for (auto [variant, memory] : {std::pair{"gpu", MemoryVariant::Global}, std::pair{"gpu-constant", MemoryVariant::Constant},
                                   std::pair{"gpu-local", MemoryVariant::Local}}) {
        SCOPED_TRACE(variant);
        OpenCLBatchEngine e(net, memory, rt, conv::ConvAlgo::Auto, false, kBoth);
        for (int batch : {5, 20}) expect_matches_cpu(e, net, batch, kBoth);
    }
}
#endif
