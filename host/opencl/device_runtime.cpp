#include "opencl/device_runtime.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace lenet5 {

DeviceRuntime::DeviceRuntime(OpenCLDevice device) : device_(std::move(device)) {
    cl_checked([&] {
        const cl::Device& dev = device_.device;
        context_ = cl::Context(dev);
        queue_ = cl::CommandQueue(context_, dev, CL_QUEUE_PROFILING_ENABLE);
        max_group_ = std::min(dev.getInfo<CL_DEVICE_MAX_WORK_GROUP_SIZE>(), dev.getInfo<CL_DEVICE_MAX_WORK_ITEM_SIZES>()[0]);
        compute_units_ = dev.getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>();
        local_memory_ = dev.getInfo<CL_DEVICE_LOCAL_MEM_SIZE>();
        max_buffer_ = dev.getInfo<CL_DEVICE_MAX_MEM_ALLOC_SIZE>();
        global_memory_ = dev.getInfo<CL_DEVICE_GLOBAL_MEM_SIZE>();
        align_floats_ = dev.getInfo<CL_DEVICE_MEM_BASE_ADDR_ALIGN>() / (8 * sizeof(float));  // bits to floats
    });
}

cl::CommandQueue& DeviceRuntime::side_queue() {
    if (!side_queue_()) side_queue_ = cl::CommandQueue(context_, device_.device, CL_QUEUE_PROFILING_ENABLE);
    return side_queue_;
}

const cl::Program& DeviceRuntime::program(const std::string& source, const std::string& options) {
    const std::lock_guard<std::mutex> lock(programs_mutex_);
    std::string key = options;
    key += '\n';
    key += source;
    auto it = programs_.find(key);
    if (it == programs_.end())
        it = programs_.emplace(std::move(key), build_program(context_, device_.device, source, options)).first;
    return it->second;
}

namespace {

std::string mib(cl_ulong bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return text;
}

}  // namespace

cl::Buffer DeviceRuntime::sized_buffer(size_t bytes, cl_mem_flags flags, const void* data, const char* what) const {
    const auto too_big = [&](const std::string& why) {
        return Error(std::string(what ? what : "a buffer") + " of " + mib(bytes) + " does not fit on " + device_.name +
                     ": " + why + "; try a smaller --batch, or another --device (lenet5 devices lists them)");
    };
    if (bytes > max_buffer_)
        throw too_big("it allows at most " + mib(max_buffer_) + " in one buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE), " +
                      mib(global_memory_) + " in all");
    try {
        return cl::Buffer(context_, flags, bytes, const_cast<void*>(data));
    } catch (const cl::Error& e) {
        if (e.err() != CL_INVALID_BUFFER_SIZE && e.err() != CL_MEM_OBJECT_ALLOCATION_FAILURE &&
            e.err() != CL_OUT_OF_RESOURCES && e.err() != CL_OUT_OF_HOST_MEMORY)
            throw;
        throw too_big(cl_failure(e).what() + std::string(" (the device has ") + mib(global_memory_) + " in all)");
    }
}

cl::Buffer DeviceRuntime::floats_of(cl::Buffer parent, size_t offset, size_t count) {
    cl_buffer_region region{offset * sizeof(float), count * sizeof(float)};
    return parent.createSubBuffer(CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region);
}

}  // namespace lenet5
