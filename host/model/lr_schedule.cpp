#include "model/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace lenet5 {

const char* schedule_name(Schedule s) {
    switch (s) {
        case Schedule::Step: return "step";
        case Schedule::OneCycle: return "onecycle";
        case Schedule::Cosine: return "cosine";
    }
    return "step";
}

std::optional<Schedule> parse_schedule(const std::string& name) {
    for (Schedule s : {Schedule::Step, Schedule::OneCycle, Schedule::Cosine})
        if (name == schedule_name(s)) return s;
    return std::nullopt;
}

float scheduled_lr(const RateSchedule& s, int64_t step, int steps_per_epoch, int epochs) {
    const int64_t total = static_cast<int64_t>(steps_per_epoch) * epochs;
    const int64_t warm = std::llround(static_cast<double>(s.warmup) * steps_per_epoch);
    const double ramp = step < warm ? static_cast<double>(step + 1) / static_cast<double>(warm) : 1.0;
    if (s.kind == Schedule::Step) {
        const int epoch = static_cast<int>(step / steps_per_epoch) + 1;
        // The arithmetic of the rate before schedules existed, so that runs without one keep their bits.
        const float rate = s.lr * static_cast<float>(std::pow(static_cast<double>(s.lr_decay), epoch - 1));
        return step < warm ? static_cast<float>(rate * ramp) : rate;
    }
    if (step < warm) return static_cast<float>(s.lr * ramp);
    const double progress =
        std::clamp(static_cast<double>(step - warm) / static_cast<double>(std::max<int64_t>(1, total - warm)), 0.0, 1.0);
    const double pi = std::acos(-1.0);
    const double shape = s.kind == Schedule::OneCycle ? 1.0 - progress : 0.5 * (1.0 + std::cos(pi * progress));
    return static_cast<float>(s.lr * shape);
}

}  // namespace lenet5
