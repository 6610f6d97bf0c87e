// Device time of convolutions (convbench, tune --conv): the span from the first enqueued command's
// start to the last's end, from event profiling (a DeviceRuntime's queue has it on).
#pragma once
#include <algorithm>
#include <utility>
#include <vector>

#include "conv/opencl_conv.h"

namespace lenet5::conv {

inline double span_ms(const std::vector<cl::Event>& events) {
    if (events.empty()) return 0.0;
    cl_ulong first = events.front().getProfilingInfo<CL_PROFILING_COMMAND_START>(), last = 0;
    for (const auto& e : events) {
        first = std::min(first, e.getProfilingInfo<CL_PROFILING_COMMAND_START>());
        last = std::max(last, e.getProfilingInfo<CL_PROFILING_COMMAND_END>());
    }
    return double(last - first) * 1e-6;
}

// The middle value of `v` (the upper one of an even count).
inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// The median over `repeats` runs of run() (after one untimed run that builds and allocates) of
// its commands' device time in milliseconds.
template <class F>
double median_kernel_ms(OpenCLConv& conv, DeviceRuntime& rt, int repeats, F&& run) {
    run();
    rt.finish();
    std::vector<double> ms;
    std::vector<cl::Event> events;
    for (int r = 0; r < repeats; ++r) {
        events.clear();
        conv.record_events(&events);
        run();
        conv.record_events(nullptr);
        rt.finish();
        ms.push_back(span_ms(events));
    }
    return median(std::move(ms));
}

}  // namespace lenet5::conv
