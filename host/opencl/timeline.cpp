#include "opencl/timeline.h"

namespace lenet5 {
namespace {

// Each kernel's launches and device time from finished, profiled launch events (by label).
std::vector<KernelTime> kernel_times(const std::vector<std::pair<std::string, cl::Event>>& launches) {
    std::vector<KernelTime> times;
    for (const auto& [label, event] : launches) {
        const auto start = event.getProfilingInfo<CL_PROFILING_COMMAND_START>();
        const auto end = event.getProfilingInfo<CL_PROFILING_COMMAND_END>();
        add_kernel_time(times, label, 1, static_cast<double>(end - start) * 1e-6);
    }
    return times;
}

}  // namespace

void Timeline::write(const cl::Buffer& buffer, const void* data, size_t bytes) {
    cl::Event event;
    rt_->write(buffer, data, bytes, true, &event);
    transfer(event);
}

void Timeline::read(const cl::Buffer& buffer, void* data, size_t bytes) {
    cl::Event event;
    rt_->read(buffer, data, bytes, true, &event);
    transfer(event);
}

void Timeline::write_async(const cl::Buffer& buffer, const void* data, size_t bytes, cl::Event& done) {
    rt_->write(buffer, data, bytes, false, &done);
    transfer(done);
}

PhaseTimes Timeline::take_times() {
    rt_->finish();
    return spans_.take();
}

std::vector<KernelTime> Timeline::take_kernel_times() {
    rt_->finish();
    std::vector<KernelTime> times = kernel_times(std::exchange(launches_, {}));
    for (KernelTime& t : times) {
        const auto site = sites_.find(t.name);
        if (site == sites_.end()) continue;
        t.function = site->second.function;
        t.knobs = site->second.knobs;
    }
    return times;
}

}  // namespace lenet5
