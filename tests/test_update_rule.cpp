// The update rule's homes (cpu_opt/update_rule.h, cl_kernels/update_rule.h): Adam and AdamW against
// PyTorch, every variant's Adam against cpu's, and Adam's state carried over as a resume does.
#include <gtest/gtest.h>

#include "engine/engine_factory.h"
#include "io/checkpoint.h"
#include "model/model_file.h"
#include "train/trainer.h"
#include "test_support.h"
#include "update_rule.h"
#ifdef LENET5_HAVE_OPENCL
#include "opencl/opencl_batch_engine.h"
#endif

using namespace lenet5;

namespace {

// Three parameters after each of three steps of lr 0.01, betas (0.9, 0.999), eps 1e-8, weight
// decay 0.1, from PyTorch 2.11:
//   import torch
//   for opt in (torch.optim.Adam, torch.optim.AdamW):
//       p = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float32, requires_grad=True)
//       o = opt([p], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
//       for g in ([0.1, -0.2, 0.3], [-0.05, 0.4, 0.0], [0.2, 0.1, -0.6]):
//           p.grad = torch.tensor(g, dtype=torch.float32)
//           o.step()
//           print(opt.__name__, ", ".join("%.9gf" % x for x in p.detach().tolist()))
constexpr float kGrads[3][3] = {{0.1f, -0.2f, 0.3f}, {-0.05f, 0.4f, 0.0f}, {0.2f, 0.1f, -0.6f}};
constexpr float kAdam[3][3] = {{0.49000001f, -0.99000001f, 1.99000001f},
                               {0.483349204f, -0.990542948f, 1.98102188f},
                               {0.475223541f, -0.99097687f, 1.97928786f}};
constexpr float kAdamW[3][3] = {{0.489500016f, -0.989000022f, 1.98800004f},
                                {0.486347139f, -0.991672099f, 1.97931147f},
                                {0.479279667f, -0.994836986f, 1.98073256f}};

void expect_pytorch_steps(Optimizer optimizer, const float (&want)[3][3]) {
    float p[3] = {0.5f, -1.0f, 2.0f}, m[3] = {}, v[3] = {};
    for (int t = 1; t <= 3; ++t) {
        adam_update(p, m, v, kGrads[t - 1], 3, adam_step(optimizer, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, t));
        for (int i = 0; i < 3; ++i) EXPECT_NEAR(p[i], want[t - 1][i], 2e-7) << "step " << t << ", parameter " << i;
    }
}

TrainingRule adam_rule(Optimizer optimizer) {
    TrainingRule rule;
    rule.optimizer = optimizer;
    return rule;
}

std::unique_ptr<Engine> engine_with(const Network& net, const std::string& variant, const TrainingRule& rule) {
    EngineRequest request;
    request.variant = variant;
    request.rule = rule;
    return make_engine(net, request);
}

// `got` against cpu over three Adam steps at batch `batch`: each phase read apart, then the steps
// as train takes them.
void expect_matches_cpu(Engine& got, const Network& net, int batch, const TrainingRule& rule) {
    SCOPED_TRACE(got.variant() + " " + optimizer_name(rule.optimizer) + " batch " + std::to_string(batch));
    const Dataset data = random_dataset(3 * batch, 11 + static_cast<uint64_t>(batch));
    const StepRates rates = step_rates(rule);
    auto ref = engine_with(net, "cpu", rule);
    for (const Comparison& c : compare_steps(net, record_steps(got, net, data, batch, 3, 5, rates),
                                             record_steps(*ref, net, data, batch, 3, 5, rates)))
        EXPECT_LT(c.error, kReferenceTolerance) << c.layer << " " << c.what << " (" << c.phase << ")";
    for (const Comparison& c : compare_steps(net, record_training_path(got, net, data, batch, 3, 5, true, rates),
                                             record_training_path(*ref, net, data, batch, 3, 5, true, rates)))
        EXPECT_LT(c.error, kReferenceTolerance) << c.layer << " " << c.what << " (training path)";
}

// Four steps straight, against two, the state carried into a new engine (as a checkpoint carries
// it), and two more: the same bits.
void expect_resume_continues(const Network& net, const std::string& variant, const TrainingRule& rule) {
    SCOPED_TRACE(variant + " " + optimizer_name(rule.optimizer));
    const Dataset data = random_dataset(32, 4);
    const StepRates rates = step_rates(rule);
    auto run = [&](Engine& e, int from, int to) {
        for (int s = from; s < to; ++s) {
            e.forward(Split::Train, s * 8, 8);
            e.backward();
            e.update(rates.lr, rates.momentum, rates.weight_decay);
        }
    };
    auto straight = engine_with(net, variant, rule), first = engine_with(net, variant, rule),
         second = engine_with(net, variant, rule);
    Rng rng(3);
    const auto order = shuffled_order(data.count, rng);
    for (Engine* e : {straight.get(), first.get(), second.get()}) {
        e->upload(Split::Train, data);
        e->set_params(init_params(net, 2));
        e->set_order(order);
    }
    run(*straight, 0, 4);
    run(*first, 0, 2);
    second->set_params(first->params());
    second->set_momentum_buffer(first->momentum_buffer());
    const AdamState state = first->adam_state();
    EXPECT_EQ(state.steps, 2);
    second->set_adam_state(state);
    run(*second, 2, 4);
    EXPECT_EQ(second->params(), straight->params());
    EXPECT_EQ(second->adam_state().second, straight->adam_state().second);
}

}  // namespace

TEST(UpdateRule, AdamMatchesPyTorch) { expect_pytorch_steps(Optimizer::Adam, kAdam); }

TEST(UpdateRule, AdamWMatchesPyTorch) { expect_pytorch_steps(Optimizer::AdamW, kAdamW); }

// SGD's step, the one definition both the scalar and the SIMD updates take: v = 0.9*0.5 + (0.2 +
// 0.01*1) = 0.66, p = 1 - 0.1*0.66 (Nesterov's is TrainingRule's hand computation).
TEST(UpdateRule, SgdStepMatchesAHandComputation) {
    float p = 1.0f, v = 0.5f;
    sgd_step<ScalarMath>(p, v, 0.2f, 0.1f, 0.9f, 0.01f, false);
    EXPECT_NEAR(v, 0.66, 1e-7);
    EXPECT_NEAR(p, 0.934, 1e-7);
}

TEST(UpdateRule, EveryVariantsAdamMatchesCpu) {
    const Network lenet5 = lenet5_network(), mlp = load_model("mlp").net;
    for (const std::string& variant : built_variants()) {
        if (variant == "cpu") continue;
        for (Optimizer optimizer : {Optimizer::Adam, Optimizer::AdamW}) {
            const TrainingRule rule = adam_rule(optimizer);
            auto e = engine_with(lenet5, variant, rule);
            expect_matches_cpu(*e, lenet5, 8, rule);
            auto m = engine_with(mlp, variant, rule);  // batch 1: the per-sample engine's one-sample steps
            expect_matches_cpu(*m, mlp, 1, rule);
        }
    }
}

#ifdef LENET5_HAVE_OPENCL
TEST(UpdateRule, BatchLevelOpenCLAdamMatchesCpu) {
    const Network net = lenet5_network();
    const auto rt = std::make_shared<DeviceRuntime>(select_opencl_device(-1));
    for (Optimizer optimizer : {Optimizer::Adam, Optimizer::AdamW}) {
        OpenCLBatchEngine e(net, MemoryVariant::Local, rt, conv::ConvAlgo::Auto, false, adam_rule(optimizer));
        expect_matches_cpu(e, net, 8, adam_rule(optimizer));
    }
}
#endif

TEST(UpdateRule, AdamStateCarriesOverExactly) {
    const Network net = lenet5_network();
    for (const std::string& variant : built_variants()) expect_resume_continues(net, variant, adam_rule(Optimizer::AdamW));
}

// The train line's optimizer keys, and which lr each optimizer takes where --lr is not given.
TEST(UpdateRule, ModelFileAndFlagsChooseTheOptimizer) {
    const std::string head = "model m\ninput 1x28x28\nfc out units=10\n";
    const Model adamw = parse_model(head + "train lr=0.002 optimizer=adamw beta1=0.8 eps=1e-7\n", "m.net");
    TrainOptions o;
    TrainSettings s = resolve_settings(o, adamw.recipe);
    EXPECT_EQ(s.optimizer, Optimizer::AdamW);
    EXPECT_FLOAT_EQ(s.lr, 0.002f);
    EXPECT_FLOAT_EQ(s.beta1, 0.8f);
    EXPECT_FLOAT_EQ(s.beta2, 0.999f);
    EXPECT_FLOAT_EQ(s.eps, 1e-7f);
    o.optimizer = Optimizer::Sgd;  // the model's lr and betas are adamw's
    s = resolve_settings(o, adamw.recipe);
    EXPECT_FLOAT_EQ(s.lr, 0.05f);
    const Model sgd = parse_model(head + "train lr=0.1 momentum=0.5\n", "m.net");
    o.optimizer = Optimizer::Adam;
    s = resolve_settings(o, sgd.recipe);
    EXPECT_FLOAT_EQ(s.lr, kAdamLr);
    EXPECT_FLOAT_EQ(s.momentum, 0.0f);
    for (const char* line : {"train optimizer=adam momentum=0.9\n", "train beta1=0.9\n", "train optimizer=rmsprop\n"})
        EXPECT_THROW(parse_model(head + line, "m.net"), Error) << line;
}

TEST(UpdateRule, CheckpointKeepsAdamsState) {
    Checkpoint c;
    c.network_description = "x";
    c.params = {1.0f, 2.0f};
    c.velocity = {0.5f, 0.25f};
    EXPECT_EQ(encode_checkpoint(c)[8], 2);  // SGD: version 2, as before
    c.optimizer = Optimizer::AdamW;
    c.adam_steps = 938;
    c.second = {1e-6f, 3e-7f};
    const std::string bytes = encode_checkpoint(c);
    EXPECT_EQ(bytes[8], 3);
    const Checkpoint d = decode_checkpoint(bytes, "adam.bin");
    EXPECT_EQ(d.optimizer, Optimizer::AdamW);
    EXPECT_EQ(d.adam_steps, 938u);
    EXPECT_EQ(d.second, c.second);
    EXPECT_EQ(d.velocity, c.velocity);
}
