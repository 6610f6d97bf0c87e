// The engine of the OpenCL variants. Everything stays on the device: both data sets
// (converted once), the parameters, gradients, momentum and activations. A training step
// is kernel launches only, 16 for LeNet-5. Forward: one gathering the batch, one per
// convolution + subsampling pair (C1+S2, C3+S4, fused), one per fully connected layer (the
// last fused with the softmax cross-entropy). Backward, from the last layer down: a fully
// connected layer's weight gradients and the previous layer's delta; a pair's in one launch
// (work-groups per chunk of samples and map: the chunk's share of the pair's gradients, and
// the previous delta); then one launch adding up the chunks' shares. Update: one over the flat buffer. Per
// epoch only the order goes up and the per-sample losses and hits come back.
#pragma once
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "engine.h"
#include "opencl_layout.h"
#include "opencl_runtime.h"

namespace lenet5 {

enum class MemoryVariant {
    Global,    // gpu: __global memory only
    Constant,  // gpu-constant: weights through __constant memory where they fit
    Local,     // gpu-local: input tiles and weights staged in __local memory
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
    void profile_kernels() override { profile_ = true; }
    std::vector<KernelTime> take_kernel_times() override;

    std::vector<float> layer_output(size_t layer) override;
    std::vector<float> gradients() override;

private:
    enum class Phase { Forward, Backward, Update, Transfer };

    // One kernel with its fixed arguments set, and how its NDRange follows the batch size.
    struct Launch {
        cl::Kernel kernel;
        std::array<size_t, 2> global{1, 1}, local{1, 1};
        // Dimension batch_dim (if >= 0) has ceil(count / batch_step) * batch_items items.
        int batch_dim = -1;
        size_t batch_step = 1, batch_items = 1;
        int count_arg = -1;  // the argument that takes the batch count, if any
        // conv_pool_backward and sum_partials: the argument that takes the samples per chunk, which
        // follows the count (see enqueue); dimension batch_dim then has one entry per chunk.
        int chunk_arg = -1;
        std::string label{};  // "<layer> <kernel>", for the per-kernel profile
    };

    // A layer's device state: parameter and gradient sub-buffers, connection lists, launches.
    struct Layer {
        bool fc = false;              // fully connected, or a conv that is one (see the .cpp)
        bool weights_global = false;  // gpu-constant: too large for __constant, uses the __global build
        bool pair_conv = false;       // a convolution fused with the subsampling after it (conv_pool.cl)
        int run = -1;                 // a pair's layers: their run (see Run)
        cl::Buffer W, b, gW, gb;
        cl::Buffer conn_begin, conn_in, conn_out, in_begin, in_conn;
        Launch forward, weights, input;
    };

    // conv_pool_backward's work-groups take chunks of samples, at most this many chunks per step.
    static constexpr int kMaxChunks = 64;

    // Consecutive conv + subsample pairs, whose gradients take two stages: conv_pool_backward
    // writes each chunk of samples' share, sum_partials (one launch per run) adds them up.
    struct Run {
        size_t begin = 0, n = 0;  // the run's span of the device layout, in floats
        size_t last = 0;          // its last layer
        cl::Buffer partial;       // [chunks][n], zero where no parameter is (the padding)
        Launch sum;
    };

    struct SplitData {
        int count = 0;
        cl::Buffer inputs;  // [count][input] floats, converted on the device
        cl::Buffer labels;  // [count] bytes
    };

    // A flat parameter-layout buffer (params, velocity) to and from the device layout.
    void write_flat(const cl::Buffer& buffer, const std::vector<float>& values);
    std::vector<float> read_flat(const cl::Buffer& buffer);
    void build_programs();
    void plan_layers();
    void plan_batch(int capacity);
    size_t pair_groups(size_t k) const;
    size_t pair_tile_floats(size_t k) const;
    void check_fits(const Launch& launch, const std::string& layer) const;
    void enqueue(Launch& launch, int count, cl::Event* event = nullptr);
    void enqueue_phase(Phase phase, const std::vector<Launch*>& launches, int count);
    void write(const cl::Buffer& buffer, const void* data, size_t bytes);
    void read(const cl::Buffer& buffer, void* data, size_t bytes);
    void poison_activations();
    void collect_counters();
    template <class... Args>
    cl::Kernel kernel(const cl::Program& program, const char* name, const Args&... args);

    Network net_;
    MemoryVariant memory_;
    OpenCLDevice device_;
    cl::Context context_;
    cl::CommandQueue queue_;
    size_t wg_ = 0, reduce_ = 0, tile_ = 0, sample_group_ = 0;  // work-group sizes (see the .cpp)
    cl_ulong local_mem_ = 0;
    cl::Program program_, global_program_;  // global_program_: gpu-constant's fallback build
    DeviceLayout layout_;

    cl::Buffer params_, grads_, velocity_, byte_values_;
    cl::Buffer scratch_, tiles_;  // conv_pool_backward's per-group slices (not gpu-local)
    std::vector<Layer> layers_;
    std::vector<Run> runs_;
    Launch update_;

    SplitData train_, test_;
    cl::Buffer order_, identity_;  // the rows of a batch: the epoch's order, or 0, 1, 2, ... (test set)
    std::vector<int32_t> order_host_;  // kept alive until its non-blocking upload is done
    cl::Event order_written_;
    bool order_set_ = false;

    // The batch's inputs and labels, gathered from the data set by gather_ ([capacity][input], [capacity]).
    cl::Buffer batch_in_, batch_labels_;
    Launch gather_;
    std::vector<Launch*> forward_launches_, backward_launches_;  // a step's phases, in order
    // acts_[k]: layer k's output, deltas_[k]: dLoss/d(its pre-activation); [capacity][out] each.
    std::vector<cl::Buffer> acts_, deltas_;
    int capacity_ = 0, count_ = 0;
    bool last_was_train_ = false;

    // Per-sample loss and hit of every forward since the last take_counters, at slot cursor_ on.
    cl::Buffer losses_, hits_;
    int slots_ = 0, cursor_ = 0;
    Counters counters_;  // what collect_counters has read back so far

    // What the device did, per phase of a step (or per transfer): from the start of its first
    // command to the end of its last. Only those two commands carry events: an event on every
    // launch costs NVIDIA's driver ~3 us of host time each, more than many of the kernels take.
    // Resolved lazily by take_times.
    struct Span {
        cl::Event first, last;
        Phase phase;
    };
    std::vector<Span> spans_;
    // profile_kernels(): every launch's event, by label, until take_kernel_times.
    bool profile_ = false;
    std::vector<std::pair<std::string, cl::Event>> launch_events_;
};

}  // namespace lenet5
