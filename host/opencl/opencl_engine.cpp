#include "opencl/opencl_engine.h"

#include <algorithm>
#include <utility>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "opencl/opencl_backend.h"
#include "opencl/opencl_kernels.h"
#include "engine/preprocess.h"

namespace lenet5 {
namespace {

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }
size_t floor_pow2(size_t n) {
    size_t p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}

size_t sub_buffer_align(const cl::Device& device) {
    return cl_checked([&] { return device.getInfo<CL_DEVICE_MEM_BASE_ADDR_ALIGN>() / (8 * sizeof(float)); });
}

// Items of a fully connected output row in the forward pass (LANES): a warp on NVIDIA, so that a
// row's weights are read by neighbouring items.
constexpr int kLanes = 32;

// A batch-1 training step's phases are timed once in this many steps.
constexpr int kTimeEvery = 16;

// The kernels that run one work-group of SG items per sample, and those of a network that starts
// fully connected (step.cl's SPREAD_FIRST), groups of SG items too.
constexpr const char* kSampleKernels[] = {"forward_samples", "backward_samples", "step_samples"};
constexpr const char* kSpreadKernels[] = {"first_forward", "tail_step", "step_update"};

// step_update computes the tail in every group: only when its parameters are at most this many.
constexpr size_t kFuseTail = 32768;
// step_update's groups per compute unit (the MLP on an H100, measured when a step was two launches:
// 1.24 s per epoch with 1, 1.12 s with 2, 1.31 s with 4), and no fewer than first_forward's.
constexpr size_t kStepGroupsPerUnit = 2;

}  // namespace

OpenCLEngine::OpenCLEngine(Network net, MemoryVariant memory, const OpenCLDevice& device, int group,
                           std::string group_origin)
    : net_(std::move(net)),
      memory_(memory),
      device_(device),
      group_origin_(std::move(group_origin)),
      layout_(net_, sub_buffer_align(device.device)),
      spans_(kTimeEvery) {
    if (group < 0 || (group & (group - 1)) != 0)
        throw Error("the work-group size per sample must be a power of two, not " + std::to_string(group));
    cl_checked([&] {
        const cl::Device& dev = device_.device;
        context_ = cl::Context(dev);
        queue_ = cl::CommandQueue(context_, dev, CL_QUEUE_PROFILING_ENABLE);
        const size_t max_group = dev.getInfo<CL_DEVICE_MAX_WORK_GROUP_SIZE>();
        const auto item_sizes = dev.getInfo<CL_DEVICE_MAX_WORK_ITEM_SIZES>();
        const size_t limit = std::min(max_group, item_sizes[0]);
        wg_ = floor_pow2(std::min(size_t{256}, limit));
        grad_params_ = std::min<size_t>(32, wg_);
        if (static_cast<size_t>(group) > limit)
            throw Error("work-groups of " + std::to_string(group) + " items per sample: " + device_.name +
                        " allows at most " + std::to_string(limit));
        local_mem_ = dev.getInfo<CL_DEVICE_LOCAL_MEM_SIZE>();
        build_program(group);

        const size_t bytes = layout_.size() * sizeof(float);
        params_ = cl::Buffer(context_, CL_MEM_READ_WRITE, bytes);
        grads_ = cl::Buffer(context_, CL_MEM_READ_WRITE, bytes);
        velocity_ = cl::Buffer(context_, CL_MEM_READ_WRITE, bytes);
        if (sample_.run_floats) {
            cl_buffer_region region{sample_.run_begin * sizeof(float), sample_.run_floats * sizeof(float)};
            run_params_ = params_.createSubBuffer(CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region);
        } else {
            run_params_ = cl::Buffer(context_, CL_MEM_READ_ONLY, sizeof(float));  // read by no layer
        }
        // The host's byte -> input conversion (preprocess.h) of all 256 byte values: the device
        // converts by lookup, so both sides use the same floats.
        std::vector<uint8_t> all(256);
        std::iota(all.begin(), all.end(), uint8_t{0});
        std::vector<float> values(256);
        image_to_input(all.data(), 1, 256, Shape{1, 1, 256}, values.data());
        byte_values_ = cl::Buffer(context_, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, 256 * sizeof(float), values.data());
        const size_t n = layout_.size();
        update_ = {kernel("sgd_momentum", params_, velocity_, grads_, static_cast<int>(n), 0.0f, 0.0f, 0.0f), false, n,
                   -1, "sgd_momentum"};
        set_params(std::vector<float>(net_.param_count, 0.0f));
    });
}

std::string OpenCLEngine::variant() const {
    switch (memory_) {
        case MemoryVariant::Global: return "gpu";
        case MemoryVariant::Constant: return "gpu-constant";
        case MemoryVariant::Local: return "gpu-local";
    }
    return "gpu";
}

// Builds the kernels for work-groups of `group` items per sample (0: the default, 256 or what the
// compiled kernels allow if less).
void OpenCLEngine::build_program(int group) {
    const cl::Device& dev = device_.device;
    const char* memory = memory_ == MemoryVariant::Constant ? " -DMEM_CONSTANT"
                         : memory_ == MemoryVariant::Local  ? " -DMEM_LOCAL"
                                                            : "";
    // LENET5_CL_OPTIONS: extra options for the OpenCL compiler, for experiments.
    const char* env = std::getenv("LENET5_CL_OPTIONS");
    const std::string options = std::string("-cl-std=CL1.2") + memory + (env && *env ? std::string(" ") + env : "");
    const bool chosen = group > 0;
    if (!chosen) group = static_cast<int>(wg_);
    for (;;) {
        sample_ = sample_program(net_, layout_, group, std::min(group, kLanes), static_cast<int>(grad_params_),
                                 static_cast<int>(wg_ / grad_params_));
        program_ = lenet5::build_program(context_, dev, sample_.source + opencl_kernel_source(), options);
        size_t allowed = std::numeric_limits<size_t>::max();
        for (const char* name : kSampleKernels)
            allowed = std::min(allowed, cl::Kernel(program_, name).getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(dev));
        if (sample_.spread)
            for (const char* name : kSpreadKernels)
                allowed = std::min(allowed, cl::Kernel(program_, name).getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(dev));
        if (allowed >= static_cast<size_t>(group)) break;
        // NVIDIA's driver reports 256 for every kernel, even a trivial one, yet runs the larger
        // groups that reqd_work_group_size asks for: a chosen size is tried (a failing launch says so).
        if (chosen) break;
        group = static_cast<int>(floor_pow2(allowed));
    }
    group_ = static_cast<size_t>(group);
    for (const char* name : kSampleKernels) check_local_memory(cl::Kernel(program_, name));
    if (sample_.spread)
        for (const char* name : kSpreadKernels) check_local_memory(cl::Kernel(program_, name));
    if (memory_ != MemoryVariant::Constant) return;
    const size_t bytes = sample_.run_floats * sizeof(float);
    const cl_ulong limit = dev.getInfo<CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE>();
    if (bytes > limit)
        throw Error("gpu-constant: the convolutions' and subsamplings' parameters take " + std::to_string(bytes) +
                    " bytes; " + device_.name + " allows " + std::to_string(limit) +
                    " of __constant memory (CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE)");
}

template <class... Args>
cl::Kernel OpenCLEngine::kernel(const char* name, const Args&... args) {
    try {
        cl::Kernel k(program_, name);
        cl_uint index = 0;
        (k.setArg(index++, args), ...);
        return k;
    } catch (const cl::Error& e) {
        throw Error(cl_failure(e).what() + std::string(" for kernel ") + name);
    }
}

// Buffers and launches for batches of up to `capacity` samples. Arguments that change per
// step (the data set, its rows, the loss scale and slot, the count) are set per launch.
void OpenCLEngine::plan_batch(int capacity) {
    capacity_ = capacity;
    const size_t cap = static_cast<size_t>(capacity);
    const size_t floats = cap * sample_.act_floats;
    acts_ = cl::Buffer(context_, CL_MEM_READ_WRITE, floats * sizeof(float));
    deltas_ = cl::Buffer(context_, CL_MEM_READ_WRITE, floats * sizeof(float));
    const size_t partial_bytes = std::max<size_t>(1, cap * sample_.run_floats) * sizeof(float);
    partials_ = cl::Buffer(context_, CL_MEM_READ_WRITE, partial_bytes);
    queue_.enqueueFillBuffer(partials_, 0.0f, 0, partial_bytes);  // the padding stays zero
    poison_activations();
    const bool local = memory_ == MemoryVariant::Local;
    if (!local)
        work_ = cl::Buffer(context_, CL_MEM_READ_WRITE,
                           cap * std::max(sample_.forward_work, sample_.backward_work) * sizeof(float));
    // The data set, its rows, first, the scale and the slot are set by forward().
    forward_ = {kernel("forward_samples", cl::Buffer(), cl::Buffer(), cl::Buffer(), 0, 1.0f, acts_, deltas_, losses_,
                       hits_, 0, params_, run_params_),
                true, 0, -1, "forward_samples"};
    backward_ = {kernel("backward_samples", acts_, deltas_, partials_, params_, run_params_), true, 0, -1,
                 "backward_samples"};
    step_ = {kernel("step_samples", cl::Buffer(), cl::Buffer(), cl::Buffer(), 0, 1.0f, acts_, deltas_, losses_,
                    hits_, 0, params_, run_params_, partials_),
             true, 0, -1, "step_samples"};
    if (!local) {
        forward_.kernel.setArg(12, work_);
        backward_.kernel.setArg(5, work_);
        step_.kernel.setArg(13, work_);
    }
    // One work-group of wg_ items per grad_params_ parameters.
    gradients_ = {kernel("gradients", acts_, deltas_, partials_, 0, grads_), false,
                  (layout_.size() + grad_params_ - 1) / grad_params_ * wg_, 3, "gradients"};
    if (!local) {
        sums_ = cl::Buffer(context_, CL_MEM_READ_WRITE, gradients_.global * sizeof(float));
        gradients_.kernel.setArg(5, sums_);
    }
    // The learning rate, momentum and weight decay are set by update().
    gradients_sgd_ = {kernel("gradients_sgd", acts_, deltas_, partials_, grads_, params_, velocity_, 0.0f, 0.0f, 0.0f),
                      false, layout_.size(), -1, "gradients_sgd"};
    if (!sample_.spread) return;
    // Batch 1 of a network that starts fully connected. The data set, its rows, first, the scale
    // and the slot are set by forward(); the learning rate, momentum and weight decay by update().
    const size_t first_groups = (sample_.first_outputs + sample_.rows_per_group - 1) / sample_.rows_per_group;
    const size_t units = device_.device.getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>();
    // step_update's groups update the first layer's rows as first_forward's groups compute them: as many at least.
    const size_t step_groups = std::max<size_t>(
        first_groups, std::min(units * kStepGroupsPerUnit, (layout_.size() + group_ - 1) / group_));
    fuse_tail_ = layout_.size() - sample_.tail_begin <= kFuseTail;
    snapshot_ = cl::Buffer(context_, CL_MEM_READ_WRITE, layout_.size() * sizeof(float));
    own_rows_ = cl::Buffer(context_, CL_MEM_READ_WRITE, step_groups * (2 * sample_.act_floats + 2) * sizeof(float));
    first_ = {kernel("first_forward", cl::Buffer(), cl::Buffer(), 0, acts_, params_, snapshot_), true, 0, -1,
              "first_forward", first_groups};
    tail_ = {kernel("tail_step", cl::Buffer(), cl::Buffer(), 0, 1.0f, acts_, deltas_, losses_, hits_, 0, params_), true,
             0, -1, "tail_step", 1};
    for (int i = 0; i < 2; ++i) {
        spread_acts_[i] = cl::Buffer(context_, CL_MEM_READ_WRITE, sample_.act_floats * sizeof(float));
        spread_snapshots_[i] = cl::Buffer(context_, CL_MEM_READ_WRITE, layout_.size() * sizeof(float));
    }
    prepared_first_ = -1;
    spread_args_set_ = false;
    step_update_rates_ = {-1.0f, -1.0f, -1.0f};
    // The data set, its rows, first, the slot, the next sample and the slots are set by forward()
    // and update().
    step_update_ = {kernel("step_update", cl::Buffer(), cl::Buffer(), 0, 1.0f, acts_, deltas_, losses_, hits_, 0,
                           snapshot_, own_rows_, grads_, params_, velocity_, 0.0f, 0.0f, 0.0f, cl::Buffer(), 0,
                           spread_acts_[0], spread_snapshots_[0], spread_acts_[1], spread_snapshots_[1], 0, -1),
                    true, 0, -1, "step_update", step_groups};
    if (!local) {
        spread_work_ = cl::Buffer(context_, CL_MEM_READ_WRITE,
                                  std::max(first_groups * group_, step_groups * std::max(sample_.tail_work, group_)) *
                                      sizeof(float));
        first_.kernel.setArg(6, spread_work_);
        tail_.kernel.setArg(10, spread_work_);
        step_update_.kernel.setArg(25, spread_work_);
    }
}

// Fails clearly, before any launch, when a per-sample kernel's work area does not fit.
void OpenCLEngine::check_local_memory(const cl::Kernel& k) const {
    const cl_ulong local = k.getWorkGroupInfo<CL_KERNEL_LOCAL_MEM_SIZE>(device_.device);
    if (local > local_mem_)
        throw Error(variant() + ": kernel " + k.getInfo<CL_KERNEL_FUNCTION_NAME>() + " needs " + std::to_string(local) +
                    " bytes of __local memory with " + std::to_string(group_) + " items per sample; " + device_.name +
                    " has " + std::to_string(local_mem_) + " (CL_DEVICE_LOCAL_MEM_SIZE)");
}

void OpenCLEngine::enqueue(Launch& launch, int count, cl::Event* event) {
    if (launch.count_arg >= 0) launch.kernel.setArg(static_cast<cl_uint>(launch.count_arg), count);
    const size_t local = launch.per_sample ? group_ : wg_;
    const size_t global = launch.groups       ? launch.groups * group_
                          : launch.per_sample ? static_cast<size_t>(count) * group_
                                              : round_up(launch.global, local);
    queue_.enqueueNDRangeKernel(launch.kernel, cl::NullRange, cl::NDRange(global), cl::NDRange(local), nullptr, event);
}

void OpenCLEngine::enqueue_phase(Phase phase, const std::vector<Launch*>& launches, int count, bool exact) {
    const bool timed = spans_.timed(exact);
    cl::Event first, last;
    for (size_t i = 0; i < launches.size(); ++i) {
        cl::Event event;
        const bool edge = timed && (i == 0 || i + 1 == launches.size());
        enqueue(*launches[i], count, profile_ || edge ? &event : nullptr);
        if (i == 0) first = event;
        if (i + 1 == launches.size()) last = event;
        if (profile_) launch_events_.emplace_back(launches[i]->name, event);
    }
    if (timed) spans_.add(phase, first, last, exact);
}

void OpenCLEngine::write(const cl::Buffer& buffer, const void* data, size_t bytes) {
    cl::Event event;
    queue_.enqueueWriteBuffer(buffer, CL_TRUE, 0, bytes, data, nullptr, &event);
    spans_.add(Phase::Transfer, event, event, true);
}

void OpenCLEngine::read(const cl::Buffer& buffer, void* data, size_t bytes) {
    cl::Event event;
    queue_.enqueueReadBuffer(buffer, CL_TRUE, 0, bytes, data, nullptr, &event);
    spans_.add(Phase::Transfer, event, event, true);
}

// NaN in every activation and delta, so that an element a kernel fails to write shows up.
void OpenCLEngine::poison_activations() {
    if (capacity_ == 0) return;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (const auto* b : {&acts_, &deltas_}) queue_.enqueueFillBuffer(*b, nan, 0, b->getInfo<CL_MEM_SIZE>());
}

void OpenCLEngine::upload(Split split, const Dataset& data) {
    cl_checked([&] {
        const Shape& in = net_.input;
        if (data.count <= 0) throw Error("cannot upload an empty data set");
        if (in.c != 1 || data.rows > in.h || data.cols > in.w)
            throw Error("images of " + std::to_string(data.rows) + "x" + std::to_string(data.cols) +
                        " do not fit the network's input " + std::to_string(in.c) + "x" + std::to_string(in.h) + "x" +
                        std::to_string(in.w));
        collect_counters();  // the loss slots may be replaced below
        if (split == Split::Train) {
            prepared_first_ = -1;      // a sample of the old set
            spread_args_set_ = false;  // new buffers
        }
        SplitData& d = split == Split::Train ? train_ : test_;
        const size_t count = static_cast<size_t>(data.count);
        d.count = data.count;
        // The bytes go up once and are converted on the device; the byte buffer is released when
        // the conversion has run.
        cl::Buffer bytes(context_, CL_MEM_READ_ONLY, data.images.size());
        write(bytes, data.images.data(), data.images.size());
        d.inputs = cl::Buffer(context_, CL_MEM_READ_WRITE, count * static_cast<size_t>(in.size()) * sizeof(float));
        d.labels = cl::Buffer(context_, CL_MEM_READ_ONLY, count);
        write(d.labels, data.labels.data(), count);
        cl::Event converted;
        queue_.enqueueNDRangeKernel(kernel("images_to_inputs", bytes, data.rows, data.cols, byte_values_, d.inputs, in.h, in.w),
                                    cl::NullRange, cl::NDRange(round_up(static_cast<size_t>(in.h * in.w), wg_), count),
                                    cl::NDRange(wg_, 1), nullptr, &converted);
        spans_.add(Phase::Transfer, converted, converted, true);
        if (split == Split::Train) {
            order_ = cl::Buffer(context_, CL_MEM_READ_ONLY, count * sizeof(int32_t));
            order_set_ = false;
        }
        // The identity rows and the loss slots cover the larger split (a batch never exceeds it).
        const int larger = std::max(train_.count, test_.count);
        if (larger > slots_) {
            slots_ = larger;
            std::vector<int32_t> identity(static_cast<size_t>(larger));
            std::iota(identity.begin(), identity.end(), 0);
            identity_ = cl::Buffer(context_, CL_MEM_READ_ONLY, identity.size() * sizeof(int32_t));
            write(identity_, identity.data(), identity.size() * sizeof(int32_t));
            losses_ = cl::Buffer(context_, CL_MEM_READ_WRITE, identity.size() * sizeof(float));
            hits_ = cl::Buffer(context_, CL_MEM_READ_WRITE, identity.size() * sizeof(int32_t));
            capacity_ = 0;  // the launches refer to the old buffers: plan again
        }
    });
}

void OpenCLEngine::write_flat(const cl::Buffer& buffer, const std::vector<float>& values) {
    const auto device = layout_.to_device(values);
    write(buffer, device.data(), device.size() * sizeof(float));
}

std::vector<float> OpenCLEngine::read_flat(const cl::Buffer& buffer) {
    std::vector<float> device(layout_.size());
    read(buffer, device.data(), device.size() * sizeof(float));
    return layout_.to_host(device);
}

void OpenCLEngine::set_params(const std::vector<float>& params) {
    check_param_count(net_, params, "parameter buffer");
    cl_checked([&] {
        finish_tail();  // the loss of a forward before these parameters
        gradients_pending_ = false;  // poisoned below, as after any set_params
        prepared_first_ = -1;        // computed from the old ones
        write_flat(params_, params);
        queue_.enqueueFillBuffer(velocity_, 0.0f, 0, layout_.size() * sizeof(float));
        // NaN in every gradient (zero in the padding, which the update reads too).
        write_flat(grads_, std::vector<float>(net_.param_count, std::numeric_limits<float>::quiet_NaN()));
        poison_activations();
    });
}

std::vector<float> OpenCLEngine::params() {
    return cl_checked([&] { return read_flat(params_); });
}

void OpenCLEngine::set_momentum_buffer(const std::vector<float>& velocity) {
    check_param_count(net_, velocity, "momentum buffer");
    cl_checked([&] { write_flat(velocity_, velocity); });
}

std::vector<float> OpenCLEngine::momentum_buffer() {
    return cl_checked([&] { return read_flat(velocity_); });
}

void OpenCLEngine::set_order(const std::vector<int32_t>& order) {
    if (order.size() != static_cast<size_t>(train_.count))
        throw Error("the training order has " + std::to_string(order.size()) + " entries, the training set " +
                    std::to_string(train_.count) + " samples");
    for (int32_t i : order)
        if (i < 0 || i >= train_.count) throw Error("the training order names sample " + std::to_string(i) + ", outside the training set");
    cl_checked([&] {
        finish_tail();  // it reads its label through the order
        prepared_first_ = -1;  // the next sample in the old order
        // Non-blocking: the host copy must outlive the upload, so wait for the previous one first.
        if (order_written_()) order_written_.wait();
        order_host_ = order;
        queue_.enqueueWriteBuffer(order_, CL_FALSE, 0, order.size() * sizeof(int32_t), order_host_.data(), nullptr,
                                  &order_written_);
        spans_.add(Phase::Transfer, order_written_, order_written_, true);
        order_set_ = true;
    });
}

void OpenCLEngine::forward(Split split, int first, int count) {
    const bool train = split == Split::Train;
    const SplitData& data = train ? train_ : test_;
    if (data.count == 0) throw Error(std::string("forward() on the ") + (train ? "training" : "test") + " set before upload()");
    if (train && !order_set_) throw Error("forward() on the training set before set_order()");
    if (count <= 0 || first < 0 || first + count > data.count)
        throw Error("batch " + std::to_string(first) + "+" + std::to_string(count) + " is outside the " +
                    (train ? "training order" : "test set"));
    cl_checked([&] {
        compute_pending_gradients();  // from the activations this forward replaces
        if (count > capacity_) plan_batch(count);
        if (cursor_ + count > slots_) collect_counters();
        const bool batch1 = train && count == 1;
        spans_.start_step(batch1);
        if (batch1 && sample_.spread) {
            // Only what changes from step to step: each clSetKernelArg costs host time, which a
            // one-launch step must keep below the device's. The tail's arguments are set if it runs.
            if (!spread_args_set_) {
                step_update_.kernel.setArg(0, data.labels);
                step_update_.kernel.setArg(1, order_);
                step_update_.kernel.setArg(17, data.inputs);
                spread_args_set_ = true;
            }
            step_update_.kernel.setArg(2, first);
            step_update_.kernel.setArg(8, cursor_);
            step_first_ = first;
            step_slot_ = cursor_;
            // The previous step's update computed this sample's first layer, unless something intervened.
            cur_slot_ = prepared_first_ == first ? prepared_slot_ : 0;
            prepared_first_ = -1;
            if (cur_slot_ == 0) {
                first_.kernel.setArg(0, data.inputs);
                first_.kernel.setArg(1, order_);
                first_.kernel.setArg(2, first);
                // Timed whenever it runs (once an epoch in a run of steps), not as a sample of the steps.
                enqueue_phase(Phase::Forward, {&first_}, 1, true);
            }
            tail_pending_ = true;
            cursor_ += 1;
            count_ = 1;
            last_was_train_ = true;
            return;
        }
        Launch& launch = batch1 ? step_ : forward_;  // the same first arguments
        cl::Kernel& k = launch.kernel;
        k.setArg(0, data.inputs);
        k.setArg(1, data.labels);
        k.setArg(2, train ? order_ : identity_);
        k.setArg(3, first);
        k.setArg(4, 1.0f / static_cast<float>(count));
        k.setArg(9, cursor_);
        enqueue_phase(Phase::Forward, {&launch}, count);
        cursor_ += count;
        count_ = count;
        last_was_train_ = train;
    });
}

void OpenCLEngine::backward() {
    if (!last_was_train_) throw Error("backward() needs a training forward() first");
    if (count_ == 1) {  // step_samples ran the backward; the gradients come with the update
        gradients_pending_ = true;
        return;
    }
    cl_checked([&] { enqueue_phase(Phase::Backward, {&backward_, &gradients_}, count_); });
}

// A batch-1 step's gradients, when something needs them before update() (which computes them itself).
void OpenCLEngine::compute_pending_gradients() {
    finish_tail();
    if (!gradients_pending_) return;
    gradients_pending_ = false;
    enqueue_phase(Phase::Backward, {&gradients_}, 1);
}

// A spread batch-1 step's tail (after first_forward), in one group, when something needs it before
// update() (which computes it itself).
void OpenCLEngine::finish_tail() {
    if (!tail_pending_) return;
    tail_pending_ = false;
    tail_.kernel.setArg(0, train_.labels);
    tail_.kernel.setArg(1, order_);
    tail_.kernel.setArg(2, step_first_);
    tail_.kernel.setArg(8, step_slot_);
    if (cur_slot_ != 0) {  // tail_step reads the first layer's outputs from acts_
        queue_.enqueueCopyBuffer(spread_acts_[cur_slot_ - 1], acts_, 0, 0, sample_.act_floats * sizeof(float));
        cur_slot_ = 0;
    }
    enqueue_phase(Phase::Forward, {&tail_}, 1);
}

void OpenCLEngine::update(float lr, float momentum, float weight_decay) {
    cl_checked([&] {
        const bool fused = tail_pending_ && gradients_pending_ && fuse_tail_;
        if (fused)
            tail_pending_ = false;
        else
            finish_tail();
        if (fused) {  // and the next training sample's first layer, into the other slot than this step's
            const int next = step_first_ + 1 < train_.count ? step_first_ + 1 : -1;
            prepared_first_ = next;
            prepared_slot_ = next < 0 ? -1 : cur_slot_ == 1 ? 2 : 1;
            step_update_.kernel.setArg(18, std::max(next, 0));
            step_update_.kernel.setArg(23, cur_slot_);
            step_update_.kernel.setArg(24, prepared_slot_);
        } else {
            prepared_first_ = -1;
        }
        Launch& launch = fused ? step_update_ : gradients_pending_ ? gradients_sgd_ : update_;
        const cl_uint at = fused ? 14 : gradients_pending_ ? 6 : 4;  // where lr, momentum and weight decay go
        const std::array<float, 3> rates{lr, momentum, weight_decay};
        if (!fused || rates != step_update_rates_) {  // step_update keeps them from step to step
            launch.kernel.setArg(at, lr);
            launch.kernel.setArg(at + 1, momentum);
            launch.kernel.setArg(at + 2, weight_decay);
            if (fused) step_update_rates_ = rates;
        }
        gradients_pending_ = false;
        enqueue_phase(Phase::Update, {&launch}, 0);
        queue_.flush();  // hand the step to the device now, without waiting for it
    });
}

// Reads back the per-sample losses and hits since the last collection and sums them in sample
// order (the order the host engine sums in).
void OpenCLEngine::collect_counters() {
    finish_tail();
    if (cursor_ == 0) return;
    const size_t n = static_cast<size_t>(cursor_);
    std::vector<float> loss(n);
    std::vector<int32_t> hit(n);
    read(losses_, loss.data(), n * sizeof(float));
    read(hits_, hit.data(), n * sizeof(int32_t));
    for (size_t s = 0; s < n; ++s) {
        counters_.loss_sum += loss[s];
        counters_.correct += hit[s];
    }
    counters_.samples += cursor_;
    cursor_ = 0;
}

Counters OpenCLEngine::take_counters() {
    return cl_checked([&] {
        collect_counters();
        const Counters c = counters_;
        counters_ = {};
        return c;
    });
}

PhaseTimes OpenCLEngine::take_times() {
    return cl_checked([&] {
        queue_.finish();
        return spans_.take();
    });
}

std::vector<KernelTime> OpenCLEngine::take_kernel_times() {
    return cl_checked([&] {
        queue_.finish();
        return kernel_times(std::exchange(launch_events_, {}));
    });
}

std::vector<float> OpenCLEngine::layer_output(size_t layer) {
    if (count_ == 0) throw Error("layer_output() before forward()");
    return cl_checked([&] {
        finish_tail();
        // The layer's slice of each sample's activations: one rectangular read, a row per sample.
        const size_t n = static_cast<size_t>(count_), size = static_cast<size_t>(net_.layers.at(layer).out.size());
        const size_t row = size * sizeof(float), pitch = sample_.act_floats * sizeof(float);
        std::vector<float> v(n * size);
        cl::Event event;
        queue_.enqueueReadBufferRect(acts_, CL_TRUE, {sample_.output_at[layer] * sizeof(float), 0, 0}, {0, 0, 0},
                                     {row, n, 1}, pitch, 0, row, 0, v.data(), nullptr, &event);
        spans_.add(Phase::Transfer, event, event, true);
        return v;
    });
}

void OpenCLEngine::set_gradients(const std::vector<float>& gradients) {
    check_param_count(net_, gradients, "gradient buffer");
    cl_checked([&] {
        gradients_pending_ = false;  // update() applies these, not the ones of a batch-1 backward
        write_flat(grads_, gradients);
    });
}

std::vector<float> OpenCLEngine::gradients() {
    return cl_checked([&] {
        compute_pending_gradients();
        return read_flat(grads_);
    });
}

}  // namespace lenet5
