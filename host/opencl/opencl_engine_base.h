// What both OpenCL training engines (opencl_engine.h: a work-group per sample; opencl_batch_engine.h:
// a launch per layer over the batch) keep on the device the same way, on a DeviceRuntime and with a
// Timeline of their own: the parameters, gradients and momentum in the device layout
// (opencl_layout.h); both data sets, converted once when uploaded (data.cl's images_to_inputs);
// the epoch's order and the test set's identity rows; each sample's loss and hit, read back and
// summed in sample order when the counters are taken. The engines add their kernels, their
// activations and their steps (forward, backward, update).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "opencl/device_runtime.h"
#include "opencl/opencl_layout.h"
#include "opencl/pinned_mirror.h"
#include "opencl/timeline.h"

namespace lenet5 {

// In engine_factory.h's opencl_variants() order.
enum class MemoryVariant {
    Global,    // gpu: __global memory only
    Constant,  // gpu-constant: small layers' parameters through __constant memory
    Local,     // gpu-local: work areas and tiles in __local memory
};

// In a gradient exchange it is its own ExchangePort (exchange_port.h): the gradients and the
// parameters each have a pinned mirror, made on first use, that buckets are read into and written
// from with non-blocking commands; an engine whose backward() is a launch per layer reads each
// layer's gradients on the runtime's side queue as soon as they are final (gradients_final).
class OpenCLEngineBase : public Engine, private ExchangePort {
public:
    OpenCLEngineBase(const OpenCLEngineBase&) = delete;  // it owns its device state
    OpenCLEngineBase& operator=(const OpenCLEngineBase&) = delete;
    ~OpenCLEngineBase() override;

    std::string variant() const override;
    std::string platform() const override { return rt_->device().platform_name; }

    void upload(Split split, const Dataset& data) override;
    void set_params(const std::vector<float>& params) override;
    std::vector<float> params() override;
    void set_momentum_buffer(const std::vector<float>& velocity) override;
    std::vector<float> momentum_buffer() override;
    void set_adam_state(const AdamState& state) override;
    AdamState adam_state() override;
    void set_order(const std::vector<int32_t>& order) override;

    Counters take_counters() override;
    PhaseTimes take_times() override;
    void profile_kernels() override { timeline_.profile_kernels(); }
    std::vector<KernelTime> take_kernel_times() override;

    std::vector<float> gradients() override;
    void set_gradients(const std::vector<float>& gradients) override;

    ExchangePort* exchange_port() override { return inference_only_ ? nullptr : this; }

protected:
    // sample_every: the Timeline's sampling of small steps. The buffers of the parameters exist
    // afterwards; the derived engine builds program_ and then calls set_params. inference_only: an
    // engine for Engine::infer alone, with no gradients, momentum or data sets (grads_ and velocity_
    // stay null); the calls that need them throw Error (refuse_in_inference). rule: Nesterov momentum,
    // label smoothing and Adam, as build_options' -DNESTEROV, -DLABEL_SMOOTHING and -DADAM_*.
    OpenCLEngineBase(Network net, MemoryVariant memory, std::shared_ptr<DeviceRuntime> runtime, int sample_every,
                     bool inference_only = false, const TrainingRule& rule = {});

    struct SplitData {
        int count = 0;
        cl::Buffer inputs;  // [count][input] floats, converted on the device
        cl::Buffer labels;  // [count] bytes
    };

    // What the engines do their own way around the shared steps:
    // settle: run what a step left pending whose results the losses, the order or the gradients
    // depend on (the per-sample engine's deferred tail).
    virtual void settle() {}
    // flush_steps: enqueue the training steps held back (the per-sample engine's run of batch-1
    // steps) before anything reads or replaces what they write, and report their failure.
    virtual void flush_steps() {}
    // complete_gradients: make grads_ hold the last backward's gradients (gradients() reads them).
    virtual void complete_gradients() {}
    // gradients_given: set_gradients() wrote grads_; update() applies those.
    virtual void gradients_given() {}
    // params_replaced: set_params() wrote new parameters (and NaN gradients).
    virtual void params_replaced() {}
    // inputs_changed: upload() or set_order() replaced what a planned step reads; slots_replaced:
    // losses_, hits_ and identity_ are new buffers.
    virtual void inputs_changed(Split split, bool slots_replaced) = 0;
    // reads_gradients_in_backward: backward() calls gradients_final() for every layer with
    // parameters and then announce_gradients() (a gradient exchange reads each layer's bucket as
    // soon as it is final); otherwise the exchange reads them all once backward() has returned.
    virtual bool reads_gradients_in_backward() const { return false; }

    // In a gradient exchange that listens (reads_gradients_in_backward): layer `layer`'s gradients
    // are final in grads_ once the commands enqueued so far have run; its bucket is read into the
    // pinned mirror on the side queue meanwhile, while the main queue goes on. Outside one, nothing.
    void gradients_final(size_t layer);
    bool listening() const { return static_cast<bool>(listener_.ready); }
    // After the backward's last command: waits for each bucket gradients_final() started, in that
    // order, and tells the exchange.
    void announce_gradients();

    // The data set a forward(split, first, count) reads; throws Error for a batch outside it, or
    // data not uploaded or ordered yet.
    const SplitData& batch_data(Split split, int first, int count) const;
    // The OpenCL compiler's options: OpenCL C 1.2, the variant's memory knob, the training rule's
    // options (none for the default rule), `extra`, then $LENET5_CL_OPTIONS (extra options, for
    // experiments).
    std::string build_options(const std::string& extra) const;

    // Kernel `name` of `program` with its arguments set (DeviceRuntime::kernel).
    template <class... Args>
    static cl::Kernel kernel(const cl::Program& program, const char* name, const Args&... args) {
        return DeviceRuntime::kernel(program, name, args...);
    }

    // A flat parameter-layout vector (parameters, gradients, momentum) to and from the device layout.
    void write_flat(const cl::Buffer& buffer, const std::vector<float>& values);
    std::vector<float> read_flat(const cl::Buffer& buffer);
    // Under Adam (rule_.adam()): update.cl's adam_update over the flat buffers, and its arguments
    // for the next update (its step count t, counted here).
    cl::Kernel adam_kernel() const;
    void set_adam_args(cl::Kernel& k, float lr, float weight_decay);
    // Reads back the losses and hits since the last collection and adds them up in sample order.
    void collect_counters();
    // Throws Error for a training call (`call`, e.g. "backward()") on an inference-only engine.
    void refuse_in_inference(const char* call) const;

    Network net_;
    MemoryVariant memory_;
    bool inference_only_;
    TrainingRule rule_;
    // Layers that draw random numbers (layers/layer_type.h's Draw): training forwards since set_params.
    uint32_t draw_step_ = 0;
    std::shared_ptr<DeviceRuntime> rt_;
    // What the device did, per phase of a step (or per transfer), and the per-kernel profile.
    Timeline timeline_;
    size_t wg_ = 0;  // work-group size of the element-wise kernels
    DeviceLayout layout_;
    cl::Program program_;  // the engine's kernels, data.cl's among them

    cl::Buffer params_, grads_, velocity_;
    cl::Buffer second_;       // under Adam: the second moment (velocity_ the first)
    int64_t adam_steps_ = 0;  // under Adam: the updates so far
    cl::Buffer byte_values_;  // the host's conversion (preprocess.h) of each byte value
    SplitData train_, test_;
    cl::Buffer order_, identity_;  // the rows of a batch: the epoch's order, or 0, 1, 2, ... (test set)
    std::vector<int32_t> order_host_;  // kept alive until its non-blocking upload is done
    cl::Event order_written_;
    bool order_set_ = false;

    // Per-sample loss and hit of every forward since the last take_counters, at slot cursor_ on.
    cl::Buffer losses_, hits_;
    int slots_ = 0, cursor_ = 0;
    Counters counters_;  // what collect_counters has read back so far

private:
    // ExchangePort: fetch and store move a bucket between the device buffer and its pinned mirror.
    bool listen(BackwardListener listener) override;
    float* flat(FlatBuffer which) override;
    void fetch(FlatBuffer which, size_t layer) override;
    void fetched(FlatBuffer which, size_t layer) override;
    void store(FlatBuffer which, size_t layer) override;
    void stored(FlatBuffer which) override;
    PinnedMirror& mirror(FlatBuffer which);
    // Waits for `events` and counts them as transfers.
    void transferred(std::vector<cl::Event>& events);

    std::unique_ptr<PinnedMirror> mirrors_[2];            // [FlatBuffer]
    std::vector<std::vector<cl::Event>> fetching_[2];     // [FlatBuffer][layer]: its reads in flight
    std::vector<cl::Event> storing_;                      // the writes in flight
    BackwardListener listener_;                           // listen()'s, while an exchange reads in backward()
    std::vector<size_t> final_;                           // gradients_final()'s layers, in order
};

}  // namespace lenet5
