// One executor's record of what its commands took on a runtime's queue (device_runtime.h): the
// phase spans (phase_spans.h: only a phase's first and last launch carry events, and small steps
// are sampled) and, once profile_kernels() is on, every launch's event by label
// (--kernel-profile). Transfers through it count as the transfer phase. Each executor keeps its
// own, so that executors sharing a runtime still report their own times.
#pragma once
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "opencl/device_runtime.h"
#include "opencl/kernel_site.h"
#include "opencl/phase_spans.h"

namespace lenet5 {

class Timeline {
public:
    // sample_every: a sampled step (start_step) gets events one time in this many (PhaseSpans).
    Timeline(std::shared_ptr<DeviceRuntime> runtime, int sample_every)
        : rt_(std::move(runtime)), spans_(sample_every) {}

    // A new step; sampled: a step of the kind that is timed only one time in `sample_every`;
    // fused: one whose launches would fuse phases. Returns whether it runs unfused instead, as a
    // probe (PhaseSpans::start_step).
    bool start_step(bool sampled, bool fused = false) { return spans_.start_step(sampled, fused); }

    // Enqueues `launches` (KernelLaunch or KernelLaunch* items) in order as a run of `phase`:
    // events on the first and last when the step is timed (or `exact`: timed even in an untimed
    // step, and not scaled as a sample of the steps), on every launch under profile_kernels().
    template <class Launches>
    void run(Phase phase, const Launches& launches, bool exact = false) {
        const size_t n = std::size(launches);
        if (n == 0) return;
        const bool timed = spans_.timed(exact);
        cl::Event first, last;
        size_t i = 0;
        std::vector<cl::Event> events;
        for (const auto& item : launches) {
            const KernelLaunch& l = launch_of(item);
            const bool edge = timed && (i == 0 || i + 1 == n);
            events.clear();
            rt_->launch(l, profile_ || edge ? &events : nullptr);
            if (!events.empty()) {
                if (i == 0) first = events.front();
                if (i + 1 == n) last = events.back();
            }
            if (profile_) {
                if (!l.call && !sites_.count(l.name)) sites_.emplace(l.name, kernel_site(l.kernel, rt_->cl_device()));
                for (const cl::Event& e : events) launches_.emplace_back(l.name, e);
            }
            ++i;
        }
        if (timed) spans_.add(phase, first, last, exact);
    }
    void run(Phase phase, std::initializer_list<const KernelLaunch*> launches, bool exact = false) {
        run<std::initializer_list<const KernelLaunch*>>(phase, launches, exact);
    }

    // Blocking copies, timed as transfers.
    void write(const cl::Buffer& buffer, const void* data, size_t bytes);
    void read(const cl::Buffer& buffer, void* data, size_t bytes);
    // A non-blocking write, timed as a transfer: `data` must stay alive and unchanged until `done`.
    void write_async(const cl::Buffer& buffer, const void* data, size_t bytes, cl::Event& done);
    // Another command (its event) that counts as a transfer, e.g. converting uploaded data.
    void transfer(const cl::Event& event) { spans_.add(Phase::Transfer, event, event, true); }

    // Waits for the device, then each phase's milliseconds since the last call.
    PhaseTimes take_times();

    // From now on every launch of run() carries an event, for take_kernel_times.
    void profile_kernels() { profile_ = true; }
    // Waits for the device, then each kernel's launches and device time since the last call, with
    // its function and knobs (kernel_site.h).
    std::vector<KernelTime> take_kernel_times();

private:
    static const KernelLaunch& launch_of(const KernelLaunch& l) { return l; }
    static const KernelLaunch& launch_of(const KernelLaunch* l) { return *l; }

    std::shared_ptr<DeviceRuntime> rt_;
    PhaseSpans spans_;
    bool profile_ = false;
    std::vector<std::pair<std::string, cl::Event>> launches_;  // profile_kernels(): by label
    std::map<std::string, KernelSite> sites_;                  // by label, from the first launch
};

}  // namespace lenet5
