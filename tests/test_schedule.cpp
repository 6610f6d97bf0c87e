// The learning-rate schedules (host/model/lr_schedule.h) against rates computed by hand, and the
// schedule settings as flags and as a model file's train line.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"
#include "model/model_file.h"
#include "model/lr_schedule.h"
#include "train/trainer.h"

using namespace lenet5;

namespace {

// The rates of every step of a run of `epochs` epochs of `steps` steps.
std::vector<float> rates(const RateSchedule& s, int steps, int epochs) {
    std::vector<float> r;
    for (int64_t t = 0; t < static_cast<int64_t>(steps) * epochs; ++t) r.push_back(scheduled_lr(s, t, steps, epochs));
    return r;
}

void expect_rates(const std::vector<float>& got, const std::vector<double>& hand) {
    ASSERT_EQ(got.size(), hand.size());
    for (size_t t = 0; t < hand.size(); ++t) EXPECT_NEAR(got[t], hand[t], 1e-7) << "step " << t;
}

}  // namespace

// Today's rule, bit for bit: the rate of epoch e is lr * lr_decay^(e - 1), whatever the step within it.
TEST(Schedule, StepDecayKeepsEachEpochsRate) {
    const RateSchedule s{Schedule::Step, 0.05f, 0.8f, 0.0f};
    for (int epoch = 1; epoch <= 4; ++epoch)
        for (int step : {0, 7, 9}) {
            const float today = 0.05f * static_cast<float>(std::pow(static_cast<double>(0.8f), epoch - 1));
            EXPECT_EQ(scheduled_lr(s, (epoch - 1) * 10 + step, 10, 4), today) << epoch << " " << step;
        }
    expect_rates(rates(s, 2, 3), {0.05, 0.05, 0.04, 0.04, 0.032, 0.032});
}

// A warm-up of 0.5 epochs of 4 steps is 2 steps: 1/2 and 2/2 of the step schedule's rate.
TEST(Schedule, WarmupRampsTheStepSchedule) {
    expect_rates(rates({Schedule::Step, 0.1f, 0.5f, 0.5f}, 4, 2), {0.05, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05});
    // A warm-up longer than an epoch ramps into the second epoch's decayed rate: 5 steps of 4 a step.
    expect_rates(rates({Schedule::Step, 0.1f, 0.5f, 1.25f}, 4, 2),
                 {0.02, 0.04, 0.06, 0.08, 0.05, 0.05, 0.05, 0.05});
}

// One-cycle: linear from lr at the first step after the warm-up down to 0 at the end of the run.
// 2 epochs of 5 steps, no warm-up: lr * (10 - t) / 10.
TEST(Schedule, OneCycleDecaysLinearlyToZero) {
    expect_rates(rates({Schedule::OneCycle, 0.2f, 0.8f, 0.0f}, 5, 2),
                 {0.2, 0.18, 0.16, 0.14, 0.12, 0.1, 0.08, 0.06, 0.04, 0.02});
    // A warm-up of 0.4 epochs (2 steps): 0.1, 0.2, then lr * (1 - (t - 2) / 8).
    expect_rates(rates({Schedule::OneCycle, 0.2f, 0.8f, 0.4f}, 5, 2),
                 {0.1, 0.2, 0.2, 0.175, 0.15, 0.125, 0.1, 0.075, 0.05, 0.025});
}

// Cosine: lr * (1 + cos(pi * (t - W) / (T - W))) / 2. 8 steps, no warm-up: progress t/8.
TEST(Schedule, CosineFollowsHalfACosine) {
    const double pi = std::acos(-1.0);
    std::vector<double> hand;
    for (int t = 0; t < 8; ++t) hand.push_back(0.1 * (1 + std::cos(pi * t / 8)) / 2);
    expect_rates(rates({Schedule::Cosine, 0.1f, 0.8f, 0.0f}, 4, 2), hand);
    EXPECT_NEAR(hand[4], 0.05, 1e-12);  // half-way, half the rate
    // With one epoch of 4 steps of warm-up in 3 epochs: 0.025, 0.05, 0.075, 0.1, then progress (t - 4) / 8.
    hand = {0.025, 0.05, 0.075, 0.1};
    for (int t = 4; t < 12; ++t) hand.push_back(0.1 * (1 + std::cos(pi * (t - 4) / 8)) / 2);
    expect_rates(rates({Schedule::Cosine, 0.1f, 0.8f, 1.0f}, 4, 3), hand);
}

TEST(Schedule, NamesRoundTrip) {
    for (Schedule s : {Schedule::Step, Schedule::OneCycle, Schedule::Cosine}) EXPECT_EQ(parse_schedule(schedule_name(s)), s);
    EXPECT_FALSE(parse_schedule("linear").has_value());
}

// The train line carries the schedule and the optimiser's options; flags override them.
TEST(Schedule, ModelFileRecipeAndFlags) {
    const std::string head = "model m\ninput 1x28x28\nfc out units=10\n";
    const Model m = parse_model(head + "train lr=0.2 schedule=onecycle warmup=0.5 nesterov label-smoothing=0.1 epochs=4\n", "m.net");
    TrainOptions o;
    TrainSettings s = resolve_settings(o, m.recipe);
    EXPECT_EQ(s.schedule, Schedule::OneCycle);
    EXPECT_EQ(s.warmup, 0.5f);
    EXPECT_TRUE(s.nesterov);
    EXPECT_EQ(s.label_smoothing, 0.1f);
    o.schedule = Schedule::Cosine;
    o.warmup = 0.0f;
    o.label_smoothing = 0.0f;
    s = resolve_settings(o, m.recipe);
    EXPECT_EQ(s.schedule, Schedule::Cosine);
    EXPECT_EQ(s.warmup, 0.0f);
    EXPECT_EQ(s.label_smoothing, 0.0f);
    // The defaults: today's step decay, plain momentum, one-hot targets.
    s = resolve_settings(TrainOptions{}, parse_model(head, "m.net").recipe);
    EXPECT_EQ(s.schedule, Schedule::Step);
    EXPECT_EQ(s.warmup, 0.0f);
    EXPECT_FALSE(s.nesterov);
    EXPECT_EQ(s.label_smoothing, 0.0f);

    auto refused = [&](const std::string& train, const std::string& mentions) {
        try {
            parse_model(head + train, "m.net");
            ADD_FAILURE() << train << " was taken";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
        }
    };
    refused("train schedule=linear\n", "m.net:4: schedule: 'linear' is not step, onecycle or cosine");
    refused("train schedule=cosine lr-decay=0.8\n", "lr-decay applies to schedule=step");
    refused("train warmup=2 epochs=2\n", "warmup is not shorter than the run");
    refused("train nesterov=1\n", "nesterov takes no value");
    refused("train label-smoothing=1\n", "out of range");
    refused("loss squared\ntrain label-smoothing=0.1\n", "label-smoothing needs the softmax loss");
}
