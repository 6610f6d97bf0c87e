// The engine of the OpenCL variants. Everything stays on the device: both data sets
// (converted once), the parameters, gradients, momentum and activations. A training step
// is four kernel launches, whatever the network (cl_kernels/common.h):
//   forward   forward_samples: one work-group per sample runs every layer and the softmax
//             cross-entropy over the sample's arena (its input and every layer's output);
//   backward  backward_samples: one work-group per sample runs every layer's backward pass
//             over a copy of the arena, writing the sample's weight gradients; sum_samples
//             adds them up over the batch in sample order;
//   update    sgd_momentum over the flat buffer.
// The phase times are those launches' own, so "forward" is the whole forward pass and
// "backward" includes the reduction over the batch. Per epoch only the order goes up and the
// per-sample losses and hits come back. The memory variants differ only in where the arena
// lives (__local in gpu-local) and how the weights are read (__constant in gpu-constant).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "engine.h"
#include "opencl_layout.h"
#include "opencl_runtime.h"

namespace lenet5 {

enum class MemoryVariant {
    Global,    // gpu: __global memory only
    Constant,  // gpu-constant: parameters through __constant memory as far as they fit
    Local,     // gpu-local: each sample's activations and deltas in __local memory
};

class OpenCLEngine final : public Engine {
public:
    OpenCLEngine(Network net, MemoryVariant memory, const OpenCLDevice& device);
    OpenCLEngine(const OpenCLEngine&) = delete;  // its step lists point into itself
    OpenCLEngine& operator=(const OpenCLEngine&) = delete;

    std::string variant() const override;
    std::string device() const override { return device_.name; }
    std::string platform() const override { return device_.platform_name; }

    void upload(Split split, const Dataset& data) override;
    void set_params(const std::vector<float>& params) override;
    std::vector<float> params() override;
    void set_momentum_buffer(const std::vector<float>& velocity) override;
    std::vector<float> momentum_buffer() override;
    void set_order(const std::vector<int32_t>& order) override;

    void forward(Split split, int first, int count) override;
    void backward() override;
    void update(float lr, float momentum, float weight_decay) override;

    Counters take_counters() override;
    PhaseTimes take_times() override;

    std::vector<float> layer_output(size_t layer) override;
    std::vector<float> gradients() override;

private:
    enum class Phase { Forward, Backward, Update, Transfer };

    // One kernel with its fixed arguments set, and how its NDRange follows the batch size.
    struct Launch {
        cl::Kernel kernel;
        size_t global = 1, local = 1;
        size_t per_sample = 0;  // if not 0: count * per_sample items (a work-group per sample)
        int count_arg = -1;     // the argument that takes the batch count, if any
    };

    struct SplitData {
        int count = 0;
        cl::Buffer inputs;  // [count][input] floats, converted on the device
        cl::Buffer labels;  // [count] bytes
    };

    void check_size(const std::vector<float>& v, const char* what) const;
    void compile_program();
    void plan_table();
    void plan_batch(int capacity);
    void check_fits(const Launch& launch) const;
    template <class... Args>
    Launch per_sample(const char* name, const Args&... args);
    void enqueue(Launch& launch, int count, cl::Event* event = nullptr);
    void enqueue_phase(Phase phase, const std::vector<Launch*>& launches, int count);
    void write(const cl::Buffer& buffer, const void* data, size_t bytes);
    void read(const cl::Buffer& buffer, void* data, size_t bytes);
    void poison_activations();
    void collect_counters();
    template <class... Args>
    cl::Kernel kernel(const char* name, const Args&... args);
    template <class... Args>
    void set_args(cl::Kernel& k, cl_uint first, const Args&... args);
    cl_uint set_param_args(cl::Kernel& k, cl_uint first);

    Network net_;
    MemoryVariant memory_;
    OpenCLDevice device_;
    cl::Context context_;
    cl::CommandQueue queue_;
    size_t wg_ = 0;            // work-group size of the element-wise kernels
    size_t sample_group_ = 0;  // work-group size of the per-sample kernels
    cl_ulong local_mem_ = 0;
    cl::Program program_;
    DeviceLayout layout_;

    cl::Buffer params_, grads_, velocity_, byte_values_;
    // gpu-constant: the first const_floats_ of params_ (whole layers that fit in __constant).
    cl::Buffer const_params_;
    size_t const_floats_ = 0;

    // The layer table and connection lists the kernels walk (common.h), and the arena of one
    // sample ([arena_] floats): the input, each layer's output at out_at_, then the fully
    // connected layers' partial sums at parts_at_ (fc_parts_ per output).
    cl::Buffer table_, pool_;
    std::vector<size_t> out_at_;
    size_t arena_ = 0, parts_at_ = 0, fc_parts_ = 1;

    Launch forward_, backward_, sum_, update_;
    cl_uint forward_scale_arg_ = 0, forward_slot_arg_ = 0;  // forward_samples' per-step arguments

    SplitData train_, test_;
    cl::Buffer order_, identity_;  // the rows of a batch: the epoch's order, or 0, 1, 2, ... (test set)
    std::vector<int32_t> order_host_;  // kept alive until its non-blocking upload is done
    cl::Event order_written_;
    bool order_set_ = false;

    // acts_ [capacity][arena_]: every sample's arena after the forward pass. out_delta_
    // [capacity][classes]: dLoss/dlogits. arenas_ [capacity][arena_]: the backward pass's working
    // copies (not gpu-local). sample_grads_ [capacity][layout size]: per-sample gradients.
    cl::Buffer acts_, out_delta_, arenas_, sample_grads_;
    int capacity_ = 0, count_ = 0;
    bool last_was_train_ = false;
    const SplitData* bound_ = nullptr;  // the split forward_'s data arguments point at

    // Per-sample loss and hit of every forward since the last take_counters, at slot cursor_ on.
    cl::Buffer losses_, hits_;
    int slots_ = 0, cursor_ = 0;
    Counters counters_;  // what collect_counters has read back so far

    // What the device did, per phase of a step (or per transfer): from the start of its first
    // command to the end of its last. Only those two commands carry events: an event on every
    // launch costs NVIDIA's driver ~3 us of host time each. Resolved lazily by take_times.
    struct Span {
        cl::Event first, last;
        Phase phase;
    };
    std::vector<Span> spans_;
};

}  // namespace lenet5
