#include "opencl/opencl_engine_base.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <utility>

#include "engine/engine_factory.h"
#include "engine/preprocess.h"

namespace lenet5 {

OpenCLEngineBase::OpenCLEngineBase(Network net, MemoryVariant memory, std::shared_ptr<DeviceRuntime> runtime,
                                   int sample_every, bool inference_only, const TrainingRule& rule)
    : net_(std::move(net)),
      memory_(memory),
      inference_only_(inference_only),
      rule_(rule),
      rt_(std::move(runtime)),
      timeline_(rt_, sample_every),
      wg_(floor_pow2(std::min(size_t{256}, rt_->max_group()))),
      layout_(net_, rt_->align_floats()) {
    cl_checked([&] {
        const size_t bytes = layout_.size() * sizeof(float);
        params_ = rt_->buffer(bytes);
        if (!inference_only_) {
            grads_ = rt_->buffer(bytes);
            velocity_ = rt_->buffer(bytes);
            if (rule_.adam()) second_ = rt_->buffer(bytes);
        }
        // The host's byte -> input conversion (preprocess.h) of all 256 byte values: the device
        // converts by lookup, so both sides use the same floats.
        std::vector<uint8_t> all(256);
        std::iota(all.begin(), all.end(), uint8_t{0});
        std::vector<float> values(256);
        image_to_input(all.data(), 1, 256, Shape{1, 1, 256}, net_.scaling, values.data());
        byte_values_ = rt_->buffer(values.data(), values.size() * sizeof(float));
    });
}

// The order's non-blocking upload reads order_host_ when the device gets to it: wait for it before
// order_host_ goes, also when an exception (a launch the device refused) leaves a step half enqueued.
// Without this the upload, and the step's kernels after it, read freed memory as row numbers.
OpenCLEngineBase::~OpenCLEngineBase() {
    if (!order_written_()) return;
    try {
        order_written_.wait();
    } catch (...) {  // a failed command before it: nothing more to do at teardown
    }
}

std::string OpenCLEngineBase::variant() const { return opencl_variants().at(static_cast<size_t>(memory_)); }

std::string OpenCLEngineBase::build_options(const std::string& extra) const {
    const char* memory = memory_ == MemoryVariant::Constant ? " -DMEM_CONSTANT"
                         : memory_ == MemoryVariant::Local  ? " -DMEM_LOCAL"
                                                            : "";
    std::string rule;
    // A hexadecimal literal carries the host's float exactly.
    auto define = [&](const char* name, float value) {
        char literal[32];
        std::snprintf(literal, sizeof literal, "%af", static_cast<double>(value));
        rule += std::string(" -D") + name + "=" + literal;
    };
    if (rule_.nesterov) rule += " -DNESTEROV";
    if (rule_.label_smoothing != 0.0f) define("LABEL_SMOOTHING", rule_.label_smoothing);
    if (rule_.adam()) {
        const AdamStep a = adam_step(rule_.optimizer, rule_.beta1, rule_.beta2, rule_.eps, 0.0f, 0.0f, 1);
        define("ADAM_C1", a.one_minus_beta1);
        define("ADAM_BETA2", a.beta2);
        define("ADAM_C2", a.one_minus_beta2);
        define("ADAM_EPS", a.eps);
    }
    const char* env = std::getenv("LENET5_CL_OPTIONS");
    return std::string("-cl-std=CL1.2") + memory + rule + extra + (env && *env ? std::string(" ") + env : "");
}

void OpenCLEngineBase::refuse_in_inference(const char* call) const {
    if (inference_only_) throw inference_only_error(variant(), call);
}

void OpenCLEngineBase::upload(Split split, const Dataset& data) {
    refuse_in_inference("upload()");
    cl_checked([&] {
        const Shape& in = net_.input;
        if (data.count <= 0) throw Error("cannot upload an empty data set");
        if (in.c != 1 || data.rows > in.h || data.cols > in.w)
            throw Error("images of " + std::to_string(data.rows) + "x" + std::to_string(data.cols) +
                        " do not fit the network's input " + std::to_string(in.c) + "x" + std::to_string(in.h) + "x" +
                        std::to_string(in.w));
        collect_counters();  // the loss slots may be replaced below
        SplitData& d = split == Split::Train ? train_ : test_;
        const size_t count = static_cast<size_t>(data.count);
        d.count = data.count;
        // The bytes go up once and are converted on the device; the byte buffer is released when
        // the conversion has run.
        const cl::Buffer bytes = rt_->buffer(data.images.size(), CL_MEM_READ_ONLY);
        timeline_.write(bytes, data.images.data(), data.images.size());
        d.inputs = rt_->buffer(count * static_cast<size_t>(in.size()) * sizeof(float), CL_MEM_READ_WRITE, "the data set's images");
        d.labels = rt_->buffer(count, CL_MEM_READ_ONLY);
        timeline_.write(d.labels, data.labels.data(), count);
        cl::Event converted;
        rt_->launch(DeviceRuntime::kernel(program_, "images_to_inputs", bytes, data.rows, data.cols, byte_values_,
                                          d.inputs, in.h, in.w),
                    cl::NDRange(round_up(static_cast<size_t>(in.h * in.w), wg_), count), cl::NDRange(wg_, 1), &converted);
        timeline_.transfer(converted);
        if (split == Split::Train) {
            order_ = rt_->buffer(count * sizeof(int32_t), CL_MEM_READ_ONLY);
            order_set_ = false;
        }
        // The identity rows and the loss slots cover the larger split (a batch never exceeds it).
        const int larger = std::max(train_.count, test_.count);
        const bool replaced = larger > slots_;
        if (replaced) {
            slots_ = larger;
            std::vector<int32_t> identity(static_cast<size_t>(larger));
            std::iota(identity.begin(), identity.end(), 0);
            identity_ = rt_->buffer(identity.size() * sizeof(int32_t), CL_MEM_READ_ONLY);
            timeline_.write(identity_, identity.data(), identity.size() * sizeof(int32_t));
            losses_ = rt_->buffer(identity.size() * sizeof(float));
            hits_ = rt_->buffer(identity.size() * sizeof(int32_t));
        }
        inputs_changed(split, replaced);
    });
}

const OpenCLEngineBase::SplitData& OpenCLEngineBase::batch_data(Split split, int first, int count) const {
    const bool train = split == Split::Train;
    const SplitData& data = train ? train_ : test_;
    if (data.count == 0) throw Error(std::string("forward() on the ") + (train ? "training" : "test") + " set before upload()");
    if (train && !order_set_) throw Error("forward() on the training set before set_order()");
    if (count <= 0 || first < 0 || first + count > data.count)
        throw Error("batch " + std::to_string(first) + "+" + std::to_string(count) + " is outside the " +
                    (train ? "training order" : "test set"));
    return data;
}

void OpenCLEngineBase::write_flat(const cl::Buffer& buffer, const std::vector<float>& values) {
    const auto device = layout_.to_device(values);
    timeline_.write(buffer, device.data(), device.size() * sizeof(float));
}

std::vector<float> OpenCLEngineBase::read_flat(const cl::Buffer& buffer) {
    std::vector<float> device(layout_.size());
    timeline_.read(buffer, device.data(), device.size() * sizeof(float));
    return layout_.to_host(device);
}

// The parameters to `params`, the momentum to zero, the gradients to NaN (zero in the layout's
// padding, which the update reads too), so that a gradient a backward fails to write shows up.
void OpenCLEngineBase::set_params(const std::vector<float>& params) {
    check_param_count(net_, params, "parameter buffer");
    cl_checked([&] {
        settle();  // the loss of a forward before these parameters
        write_flat(params_, params);
        draw_step_ = 0;
        if (!inference_only_) {
            rt_->fill(velocity_, 0.0f, layout_.size() * sizeof(float));
            if (rule_.adam()) rt_->fill(second_, 0.0f, layout_.size() * sizeof(float));
            adam_steps_ = 0;
            write_flat(grads_, std::vector<float>(net_.param_count, std::numeric_limits<float>::quiet_NaN()));
        }
        params_replaced();
    });
}

std::vector<float> OpenCLEngineBase::params() {
    return cl_checked([&] {
        flush_steps();
        return read_flat(params_);
    });
}

void OpenCLEngineBase::set_momentum_buffer(const std::vector<float>& velocity) {
    refuse_in_inference("set_momentum_buffer()");
    check_param_count(net_, velocity, "momentum buffer");
    cl_checked([&] {
        flush_steps();
        write_flat(velocity_, velocity);
    });
}

std::vector<float> OpenCLEngineBase::momentum_buffer() {
    refuse_in_inference("momentum_buffer()");
    return cl_checked([&] {
        flush_steps();
        return read_flat(velocity_);
    });
}

void OpenCLEngineBase::set_adam_state(const AdamState& state) {
    refuse_in_inference("set_adam_state()");
    check_adam_state(net_, rule_, state);
    cl_checked([&] {
        flush_steps();
        if (rule_.adam()) write_flat(second_, state.second);
        adam_steps_ = state.steps;
    });
}

AdamState OpenCLEngineBase::adam_state() {
    refuse_in_inference("adam_state()");
    return cl_checked([&] {
        flush_steps();
        return AdamState{rule_.adam() ? read_flat(second_) : std::vector<float>(), adam_steps_};
    });
}

cl::Kernel OpenCLEngineBase::adam_kernel() const {
    return kernel(program_, "adam_update", params_, velocity_, second_, grads_, static_cast<int>(layout_.size()), 0.0f,
                  1.0f, 0.0f, 1.0f);
}

void OpenCLEngineBase::set_adam_args(cl::Kernel& k, float lr, float weight_decay) {
    const AdamStep a = adam_step(rule_.optimizer, rule_.beta1, rule_.beta2, rule_.eps, lr, weight_decay, ++adam_steps_);
    k.setArg(5, a.weight_decay);
    k.setArg(6, a.decay);
    k.setArg(7, a.step_size);
    k.setArg(8, a.bias2_sqrt);
}

void OpenCLEngineBase::set_order(const std::vector<int32_t>& order) {
    refuse_in_inference("set_order()");
    if (order.size() != static_cast<size_t>(train_.count))
        throw Error("the training order has " + std::to_string(order.size()) + " entries, the training set " +
                    std::to_string(train_.count) + " samples");
    for (int32_t i : order)
        if (i < 0 || i >= train_.count)
            throw Error("the training order names sample " + std::to_string(i) + ", outside the training set");
    cl_checked([&] {
        settle();  // a pending step reads its label through the order
        // Non-blocking: the host copy must outlive the upload, so wait for the previous one first.
        if (order_written_()) order_written_.wait();
        order_host_ = order;
        timeline_.write_async(order_, order_host_.data(), order.size() * sizeof(int32_t), order_written_);
        order_set_ = true;
        inputs_changed(Split::Train, false);
    });
}

void OpenCLEngineBase::collect_counters() {
    settle();
    if (cursor_ == 0) return;
    const size_t n = static_cast<size_t>(cursor_);
    std::vector<float> loss(n);
    std::vector<int32_t> hit(n);
    timeline_.read(losses_, loss.data(), n * sizeof(float));
    timeline_.read(hits_, hit.data(), n * sizeof(int32_t));
    for (size_t s = 0; s < n; ++s) {
        counters_.loss_sum += loss[s];
        counters_.correct += hit[s];
    }
    counters_.samples += cursor_;
    cursor_ = 0;
}

Counters OpenCLEngineBase::take_counters() {
    return cl_checked([&] {
        collect_counters();
        return std::exchange(counters_, {});
    });
}

PhaseTimes OpenCLEngineBase::take_times() {
    return cl_checked([&] {
        flush_steps();
        return timeline_.take_times();
    });
}

std::vector<KernelTime> OpenCLEngineBase::take_kernel_times() {
    return cl_checked([&] {
        flush_steps();
        return timeline_.take_kernel_times();
    });
}

std::vector<float> OpenCLEngineBase::gradients() {
    refuse_in_inference("gradients()");
    return cl_checked([&] {
        complete_gradients();
        return read_flat(grads_);
    });
}

void OpenCLEngineBase::set_gradients(const std::vector<float>& gradients) {
    refuse_in_inference("set_gradients()");
    check_param_count(net_, gradients, "gradient buffer");
    cl_checked([&] {
        gradients_given();
        write_flat(grads_, gradients);
    });
}

PinnedMirror& OpenCLEngineBase::mirror(FlatBuffer which) {
    auto& m = mirrors_[static_cast<size_t>(which)];
    if (!m) {
        cl_checked([&] { m = std::make_unique<PinnedMirror>(rt_, net_, layout_); });
        fetching_[static_cast<size_t>(which)].resize(net_.layers.size());
    }
    return *m;
}

bool OpenCLEngineBase::listen(BackwardListener listener) {
    if (!reads_gradients_in_backward()) return false;  // buckets come once backward() returns
    listener_ = std::move(listener);
    final_.clear();
    return true;
}

void OpenCLEngineBase::gradients_final(size_t layer) {
    if (!listening()) return;
    PinnedMirror& m = mirror(FlatBuffer::Gradients);
    auto& events = fetching_[static_cast<size_t>(FlatBuffer::Gradients)].at(layer);
    events.clear();
    const cl::Event produced = rt_->marker();
    m.read(grads_, layer, events, &produced);
    final_.push_back(layer);
}

void OpenCLEngineBase::announce_gradients() {
    if (!listening()) return;
    rt_->flush();
    rt_->side_queue().flush();
    for (size_t layer : final_) {
        fetched(FlatBuffer::Gradients, layer);
        listener_.ready(layer);
    }
    final_.clear();
}

float* OpenCLEngineBase::flat(FlatBuffer which) { return mirror(which).data(); }

void OpenCLEngineBase::fetch(FlatBuffer which, size_t layer) {
    PinnedMirror& m = mirror(which);
    cl_checked([&] {
        // The gradients of a step whose backward left work to its update; the pending tail of a
        // forward, which reads the parameters these may replace.
        which == FlatBuffer::Gradients ? complete_gradients() : settle();
        auto& events = fetching_[static_cast<size_t>(which)][layer];
        events.clear();
        m.read(which == FlatBuffer::Gradients ? grads_ : params_, layer, events);
        rt_->flush();
    });
}

void OpenCLEngineBase::fetched(FlatBuffer which, size_t layer) {
    cl_checked([&] { transferred(fetching_[static_cast<size_t>(which)].at(layer)); });
}

void OpenCLEngineBase::store(FlatBuffer which, size_t layer) {
    PinnedMirror& m = mirror(which);
    cl_checked([&] {
        m.write(which == FlatBuffer::Gradients ? grads_ : params_, layer, storing_);
        rt_->flush();  // now, not when stored() waits: the next engine's writes go at the same time
    });
}

void OpenCLEngineBase::stored(FlatBuffer which) {
    cl_checked([&] {
        transferred(storing_);
        which == FlatBuffer::Gradients ? gradients_given() : params_replaced();
    });
}

void OpenCLEngineBase::transferred(std::vector<cl::Event>& events) {
    if (events.empty()) return;
    cl::WaitForEvents(events);
    for (const cl::Event& e : events) timeline_.transfer(e);
    events.clear();
}

}  // namespace lenet5
