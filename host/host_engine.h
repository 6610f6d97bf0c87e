// The engine of the host variants (cpu, avx, omp): the batch loop over a table
// of per-sample layer operations, optionally spread over threads.
#pragma once
#include <chrono>

#include "engine.h"
#include "host_ops.h"

namespace lenet5 {

class HostEngine : public Engine {
public:
    // threads > 1 splits each batch into contiguous slices, one per thread, each
    // with its own gradient buffer; the buffers are summed in thread order, so a
    // run is deterministic for a given thread count. A thread runs its slice one
    // sample at a time through the network, except the tail of layers the ops
    // batch (HostOps::batched), which it runs over the whole slice at once.
    HostEngine(Network net, std::string variant, const HostOps& ops, int threads);

    std::string variant() const override { return variant_; }
    std::string device() const override;
    std::string platform() const override { return "host"; }

    void upload(Split split, const Dataset& data) override;
    void set_params(const std::vector<float>& params) override;
    std::vector<float> params() override { return params_; }
    void set_momentum_buffer(const std::vector<float>& velocity) override;
    std::vector<float> momentum_buffer() override { return velocity_; }
    void set_order(const std::vector<int32_t>& order) override { order_ = order; }

    void forward(Split split, int first, int count) override;
    void backward() override;
    void update(float lr, float momentum, float weight_decay) override;

    Counters take_counters() override;
    PhaseTimes take_times() override;

    std::vector<float> layer_output(size_t layer) override;
    std::vector<float> gradients() override { return grads_; }

private:
    using Clock = std::chrono::steady_clock;
    static double ms_since(Clock::time_point t0);
    void reserve(int count);

    Network net_;
    std::string variant_;
    const HostOps& ops_;
    int threads_;

    std::vector<float> params_, velocity_, grads_;
    std::vector<std::vector<float>> thread_grads_;  // threads 1.. (thread 0 adds into grads_)
    std::vector<std::vector<float>> scratch_;       // per thread: two layer-sized buffers
    size_t tail_ = 0;                               // layers tail_.. run batched over a slice
    std::vector<std::vector<float>> tail_grads_;    // per thread: two [slice][size] buffers for the tail
    // acts_[0] is the input, acts_[k+1] layer k's output; [capacity][size] each.
    std::vector<std::vector<float>> acts_;
    std::vector<float> dlogits_, losses_;
    std::vector<uint8_t> hits_;
    int capacity_ = 0, count_ = 0;
    bool last_was_train_ = false;

    Dataset train_, test_;
    std::vector<int32_t> order_;
    Counters counters_;
    PhaseTimes times_;
};

}  // namespace lenet5
