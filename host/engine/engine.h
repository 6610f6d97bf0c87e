// The interface every variant implements. The training loop (trainer.cpp) is
// written once against it. An engine owns the parameters, gradients, momentum
// and both data sets; the host only sends the shuffled order once per epoch and
// asks for (first, count) batches, so an OpenCL engine keeps everything resident.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "engine/exchange_port.h"
#include "io/mnist.h"
#include "model/network.h"
#include "update_rule.h"

namespace lenet5 {

// Milliseconds spent per phase since the last take_times().
struct PhaseTimes {
    double forward_ms = 0, backward_ms = 0, update_ms = 0, transfer_ms = 0;
    double reduce_ms = 0;  // several workers or ranks: the gradient exchange (grad_exchange.h)
};

// One kernel's share of the device time since the last take_kernel_times().
struct KernelTime {
    std::string name;
    int64_t launches = 0;
    double ms = 0;
    // The OpenCL function the launches ran and its program's knobs (kernel_site.h); empty for a
    // library's commands (CLBlast) and where several engines' times are summed.
    std::string function, knobs;
};

// Adds launches and ms to the entry named `name` in `times`, appending it if there is none.
inline void add_kernel_time(std::vector<KernelTime>& times, const std::string& name, int64_t launches, double ms) {
    auto it = times.begin();
    while (it != times.end() && it->name != name) ++it;
    if (it == times.end()) it = times.insert(times.end(), KernelTime{name, 0, 0.0, {}, {}});
    it->launches += launches;
    it->ms += ms;
}

// Summed since the last take_counters(): over the samples of every forward().
struct Counters {
    double loss_sum = 0;  // sum of per-sample cross-entropy
    int64_t correct = 0;
    int64_t samples = 0;
};

// What a training step does beyond the rates update() takes, fixed for an engine's life (the OpenCL
// variants compile it into their kernels). The defaults are plain momentum and one-hot targets.
struct TrainingRule {
    // Nesterov momentum: with v = momentum*v + g + weight_decay*p as before, p -= lr*(g +
    // weight_decay*p + momentum*v) instead of p -= lr*v.
    bool nesterov = false;
    // Label smoothing e (softmax cross-entropy only): the gradient is taken against the target
    // (1 - e) on the label plus e/classes on every class. The loss the counters sum stays the
    // cross-entropy against the label itself, so runs with and without it compare.
    float label_smoothing = 0.0f;
    // The run's seed: the layers that draw random numbers (layers/layer_type.h's Draw) draw from it.
    uint64_t seed = 1;
    // Adam or AdamW (update_rule.h) in place of SGD: update()'s momentum is then unused, its
    // weight decay L2 (Adam) or decoupled (AdamW).
    Optimizer optimizer = Optimizer::Sgd;
    float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
    bool adam() const { return optimizer != Optimizer::Sgd; }
    bool is_default() const { return !nesterov && label_smoothing == 0.0f && !adam(); }
};

// Adam's state beside the first moment (the momentum buffer): the second moment and the updates
// so far (bias correction's t).
struct AdamState {
    std::vector<float> second;
    int64_t steps = 0;
};

// Throws Error unless `state` fits an engine of `net` with `rule`: net.param_count floats and a
// step count of at least 0 under Adam, nothing under SGD.
inline void check_adam_state(const Network& net, const TrainingRule& rule, const AdamState& state) {
    if (!rule.adam()) {
        if (!state.second.empty() || state.steps != 0) throw Error("an Adam state given to an engine that runs SGD");
        return;
    }
    check_param_count(net, state.second, "second moment buffer");
    if (state.steps < 0) throw Error("an Adam state of " + std::to_string(state.steps) + " steps");
}

class Engine {
public:
    virtual ~Engine() = default;

    virtual std::string variant() const = 0;
    // e.g. "host (2 threads)", or the OpenCL device name and the work-group size per sample
    virtual std::string device() const = 0;
    virtual std::string platform() const = 0;  // e.g. "host" or the OpenCL platform name

    // Called once per split before it is used; images stay where the engine runs.
    virtual void upload(Split split, const Dataset& data) = 0;

    // Parameters (Network::param_count floats, the flat layout of network.h).
    // set_params also zeroes the momentum.
    virtual void set_params(const std::vector<float>& params) = 0;
    virtual std::vector<float> params() = 0;
    virtual void set_momentum_buffer(const std::vector<float>& velocity) = 0;
    virtual std::vector<float> momentum_buffer() = 0;
    // Under Adam (TrainingRule::optimizer), set_params zeroes this too; under SGD it is empty.
    virtual void set_adam_state(const AdamState& state) = 0;
    virtual AdamState adam_state() = 0;

    // The training order of this epoch (a permutation of the training set).
    virtual void set_order(const std::vector<int32_t>& order) = 0;

    // Forward over `count` samples: for Train, the samples order[first .. first+count);
    // for Test, the samples first .. first+count. Adds to the counters.
    virtual void forward(Split split, int first, int count) = 0;
    // Gradients of the mean loss of the last Train forward (overwrites, not accumulates).
    virtual void backward() = 0;
    // Overwrites the gradients (flat layout) before update(): with several workers, their sum.
    virtual void set_gradients(const std::vector<float>& gradients) = 0;
    // SGD with momentum and L2 weight decay over the whole flat buffer:
    // v = momentum*v + g + weight_decay*p; p -= lr*v (or Nesterov's step, or Adam: TrainingRule).
    virtual void update(float lr, float momentum, float weight_decay) = 0;

    virtual Counters take_counters() = 0;  // waits for the queued work
    virtual PhaseTimes take_times() = 0;

    // Per-kernel profiling (OpenCL): after profile_kernels(), every launch carries an event and
    // take_kernel_times() returns each kernel's launches and device time, in first-launch order.
    // It costs host time per launch, so it is off unless asked for. Host engines have no kernels.
    virtual void profile_kernels() {}
    virtual std::vector<KernelTime> take_kernel_times() { return {}; }

    // Several workers (worker_engine.h): each one's name and phase times of the last take_times().
    virtual std::vector<std::pair<std::string, PhaseTimes>> take_worker_times() { return {}; }

    // Training together (worker_engine.h): the view the gradient exchange reduces in place, or
    // null for an engine that cannot take part (a WorkerEngine itself).
    virtual ExchangePort* exchange_port() { return nullptr; }
    // Local SGD (--sync-every K): brings the workers' parameters together now, as every K steps.
    // Under mpirun a collective: every rank calls it at the same point. A no-op elsewhere.
    virtual void sync_params() {}

    // Inference (`lenet5 infer`): the forward pass alone over `count` network inputs given as floats,
    // net.input.size() each, already scaled and placed as image_to_input places an image
    // (preprocess.h), writing the last layer's outputs (logits for a softmax network) to `outputs`,
    // count x net.layers.back().out.size() floats. Reads the current parameters; leaves the counters,
    // gradients and momentum alone. With `layer_ms` (net.layers.size() entries), adds each layer's
    // milliseconds to its entry: device time on OpenCL, a steady clock on the host.
    // The host engines and the batch-level OpenCL engine run it (make_engine with
    // EngineRequest::inference builds that one); the others throw Error.
    virtual void infer(const float* inputs, int count, float* outputs, std::vector<double>* layer_ms);

    // For tests: the last forward's output of layer `layer` ([count][out.size()],
    // pre-softmax logits for the last layer), and the last backward's gradients.
    virtual std::vector<float> layer_output(size_t layer) = 0;
    virtual std::vector<float> gradients() = 0;
};

// What an engine made for inference (EngineRequest::inference) throws for a training call (`call`,
// e.g. "backward()").
inline Error inference_only_error(const std::string& variant, const char* call) {
    return Error(variant + ": this engine was made for inference (infer, set_params, params); it runs no " + call);
}

inline void Engine::infer(const float*, int, float*, std::vector<double>*) {
    throw Error(variant() + ": this engine runs no inference");
}

}  // namespace lenet5
