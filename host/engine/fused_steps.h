// Phase times for engines that fuse a training step's phases (one launch for the forward, the
// backward and the update, or a weight gradient computed inside the update): such a step's time
// belongs to several phases at once. So one such step in kProbeEvery (the first since take(), then
// every kProbeEvery-th) runs unfused instead, as a probe, with each phase timed apart; the fused
// steps' time is split over the phases in the proportions of the probes' fastest time for each
// phase (the least disturbed by whatever else the machine does: a probe is short, and one
// preemption in it would otherwise move the shares). A probe computes the same results as a
// fused step, bit for bit; it only costs a little more time.
#pragma once
#include <algorithm>

#include "engine/engine.h"

namespace lenet5 {

class FusedSteps {
public:
    // A probe costs several fused steps' time (more launches and events, or gradients written and
    // read back: the MLP's on omp 140-170 us, about 13 steps'). One in 1024 keeps that near 0.4% of
    // the epoch (one in 256 cost omp's MLP 1.5%) and still gives the MLP's 60,000 steps 59 probes.
    static constexpr int kProbeEvery = 1024;

    // A step that would run fused: whether it runs unfused instead, as a probe.
    bool probe() { return steps_++ % kProbeEvery == 0; }

    // Time of fused work, and one probe's time of the same work run phase by phase.
    void add_fused(double ms) { fused_ms_ += ms; }
    void add_probe(const PhaseTimes& t) {
        if (probes_++ == 0) {
            least_ = t;
            return;
        }
        least_.forward_ms = std::min(least_.forward_ms, t.forward_ms);
        least_.backward_ms = std::min(least_.backward_ms, t.backward_ms);
        least_.update_ms = std::min(least_.update_ms, t.update_ms);
    }

    // `t` plus the fused time since the last take(), split in the probes' proportions.
    PhaseTimes take(PhaseTimes t) {
        const double probed = least_.forward_ms + least_.backward_ms + least_.update_ms;
        if (probed > 0) {
            t.forward_ms += fused_ms_ * least_.forward_ms / probed;
            t.backward_ms += fused_ms_ * least_.backward_ms / probed;
            t.update_ms += fused_ms_ * least_.update_ms / probed;
        } else {
            t.update_ms += fused_ms_;  // no probe time to split by
        }
        *this = {};
        return t;
    }

private:
    int steps_ = 0;   // steps that would run fused, since take()
    int probes_ = 0;  // probes added since take()
    double fused_ms_ = 0;
    PhaseTimes least_;  // each phase's least time in a probe
};

}  // namespace lenet5
