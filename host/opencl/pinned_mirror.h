// A flat host copy (network.h's layout) of one device-layout buffer (opencl_layout.h) in pinned
// memory: a buffer made with CL_MEM_ALLOC_HOST_PTR and mapped once for its life, so that reads
// and writes of it run as DMA without a staging copy. One layer's bucket moves with one
// non-blocking command per block (its weights, its biases: separate aligned blocks on the
// device); the events say when.
#pragma once
#include <memory>
#include <vector>

#include "model/network.h"
#include "opencl/device_runtime.h"
#include "opencl/opencl_layout.h"

namespace lenet5 {

class PinnedMirror {
public:
    PinnedMirror(std::shared_ptr<DeviceRuntime> runtime, const Network& net, const DeviceLayout& layout);
    ~PinnedMirror();
    PinnedMirror(const PinnedMirror&) = delete;
    PinnedMirror& operator=(const PinnedMirror&) = delete;

    float* data() { return host_; }
    // Non-blocking: layer `layer`'s blocks of `device` into data(), or from data() into `device`;
    // each command's event goes to `events`. after: a read on the runtime's side queue that waits
    // for this event (instead of one in order on its main queue).
    void read(const cl::Buffer& device, size_t layer, std::vector<cl::Event>& events, const cl::Event* after = nullptr);
    void write(const cl::Buffer& device, size_t layer, std::vector<cl::Event>& events);

private:
    void move(const cl::Buffer& device, size_t layer, bool to_host, std::vector<cl::Event>& events,
              const cl::Event* after = nullptr);

    std::shared_ptr<DeviceRuntime> rt_;
    const DeviceLayout& layout_;
    cl::Buffer pinned_;
    float* host_ = nullptr;
};

}  // namespace lenet5
