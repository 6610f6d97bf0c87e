#include "opencl/device_runtime.h"

#include <algorithm>
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

cl::Buffer DeviceRuntime::floats_of(cl::Buffer parent, size_t offset, size_t count) {
    cl_buffer_region region{offset * sizeof(float), count * sizeof(float)};
    return parent.createSubBuffer(CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region);
}

}  // namespace lenet5
