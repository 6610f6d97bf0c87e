// The device time of each training phase, from OpenCL profiling events (both OpenCL engines): a
// phase run lasts from the start of its first command to the end of its last. Where a step is a
// few short launches, events on every step would cost more host time than the step takes on the
// device, so only one such step in `every` gets them and stands for the others. Launches that fuse
// several phases of a step count as Phase::Fused, split over the phases by probes (fused_steps.h).
#pragma once
#include <vector>

#include "engine/engine.h"
#include "engine/fused_steps.h"
#include "opencl/opencl_runtime.h"

namespace lenet5 {

enum class Phase { Forward, Backward, Update, Transfer, Fused };

class PhaseSpans {
public:
    explicit PhaseSpans(int every) : every_(every) {}

    // A new step; sampled: a step of the kind that is timed only one time in `every`; fused: one
    // whose launches would fuse phases. Returns whether it runs unfused instead, as a probe: every
    // phase timed, not as a sample of the steps.
    bool start_step(bool sampled, bool fused = false) {
        const bool probe = fused && fused_.probe();
        probe_ = probe ? probes_++ : -1;
        sampled_ = sampled && !probe;
        timed_ = !sampled_ || steps_ % every_ == 0;
        if (sampled_) {
            ++steps_;
            if (timed_) ++timed_steps_;
        }
        return probe;
    }

    // Whether this step's launches get events; exact: commands timed whenever they run.
    bool timed(bool exact = false) const { return timed_ || exact; }

    // A phase run (exact: not a sample of the steps, as with timed()).
    void add(Phase phase, const cl::Event& first, const cl::Event& last, bool exact = false) {
        spans_.push_back({first, last, phase, sampled_ && !exact, probe_});
    }

    // The phases' milliseconds since the last call; the caller has waited for the device.
    PhaseTimes take() {
        const double scale = timed_steps_ ? static_cast<double>(steps_) / timed_steps_ : 1.0;
        steps_ = timed_steps_ = 0;
        PhaseTimes t;
        std::vector<PhaseTimes> probes(static_cast<size_t>(probes_));
        for (const auto& [first, last, phase, sampled, probe] : spans_) {
            const auto start = first.getProfilingInfo<CL_PROFILING_COMMAND_START>();
            const auto end = last.getProfilingInfo<CL_PROFILING_COMMAND_END>();
            const double ms = static_cast<double>(end - start) * 1e-6 * (sampled ? scale : 1.0);
            if (phase == Phase::Fused) {
                fused_.add_fused(ms);
                continue;
            }
            add(t, phase, ms);
            if (probe >= 0) add(probes[static_cast<size_t>(probe)], phase, ms);
        }
        spans_.clear();
        probe_ = -1;
        probes_ = 0;
        for (const PhaseTimes& p : probes) fused_.add_probe(p);
        return fused_.take(t);
    }

private:
    struct Span {
        cl::Event first, last;
        Phase phase;
        bool sampled;  // a timed sampled step's: it stands for several steps
        int probe;     // the probe step's index since take(), or -1
    };

    static void add(PhaseTimes& t, Phase phase, double ms) {
        switch (phase) {
            case Phase::Forward: t.forward_ms += ms; break;
            case Phase::Backward: t.backward_ms += ms; break;
            case Phase::Update: t.update_ms += ms; break;
            case Phase::Transfer: t.transfer_ms += ms; break;
            case Phase::Fused: break;  // take() splits it
        }
    }

    std::vector<Span> spans_;
    int every_;
    bool timed_ = true, sampled_ = false;
    int steps_ = 0, timed_steps_ = 0;  // sampled steps since take(), and the timed ones
    int probe_ = -1, probes_ = 0;      // the step's probe index (-1: not a probe), and the probes since take()
    FusedSteps fused_;
};

}  // namespace lenet5
