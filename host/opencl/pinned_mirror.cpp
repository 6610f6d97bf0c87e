#include "opencl/pinned_mirror.h"

#include <algorithm>

namespace lenet5 {

PinnedMirror::PinnedMirror(std::shared_ptr<DeviceRuntime> runtime, const Network& net, const DeviceLayout& layout)
    : rt_(std::move(runtime)), layout_(layout) {
    const size_t bytes = std::max<size_t>(net.param_count, 1) * sizeof(float);
    pinned_ = rt_->buffer(bytes, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR);
    host_ = static_cast<float*>(
        rt_->queue().enqueueMapBuffer(pinned_, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes));
}

PinnedMirror::~PinnedMirror() {
    try {
        rt_->finish();  // no read or write left in flight (a backward that failed may leave some)
        rt_->queue().enqueueUnmapMemObject(pinned_, host_);
        rt_->finish();
    } catch (...) {  // a destructor must not throw; the context goes with the runtime anyway
    }
}

void PinnedMirror::read(const cl::Buffer& device, size_t layer, std::vector<cl::Event>& events,
                        const cl::Event* after) {
    move(device, layer, /*to_host=*/true, events, after);
}

void PinnedMirror::write(const cl::Buffer& device, size_t layer, std::vector<cl::Event>& events) {
    move(device, layer, /*to_host=*/false, events);
}

void PinnedMirror::move(const cl::Buffer& device, size_t layer, bool to_host, std::vector<cl::Event>& events,
                        const cl::Event* after) {
    const std::vector<cl::Event> wait = after ? std::vector<cl::Event>{*after} : std::vector<cl::Event>{};
    cl::CommandQueue& queue = after ? rt_->side_queue() : rt_->queue();
    for (const DeviceLayout::Block& b : {layout_.weights(layer), layout_.bias(layer)}) {
        if (b.count == 0) continue;
        events.emplace_back();
        const size_t offset = b.device * sizeof(float), bytes = b.count * sizeof(float);
        if (to_host)
            queue.enqueueReadBuffer(device, CL_FALSE, offset, bytes, host_ + b.host, after ? &wait : nullptr,
                                    &events.back());
        else
            queue.enqueueWriteBuffer(device, CL_FALSE, offset, bytes, host_ + b.host, nullptr, &events.back());
    }
}

}  // namespace lenet5
