// One OpenCL device as every executor uses it (both training engines, the convolutions of
// host/conv/, inference): the context and its in-order queue with profiling, a program cache,
// buffers, transfers and kernel launches. Executors that work together share one runtime (a
// std::shared_ptr): the batch-level engine and its OpenCLConv, the inference runner and its
// OpenCLConv; they then enqueue on the same queue, in order, and build a program once.
//
//   auto rt = std::make_shared<DeviceRuntime>(select_opencl_device(-1));
//   const cl::Program& p = rt->program(source, "-cl-std=CL1.2");   // built once per runtime
//   cl::Buffer x = rt->buffer(n * sizeof(float));
//   rt->write(x, host.data(), n * sizeof(float));                   // blocking
//   rt->launch({rt->kernel(p, "scale", x, 2.0f), cl::NDRange(n), cl::NullRange, "scale"});
//
// What an executor's commands took (phases, transfers, the per-kernel profile) is its own
// Timeline's (timeline.h): the runtime adds no event to a command it is not asked for.
#pragma once
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "opencl/opencl_runtime.h"

namespace lenet5 {

// n rounded up to a multiple of m (a launch's range over n items in groups of m).
inline size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

// The largest power of two not above n (at least 1).
inline size_t floor_pow2(size_t n) {
    size_t p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}

// A kernel with its arguments set and its range: one command of a planned step. name: its label
// in the per-kernel profile.
struct KernelLaunch {
    cl::Kernel kernel;
    cl::NDRange global, local;
    std::string name;
    // Instead of `kernel`: host code that enqueues its own commands on the runtime's queue (a CLBlast
    // routine), appending their events to the vector when it is given one.
    std::function<void(std::vector<cl::Event>*)> call = nullptr;
};

class DeviceRuntime {
public:
    // Throws Error (cl_failure) when the context or queue cannot be made.
    explicit DeviceRuntime(OpenCLDevice device);
    DeviceRuntime(const DeviceRuntime&) = delete;
    DeviceRuntime& operator=(const DeviceRuntime&) = delete;

    const OpenCLDevice& device() const { return device_; }
    const cl::Device& cl_device() const { return device_.device; }
    const cl::Context& context() const { return context_; }
    cl::CommandQueue& queue() { return queue_; }
    // A second in-order queue on the same device (with profiling), made on first use by the
    // executor's own thread: copies there wait for an event of queue() while queue() runs on, e.g.
    // a layer's gradients read while the backward of the layers below it goes on.
    cl::CommandQueue& side_queue();

    // The device's limits that the executors plan with.
    size_t max_group() const { return max_group_; }  // work-group items along dimension 0
    size_t compute_units() const { return compute_units_; }
    cl_ulong local_memory() const { return local_memory_; }  // CL_DEVICE_LOCAL_MEM_SIZE
    // A sub-buffer's offset must be a multiple of this many floats (CL_DEVICE_MEM_BASE_ADDR_ALIGN).
    size_t align_floats() const { return align_floats_; }

    // `source` built with `options`, once per runtime (later calls return the same program); a
    // failed build throws Error with the build log (build_program).
    const cl::Program& program(const std::string& source, const std::string& options);

    // Kernel `name` of `program` with its arguments set in order; an OpenCL error throws Error
    // naming the kernel.
    template <class... Args>
    static cl::Kernel kernel(const cl::Program& program, const char* name, const Args&... args) {
        try {
            cl::Kernel k(program, name);
            cl_uint index = 0;
            (k.setArg(index++, args), ...);
            return k;
        } catch (const cl::Error& e) {
            throw Error(cl_failure(e).what() + std::string(" for kernel ") + name);
        }
    }

    // A buffer of `bytes`; `what` names it in the error when it does not fit on the device.
    cl::Buffer buffer(size_t bytes, cl_mem_flags flags = CL_MEM_READ_WRITE, const char* what = nullptr) const {
        return sized_buffer(bytes, flags, nullptr, what);
    }
    // A buffer holding a copy of `bytes` of host memory.
    cl::Buffer buffer(const void* data, size_t bytes, cl_mem_flags flags = CL_MEM_READ_ONLY,
                      const char* what = nullptr) const {
        return sized_buffer(bytes, flags | CL_MEM_COPY_HOST_PTR, data, what);
    }
    // Floats [offset, offset + count) of `parent` as a buffer of their own (its offset must be
    // aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN).
    static cl::Buffer floats_of(cl::Buffer parent, size_t offset, size_t count);

    // Every element of `buffer`'s first `bytes` set to `value` (non-blocking).
    template <class T>
    void fill(const cl::Buffer& buffer, T value, size_t bytes) {
        queue_.enqueueFillBuffer(buffer, value, 0, bytes);
    }

    // Host <-> device copies of `bytes` from the start of `buffer`. Blocking unless `blocking` is
    // false (the host memory must then stay alive and unchanged until the copy is done);
    // `event`: the command's event, for a caller that times or waits for it.
    void write(const cl::Buffer& buffer, const void* data, size_t bytes, bool blocking = true,
               cl::Event* event = nullptr) {
        queue_.enqueueWriteBuffer(buffer, blocking ? CL_TRUE : CL_FALSE, 0, bytes, data, nullptr, event);
    }
    void read(const cl::Buffer& buffer, void* data, size_t bytes, bool blocking = true, cl::Event* event = nullptr) {
        queue_.enqueueReadBuffer(buffer, blocking ? CL_TRUE : CL_FALSE, 0, bytes, data, nullptr, event);
    }

    // Enqueues one launch; `event` only when the caller asks (an event costs host time per launch:
    // ~3 us on NVIDIA's driver).
    void launch(const cl::Kernel& kernel, const cl::NDRange& global, const cl::NDRange& local,
                cl::Event* event = nullptr) {
        queue_.enqueueNDRangeKernel(kernel, cl::NullRange, global, local, nullptr, event);
    }
    // A launch's commands; `events` (when given) gets the event of each.
    void launch(const KernelLaunch& l, std::vector<cl::Event>* events) {
        if (l.call) return l.call(events);
        cl::Event event;
        launch(l.kernel, l.global, l.local, events ? &event : nullptr);
        if (events) events->push_back(event);
    }

    // Waits until the device has run every command enqueued so far, on both queues.
    void finish() {
        queue_.finish();
        if (side_queue_()) side_queue_.finish();
    }
    // Hands the commands enqueued so far to the device without waiting.
    void flush() { queue_.flush(); }
    // A marker on queue(): its event completes once every command enqueued before it has run.
    cl::Event marker() {
        cl::Event event;
        queue_.enqueueMarkerWithWaitList(nullptr, &event);
        return event;
    }

private:
    // clCreateBuffer, or an Error that names the buffer, its size and the device's limits, and
    // says what to do, where it does not fit.
    cl::Buffer sized_buffer(size_t bytes, cl_mem_flags flags, const void* data, const char* what) const;

    OpenCLDevice device_;
    cl::Context context_;
    cl::CommandQueue queue_, side_queue_;
    size_t max_group_ = 1, compute_units_ = 1, align_floats_ = 1;
    cl_ulong local_memory_ = 0, max_buffer_ = 0, global_memory_ = 0;
    std::mutex programs_mutex_;                  // executors on several threads may share a runtime
    std::map<std::string, cl::Program> programs_;  // by options, then source
};

}  // namespace lenet5
