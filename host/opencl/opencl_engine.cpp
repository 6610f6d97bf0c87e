#include "opencl/opencl_engine.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "opencl/opencl_kernels.h"

namespace lenet5 {
namespace {

// Items of a fully connected output row in the forward pass (LANES): a warp on NVIDIA, so that a
// row's weights are read by neighbouring items.
constexpr int kLanes = 32;

// A training step's launches carry events (for the phase times) once in this many steps.
constexpr int kTimeEvery = 16;

// The kernels that run one work-group of SG items per sample, and those of a network that starts
// fully connected (step.cl's SPREAD_FIRST), groups of SG items too.
constexpr const char* kSampleKernels[] = {"forward_samples", "backward_samples", "step_samples"};
constexpr const char* kSpreadKernels[] = {"first_forward", "tail_step", "tail_forward", "step_update", "step_gradients",
                                          "step_run"};

// step_update computes the tail in every group: only when its parameters are at most this many.
constexpr size_t kFuseTail = 32768;
// step_update's groups per compute unit (the MLP on an H100, measured when a step was two launches:
// 1.24 s per epoch with 1, 1.12 s with 2, 1.31 s with 4), and no fewer than first_forward's.
constexpr size_t kStepGroupsPerUnit = 2;

// The persistent path's steps per launch: a launch waits for this many steps of the host's, so few
// enough that the device is not left idle long where a run starts (after a probe or the counters),
// and many enough that the launches' cost is small beside the steps'.
constexpr int kRunSteps = 128;

// How many reads of its counter a grid barrier's wait takes before it gives up: seconds on either
// kind of device (a GPU's read goes to its L2, ~0.5 us; a CPU's hits its cache, a few ns), far
// beyond a real wait (microseconds; on a busy CPU, another thread's time slice).
constexpr unsigned kGpuSpinLimit = 1u << 24, kCpuSpinLimit = 1u << 31;

// LENET5_PERSISTENT, for comparisons: 0 turns the persistent path off (a launch a step), a number
// of work-groups runs it in that many; unset or empty, the default (-1 here).
int persistent_setting() {
    const char* env = std::getenv("LENET5_PERSISTENT");
    if (!env || !*env) return -1;
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end || n < 0 || n > 65536)
        throw Error(std::string("LENET5_PERSISTENT must be 0 (off) or a number of work-groups, not '") + env + "'");
    return static_cast<int>(n);
}

}  // namespace

OpenCLEngine::OpenCLEngine(Network net, MemoryVariant memory, std::shared_ptr<DeviceRuntime> runtime, int group,
                           std::string group_origin, std::string knobs, const TrainingRule& rule)
    : OpenCLEngineBase(std::move(net), memory, std::move(runtime), kTimeEvery, false, rule),
      group_origin_(std::move(group_origin)),
      knobs_(std::move(knobs)) {
    if (group < 0 || (group & (group - 1)) != 0)
        throw Error("the work-group size per sample must be a power of two, not " + std::to_string(group));
    cl_checked([&] {
        grad_params_ = std::min<size_t>(32, wg_);
        if (static_cast<size_t>(group) > rt_->max_group())
            throw Error("work-groups of " + std::to_string(group) + " items per sample: " + rt_->device().name +
                        " allows at most " + std::to_string(rt_->max_group()));
        build_program(group);
        fuse_tail_ = sample_.spread && layout_.size() - sample_.tail_begin <= kFuseTail && !rule_.adam();
        const int persistent = persistent_setting();
        set_step_runs(persistent == 0 ? 0 : kRunSteps, std::max(persistent, 0));
        // The pairs' parameters (without pairs: a buffer that no layer reads).
        run_params_ = sample_.run_floats ? DeviceRuntime::floats_of(params_, sample_.run_begin, sample_.run_floats)
                                         : rt_->buffer(sizeof(float), CL_MEM_READ_ONLY);
        const size_t n = layout_.size();
        update_ = {{rule_.adam() ? adam_kernel()
                                 : kernel(program_, "sgd_momentum", params_, velocity_, grads_, static_cast<int>(n), 0.0f,
                                          0.0f, 0.0f),
                    {}, {}, rule_.adam() ? "adam_update" : "sgd_momentum"},
                   false, n};
        set_params(std::vector<float>(net_.param_count, 0.0f));
    });
}

std::string OpenCLEngine::device() const {
    std::string d = rt_->device().name + " (" + std::to_string(group_) + " items per sample, " + group_origin_ +
                    (knobs_.empty() ? "" : ", " + knobs_) + ")";
    if (fuse_tail_ && run_max_ > 0)
        d += ", persistent batch-1 steps (" + std::to_string(run_groups_) + (run_groups_ > 1 ? " groups" : " group") +
             (grid_note_.empty() ? ")" : ": " + grid_note_ + ")");
    return d;
}

void OpenCLEngine::set_step_runs(int steps, int groups, unsigned spin_limit) {
    if (steps < 0 || groups < 0) throw Error("set_step_runs: negative steps or groups");
    cl_checked([&] { flush_steps(); });
    const bool gpu = rt_->device().is_gpu;
    run_max_ = steps;
    const size_t per_unit = std::max<size_t>(1, std::min(rt_->compute_units(), sample_.first_outputs));
    run_groups_ = groups ? groups : gpu ? static_cast<int>(per_unit) : 1;
    grid_note_.clear();
    if (run_groups_ > 1 && rt_->device().miscompiles_step_run_groups) {
        grid_note_ = std::to_string(run_groups_) + " are miscompiled by PoCL 3.1's loopvec on this CPU";
        run_groups_ = 1;
    }
    spin_limit_ = spin_limit ? spin_limit : gpu ? kGpuSpinLimit : kCpuSpinLimit;
    if (capacity_ > 0 && sample_.spread) cl_checked([&] { plan_run(); });
}

void OpenCLEngine::inputs_changed(Split split, bool slots_replaced) {
    if (split == Split::Train) {
        prepared_first_ = -1;      // a sample of the old set or order
        spread_args_set_ = false;  // new buffers
    }
    if (slots_replaced) capacity_ = 0;  // the launches refer to the old buffers: plan again
}

// Builds the kernels for work-groups of `group` items per sample (0: the default, 256 or what the
// compiled kernels allow if less).
void OpenCLEngine::build_program(int group) {
    const cl::Device& dev = rt_->cl_device();
    const std::string options = build_options(knob_options(knobs_));
    const bool chosen = group > 0;
    if (!chosen) group = static_cast<int>(wg_);
    for (;;) {
        sample_ = sample_program(net_, layout_, group, std::min(group, kLanes), static_cast<int>(grad_params_),
                                 static_cast<int>(wg_ / grad_params_));
        program_ = rt_->program(sample_.source + opencl_kernel_source(), options);
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
                    " bytes; " + rt_->device().name + " allows " + std::to_string(limit) +
                    " of __constant memory (CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE)");
}

// Buffers and launches for batches of up to `capacity` samples. Arguments that change per
// step (the data set, its rows, the loss scale and slot, the count) are set per launch.
void OpenCLEngine::plan_batch(int capacity) {
    capacity_ = capacity;
    const size_t cap = static_cast<size_t>(capacity);
    const size_t floats = cap * sample_.act_floats;
    acts_ = rt_->buffer(floats * sizeof(float), CL_MEM_READ_WRITE, "the batch's activations");
    deltas_ = rt_->buffer(floats * sizeof(float), CL_MEM_READ_WRITE, "the batch's deltas");
    const size_t partial_bytes = std::max<size_t>(1, cap * sample_.run_floats) * sizeof(float);
    partials_ = rt_->buffer(partial_bytes, CL_MEM_READ_WRITE, "the samples' gradient shares");
    rt_->fill(partials_, 0.0f, partial_bytes);  // the padding stays zero
    poison_activations();
    const bool local = memory_ == MemoryVariant::Local;
    if (!local)
        work_ = rt_->buffer(cap * std::max(sample_.forward_work, sample_.backward_work) * sizeof(float),
                            CL_MEM_READ_WRITE, "the samples' work areas");
    // The data set, its rows, first, the scale and the slot are set by forward().
    forward_ = {{kernel(program_, "forward_samples", cl::Buffer(), cl::Buffer(), cl::Buffer(), 0, 1.0f, acts_, deltas_,
                        losses_, hits_, 0, params_, run_params_),
                 {}, {}, "forward_samples"},
                true};
    backward_ = {{kernel(program_, "backward_samples", acts_, deltas_, partials_, params_, run_params_), {}, {},
                  "backward_samples"},
                 true};
    step_ = {{kernel(program_, "step_samples", cl::Buffer(), cl::Buffer(), cl::Buffer(), 0, 1.0f, acts_, deltas_,
                     losses_, hits_, 0, params_, run_params_, partials_),
              {}, {}, "step_samples"},
             true};
    if (!local) {
        forward_.run.kernel.setArg(12, work_);
        backward_.run.kernel.setArg(5, work_);
        step_.run.kernel.setArg(13, work_);
    }
    // Work-groups of wg_ items: grad_params_ flat parameters, or a tile of a fully connected layer's weights.
    gradients_ = {{kernel(program_, "gradients", acts_, deltas_, partials_, 0, grads_), {}, {}, "gradients"},
                  false,
                  sample_.gradient_groups * wg_,
                  3};
    // A fused step's gradients and update; the learning rate, momentum and weight decay are set by update().
    gradients_update_ = {{kernel(program_, "gradients_update", acts_, deltas_, partials_, 0, grads_, params_, velocity_,
                                 0.0f, 0.0f, 0.0f),
                          {}, {}, "gradients_update"},
                         false, gradients_.items, 3};
    if (!local) {
        sums_ = rt_->buffer(gradients_.items * (wg_ / grad_params_) * sizeof(float));  // a sum per lane of a tile's rows
        gradients_.run.kernel.setArg(5, sums_);
        gradients_update_.run.kernel.setArg(10, sums_);
    }
    // A probe's gradients at batch 1 (gradients_sgd's, without the update).
    gradients_one_ = {{kernel(program_, "gradients_one", acts_, deltas_, partials_, grads_), {}, {}, "gradients_one"},
                      false,
                      layout_.size()};
    // The learning rate, momentum and weight decay are set by update().
    gradients_sgd_ = {{kernel(program_, "gradients_sgd", acts_, deltas_, partials_, grads_, params_, velocity_, 0.0f,
                              0.0f, 0.0f),
                       {}, {}, "gradients_sgd"},
                      false,
                      layout_.size()};
    if (!sample_.spread) return;
    // Batch 1 of a network that starts fully connected. The data set, its rows, first, the scale
    // and the slot are set by forward(); the learning rate, momentum and weight decay by update().
    const size_t first_groups = (sample_.first_outputs + sample_.rows_per_group - 1) / sample_.rows_per_group;
    // step_update's groups update the first layer's rows as first_forward's groups compute them: as many at least.
    const size_t step_groups = std::max<size_t>(
        first_groups, std::min(rt_->compute_units() * kStepGroupsPerUnit, (layout_.size() + group_ - 1) / group_));
    snapshot_ = rt_->buffer(layout_.size() * sizeof(float));
    own_rows_ = rt_->buffer(step_groups * (2 * sample_.act_floats + 2) * sizeof(float));
    first_ = {{kernel(program_, "first_forward", cl::Buffer(), cl::Buffer(), 0, acts_, params_, snapshot_), {}, {},
               "first_forward"},
              true, 0, -1, first_groups};
    auto tail_kernel = [&](const char* name) -> Launch {  // the same arguments
        return {{kernel(program_, name, cl::Buffer(), cl::Buffer(), 0, 1.0f, acts_, deltas_, losses_, hits_, 0,
                        params_),
                 {}, {}, name},
                true, 0, -1, 1};
    };
    tail_ = tail_kernel("tail_step");
    tail_forward_ = tail_kernel("tail_forward");
    for (int i = 0; i < 2; ++i) {
        spread_acts_[i] = rt_->buffer(sample_.act_floats * sizeof(float));
        spread_snapshots_[i] = rt_->buffer(layout_.size() * sizeof(float));
    }
    prepared_first_ = -1;
    spread_args_set_ = false;
    step_update_rates_ = {-1.0f, -1.0f, -1.0f};
    // The data set, its rows, first, the slot, the next sample and the slots are set by forward()
    // and update().
    step_update_ = {{kernel(program_, "step_update", cl::Buffer(), cl::Buffer(), 0, 1.0f, acts_, deltas_, losses_,
                            hits_, 0, snapshot_, own_rows_, grads_, params_, velocity_, 0.0f, 0.0f, 0.0f, cl::Buffer(),
                            0, spread_acts_[0], spread_snapshots_[0], spread_acts_[1], spread_snapshots_[1], 0, -1),
                     {}, {}, "step_update"},
                    true, 0, -1, step_groups};
    // A probe's gradients as step_update computes them (step.cl's step_gradients).
    gradients_one_ = {{kernel(program_, "step_gradients", acts_, deltas_, grads_), {}, {}, "step_gradients"},
                      true, 0, -1, step_groups};
    if (!local) {
        spread_work_ = rt_->buffer(std::max(first_groups * group_, step_groups * std::max(sample_.tail_work, group_)) *
                                   sizeof(float));
        first_.run.kernel.setArg(6, spread_work_);
        tail_.run.kernel.setArg(10, spread_work_);
        tail_forward_.run.kernel.setArg(10, spread_work_);
        step_update_.run.kernel.setArg(25, spread_work_);
    }
    plan_run();
}

// The persistent path's buffers and launch, for run_groups_ groups. Its other arguments are set by
// launch_run().
void OpenCLEngine::plan_run() {
    const size_t groups = static_cast<size_t>(run_groups_), tail = layout_.size() - sample_.tail_begin;
    const size_t work = std::max(sample_.tail_work, group_) + 1;  // and grid_sync's int
    run_rows_ = rt_->buffer(groups * (2 * sample_.act_floats + 2) * sizeof(float));
    tails_ = rt_->buffer((sample_.tail_begin + groups * 2 * tail) * sizeof(float));
    sync_ = rt_->buffer(2 * sizeof(cl_uint));
    rt_->fill(sync_, cl_uint{0}, 2 * sizeof(cl_uint));
    run_ = {{kernel(program_, "step_run", cl::Buffer(), cl::Buffer(), 0, 0, 0, 1.0f, acts_, deltas_, losses_, hits_, 0,
                    run_rows_, tails_, grads_, params_, velocity_, 0.0f, 0.0f, 0.0f, cl::Buffer(), spread_acts_[0],
                    spread_acts_[1], 0, sync_, spin_limit_),
             {}, {}, "step_run"},
            true, 0, -1, groups};
    if (memory_ != MemoryVariant::Local) {
        run_work_ = rt_->buffer(groups * work * sizeof(float));
        run_.run.kernel.setArg(25, run_work_);
    }
    if (groups > 1 && !groups_run_at_once()) {
        grid_note_ = std::to_string(groups) + " did not run at once";
        run_groups_ = 1;
        plan_run();
    }
}

// Whether run_groups_ groups meet at step_run's grid barrier on this device: OpenCL does not
// promise that the groups of a launch run at once, so a launch of grid_probe tries it first.
bool OpenCLEngine::groups_run_at_once() {
    constexpr int kRounds = 8;
    // A GPU's real wait is microseconds; a CPU's may be another thread's time slice. Either way a
    // failed probe gives up within about a second.
    const unsigned spins = std::min(spin_limit_, rt_->device().is_gpu ? 1u << 20 : 1u << 28);
    const size_t groups = static_cast<size_t>(run_groups_);
    cl::Kernel probe = kernel(program_, "grid_probe", sync_, spins, kRounds);
    if (memory_ != MemoryVariant::Local) probe.setArg(3, run_work_);
    rt_->queue().enqueueNDRangeKernel(probe, cl::NullRange, cl::NDRange(groups * group_), cl::NDRange(group_));
    cl_uint flags[2] = {0, 0};
    rt_->queue().enqueueReadBuffer(sync_, CL_TRUE, 0, sizeof flags, flags);
    rt_->fill(sync_, cl_uint{0}, sizeof flags);
    return flags[1] == 0;
}

// Fails clearly, before any launch, when a per-sample kernel's work area does not fit.
void OpenCLEngine::check_local_memory(const cl::Kernel& k) const {
    const cl_ulong local = k.getWorkGroupInfo<CL_KERNEL_LOCAL_MEM_SIZE>(rt_->cl_device());
    if (local > rt_->local_memory())
        throw Error(variant() + ": kernel " + k.getInfo<CL_KERNEL_FUNCTION_NAME>() + " needs " + std::to_string(local) +
                    " bytes of __local memory with " + std::to_string(group_) + " items per sample; " +
                    rt_->device().name + " has " + std::to_string(rt_->local_memory()) + " (CL_DEVICE_LOCAL_MEM_SIZE)");
}

const KernelLaunch* OpenCLEngine::sized(Launch& launch, int count) {
    if (launch.count_arg >= 0) launch.run.kernel.setArg(static_cast<cl_uint>(launch.count_arg), count);
    const size_t local = launch.per_sample ? group_ : wg_;
    const size_t global = launch.groups       ? launch.groups * group_
                          : launch.per_sample ? static_cast<size_t>(count) * group_
                                              : round_up(launch.items, local);
    launch.run.global = cl::NDRange(global);
    launch.run.local = cl::NDRange(local);
    return &launch.run;
}

// NaN in every activation and delta, so that an element a kernel fails to write shows up.
void OpenCLEngine::poison_activations() {
    if (capacity_ == 0) return;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (const auto* b : {&acts_, &deltas_}) rt_->fill(*b, nan, b->getInfo<CL_MEM_SIZE>());
}

void OpenCLEngine::params_replaced() {
    gradients_pending_ = false;  // poisoned, as after any set_params
    prepared_first_ = -1;        // computed from the old parameters
    poison_activations();
}

void OpenCLEngine::forward(Split split, int first, int count) {
    const bool train = split == Split::Train;
    const SplitData& data = batch_data(split, first, count);
    cl_checked([&] {
        compute_pending_gradients();  // from the activations this forward replaces
        if (count > capacity_) {
            launch_run();  // into the buffers it was recorded for
            plan_batch(count);
        }
        if (cursor_ + count > slots_) collect_counters();
        const bool batch1 = train && count == 1;
        // A training step runs fused, except a probe, which runs phase by phase (at batch 1: as a batch of one),
        // and every step under Adam (the fused kernels are SGD's).
        const bool probe = timeline_.start_step(train, train && !rule_.adam()) || rule_.adam();
        fused_step_ = train && !probe;
        // The next step of the recorded run joins it; anything else runs after it.
        joined_ = fused_step_ && sample_.spread && run_count_ > 0 && first == run_first_ + run_count_ &&
                  cursor_ == run_cursor_ + run_count_;
        if (!joined_) launch_run();
        if (batch1 && sample_.spread) {
            step_first_ = first;
            step_slot_ = cursor_;
            tail_pending_ = !probe;
            cursor_ += 1;
            count_ = 1;
            last_was_train_ = true;
            if (joined_) return;  // the run computes its first layer
            // Only what changes from step to step: each clSetKernelArg costs host time, which a
            // one-launch step must keep below the device's. The tail's arguments are set if it runs.
            cl::Kernel& update = step_update_.run.kernel;
            if (!spread_args_set_) {
                update.setArg(0, data.labels);
                update.setArg(1, order_);
                update.setArg(17, data.inputs);
                spread_args_set_ = true;
            }
            update.setArg(2, first);
            update.setArg(8, step_slot_);
            // The previous step's update computed this sample's first layer, unless something
            // intervened; a probe computes it itself.
            cur_slot_ = prepared_first_ == first && !probe ? prepared_slot_ : 0;
            prepared_first_ = -1;
            if (cur_slot_ == 0) {
                first_.run.kernel.setArg(0, data.inputs);
                first_.run.kernel.setArg(1, order_);
                first_.run.kernel.setArg(2, first);
                // Timed whenever it runs (once an epoch in a run of steps), not as a sample of the steps.
                timeline_.run(Phase::Forward, {sized(first_, 1)}, true);
            }
            if (probe) {  // the tail's forward now; backward() computes the deltas
                cl::Kernel& tail = tail_forward_.run.kernel;
                tail.setArg(0, data.labels);
                tail.setArg(1, order_);
                tail.setArg(2, first);
                tail.setArg(8, step_slot_);
                timeline_.run(Phase::Forward, {sized(tail_forward_, 1)});
            }
            return;
        }
        Launch& launch = fused_step_ ? step_ : forward_;  // the same first arguments
        cl::Kernel& k = launch.run.kernel;
        k.setArg(0, data.inputs);
        k.setArg(1, data.labels);
        k.setArg(2, train ? order_ : identity_);
        k.setArg(3, first);
        k.setArg(4, 1.0f / static_cast<float>(count));
        k.setArg(9, cursor_);
        timeline_.run(fused_step_ ? Phase::Fused : Phase::Forward, {sized(launch, count)});
        cursor_ += count;
        count_ = count;
        last_was_train_ = train;
    });
}

void OpenCLEngine::backward() {
    if (!last_was_train_) throw Error("backward() needs a training forward() first");
    if (fused_step_) {  // step_samples or the update's kernel runs the backward; the gradients come with the update
        gradients_pending_ = true;
        return;
    }
    Launch& gradients = count_ == 1 ? gradients_one_ : gradients_;  // a batch-1 probe: gradients_sgd's gradients
    cl_checked([&] { timeline_.run(Phase::Backward, {sized(backward_, count_), sized(gradients, count_)}); });
}

// A batch-1 step's gradients, when something needs them before update() (which computes them itself).
void OpenCLEngine::compute_pending_gradients() {
    finish_tail();
    if (!gradients_pending_) return;
    gradients_pending_ = false;
    timeline_.run(Phase::Backward, {sized(gradients_, count_)});
}

// A spread batch-1 step's tail (after first_forward), in one group, when something needs it before
// update() (which computes it itself). A step that joined a run gets its first layer from the run.
void OpenCLEngine::finish_tail() {
    if (!tail_pending_) return;
    if (joined_) {
        launch_run();
        cur_slot_ = prepared_slot_;
        prepared_first_ = -1;
        joined_ = false;
    }
    tail_pending_ = false;
    cl::Kernel& tail = tail_.run.kernel;
    tail.setArg(0, train_.labels);
    tail.setArg(1, order_);
    tail.setArg(2, step_first_);
    tail.setArg(8, step_slot_);
    if (cur_slot_ != 0) {  // tail_step reads the first layer's outputs from acts_
        rt_->queue().enqueueCopyBuffer(spread_acts_[cur_slot_ - 1], acts_, 0, 0, sample_.act_floats * sizeof(float));
        cur_slot_ = 0;
    }
    timeline_.run(Phase::Fused, {sized(tail_, 1)});
}

void OpenCLEngine::update(float lr, float momentum, float weight_decay) {
    cl_checked([&] {
        const std::array<float, 3> rates{lr, momentum, weight_decay};
        const bool fused = tail_pending_ && gradients_pending_ && fuse_tail_;
        if (fused && run_max_ > 0) return record_run_step(rates);
        if (fused)
            tail_pending_ = false;
        else
            finish_tail();
        if (fused) {  // and the next training sample's first layer, into the other slot than this step's
            const int next = step_first_ + 1 < train_.count ? step_first_ + 1 : -1;
            prepared_first_ = next;
            prepared_slot_ = next < 0 ? -1 : cur_slot_ == 1 ? 2 : 1;
            cl::Kernel& update = step_update_.run.kernel;
            update.setArg(18, std::max(next, 0));
            update.setArg(23, cur_slot_);
            update.setArg(24, prepared_slot_);
        } else {
            prepared_first_ = -1;
        }
        Launch& launch = fused                ? step_update_
                         : !gradients_pending_ ? update_
                         : count_ == 1         ? gradients_sgd_
                                               : gradients_update_;
        // Where lr, momentum and weight decay go.
        const cl_uint at = fused ? 14 : &launch == &update_ ? 4 : &launch == &gradients_sgd_ ? 6 : 7;
        if (rule_.adam()) {  // update_ (forward() ran the step phase by phase)
            set_adam_args(launch.run.kernel, lr, weight_decay);
        } else if (!fused || rates != step_update_rates_) {  // step_update keeps them from step to step
            launch.run.kernel.setArg(at, lr);
            launch.run.kernel.setArg(at + 1, momentum);
            launch.run.kernel.setArg(at + 2, weight_decay);
            if (fused) step_update_rates_ = rates;
        }
        gradients_pending_ = false;
        timeline_.run(&launch == &update_ ? Phase::Update : Phase::Fused, {sized(launch, count_)});
        rt_->flush();  // hand the step to the device now, without waiting for it
    });
}

// update() of a fused step on the persistent path: the step joins the recorded run (or starts one),
// which goes to the device once it is kRunSteps long. A run keeps one set of rates.
void OpenCLEngine::record_run_step(const std::array<float, 3>& rates) {
    tail_pending_ = gradients_pending_ = false;
    if (joined_ && rates != run_rates_) {  // the run so far, which computes this step's first layer
        launch_run();
        cur_slot_ = prepared_slot_;
        joined_ = false;
    }
    if (!joined_) {  // forward() launched any run before this step
        run_first_ = step_first_;
        run_cursor_ = step_slot_;
        run_slot_ = cur_slot_;
        run_rates_ = rates;
    }
    prepared_first_ = -1;
    joined_ = false;
    if (++run_count_ == run_max_) launch_run();
}

// The recorded run as one launch of step_run, which also computes the first layer of the training
// sample after it (if there is one) into the slot after its last step's.
void OpenCLEngine::launch_run() {
    if (run_count_ == 0) return;
    const int next = run_first_ + run_count_;
    if (run_slot_ == 0 && run_groups_ > 1) {
        // Group 0 writes the step's activations to acts_, which the other groups would read in the
        // same launch as slot 0: they read a copy in slot 1 instead.
        rt_->queue().enqueueCopyBuffer(acts_, spread_acts_[0], 0, 0, sample_.act_floats * sizeof(float));
        run_slot_ = 1;
    }
    int slot = run_slot_;
    for (int k = 0; k < run_count_; ++k) slot = slot == 1 ? 2 : 1;
    cl::Kernel& k = run_.run.kernel;
    k.setArg(0, train_.labels);
    k.setArg(1, order_);
    k.setArg(2, run_first_);
    k.setArg(3, run_count_);
    k.setArg(4, next < train_.count ? 1 : 0);
    k.setArg(10, run_cursor_);
    for (cl_uint i = 0; i < 3; ++i) k.setArg(16 + i, run_rates_[i]);
    k.setArg(19, train_.inputs);
    k.setArg(22, run_slot_);
    // Timed every time: one event for many steps costs little.
    timeline_.run(Phase::Fused, {sized(run_, 0)}, true);
    rt_->flush();
    prepared_first_ = next < train_.count ? next : -1;
    prepared_slot_ = slot;
    run_count_ = 0;
    runs_unchecked_ = true;
}

void OpenCLEngine::flush_steps() {
    launch_run();
    check_runs();
}

// Reads the barrier's error flag after runs (a wait for them): a barrier that gave up means that
// not every group ran at once, and the steps after it were not computed.
void OpenCLEngine::check_runs() {
    if (!runs_unchecked_) return;
    runs_unchecked_ = false;
    cl_uint flags[2] = {0, 0};
    timeline_.read(sync_, flags, sizeof flags);
    if (flags[1] == 0) return;
    rt_->fill(sync_, cl_uint{0}, sizeof flags);  // a fresh barrier for the next run
    prepared_first_ = -1;
    cursor_ = 0;  // the losses of steps that did not run
    throw Error(variant() + ": the persistent batch-1 steps' grid barrier gave up after " +
                std::to_string(spin_limit_) + " reads: not all of its " + std::to_string(run_groups_) +
                " work-groups ran at once on " + rt_->device().name +
                "; LENET5_PERSISTENT=0 runs a launch a step instead");
}

std::vector<float> OpenCLEngine::layer_output(size_t layer) {
    if (count_ == 0) throw Error("layer_output() before forward()");
    return cl_checked([&] {
        finish_tail();
        launch_run();
        // The layer's slice of each sample's activations: one rectangular read, a row per sample.
        const size_t n = static_cast<size_t>(count_), size = static_cast<size_t>(net_.layers.at(layer).out.size());
        const size_t row = size * sizeof(float), pitch = sample_.act_floats * sizeof(float);
        std::vector<float> v(n * size);
        cl::Event event;
        rt_->queue().enqueueReadBufferRect(acts_, CL_TRUE, {sample_.output_at[layer] * sizeof(float), 0, 0}, {0, 0, 0},
                                           {row, n, 1}, pitch, 0, row, 0, v.data(), nullptr, &event);
        timeline_.transfer(event);
        return v;
    });
}

}  // namespace lenet5
