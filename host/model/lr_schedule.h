// The learning rate of each training step: a pure function of the step, the steps per epoch, the
// epochs of the run and the rate settings, so a resumed run (or any rank) computes the same rates.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace lenet5 {

enum class Schedule {
    Step,      // lr * lr_decay^(epoch - 1): the rate of an epoch, today's default
    OneCycle,  // after the warm-up, linear from lr down to 0 at the end of the run
    Cosine,    // after the warm-up, lr * (1 + cos(pi * progress)) / 2, down to 0 at the end of the run
};

const char* schedule_name(Schedule s);  // step, onecycle, cosine
std::optional<Schedule> parse_schedule(const std::string& name);

struct RateSchedule {
    Schedule kind = Schedule::Step;
    float lr = 0.05f;       // the peak rate (step: the first epoch's)
    float lr_decay = 0.8f;  // step only: multiplies the rate after every epoch
    // Epochs of linear warm-up (fractions allowed), rounded to whole steps W: step t < W runs at
    // (t + 1) / W of the schedule's rate (onecycle and cosine: of lr; they decay from step W on).
    float warmup = 0.0f;
};

// The rate of global step `step` (0-based, counted from the first step of epoch 1) of a run of
// `epochs` epochs of `steps_per_epoch` steps.
float scheduled_lr(const RateSchedule& s, int64_t step, int steps_per_epoch, int epochs);

}  // namespace lenet5
