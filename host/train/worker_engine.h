// Data-parallel training over several engines (`train --workers SPEC`) and over the ranks of
// `mpirun -np N lenet5 train`.
//
// Each worker is any engine (an OpenCL device with a gpu variant, or a host variant) with its
// own copy of the data sets and the parameters. A training step's batch is split into one
// contiguous slice per rank (equal), and each rank's slice into one per worker, in proportion to
// its share; each worker computes its slice's gradients on its own device, and the gradient
// exchange (grad_exchange.h) sums them, weighed by the slices, in a fixed order while the
// backward passes run, so that every worker applies the same update to its own copy and a seed
// gives the same result twice. Per step only the gradients travel (with --sync-every K, only the
// parameters every K steps). Workers run their slices at the same time, one host thread each.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "train/collective.h"
#include "train/grad_exchange.h"
#include "train/worker_threads.h"

namespace lenet5 {

// One item of --workers: `[DEVICE:]VARIANT[@SHARE]` or `DEVICE[@SHARE]` (a device alone runs
// gpu-local). share 0: measured.
struct WorkerSpec {
    std::string variant;
    int device = -1;
    double share = 0;
};

// Throws UsageError for a malformed list; either every item has a share or none has.
std::vector<WorkerSpec> parse_workers(const std::string& spec);

// The slices of `count` samples for `shares` (summing to 1): contiguous, in worker order,
// every sample in exactly one slice.
std::vector<int> split_counts(int count, const std::vector<double>& shares);

class WorkerEngine final : public Engine {
public:
    // shares: one per worker (any positive numbers), or empty to measure them when the training
    // set is uploaded (each worker's speed on one batch alone; a split that does not beat the
    // fastest worker alone leaves the others idle). ranks: the other processes of an mpirun, or
    // null.
    WorkerEngine(const Network& net, std::vector<std::unique_ptr<Engine>> workers, std::vector<double> shares,
                 int batch, ExchangeOptions options = {}, std::unique_ptr<Collective> ranks = nullptr);

    std::string variant() const override;
    std::string device() const override;  // every worker's device and share, and this rank's place
    std::string platform() const override;

    void upload(Split split, const Dataset& data) override;
    void set_params(const std::vector<float>& params) override;
    std::vector<float> params() override { return first_active().params(); }
    void set_momentum_buffer(const std::vector<float>& velocity) override;
    std::vector<float> momentum_buffer() override { return first_active().momentum_buffer(); }
    void set_adam_state(const AdamState& state) override;
    AdamState adam_state() override { return first_active().adam_state(); }
    void set_order(const std::vector<int32_t>& order) override;

    void forward(Split split, int first, int count) override;
    void backward() override;
    void update(float lr, float momentum, float weight_decay) override;
    void set_gradients(const std::vector<float>& gradients) override;
    void sync_params() override;

    Counters take_counters() override;
    PhaseTimes take_times() override;
    // Each worker's phases of the last take_times() (none for one worker per rank).
    std::vector<std::pair<std::string, PhaseTimes>> take_worker_times() override;
    void profile_kernels() override;
    std::vector<KernelTime> take_kernel_times() override;

    std::vector<float> layer_output(size_t layer) override;  // the whole batch's, over every rank
    std::vector<float> gradients() override;                 // the first active worker's

    const std::vector<double>& shares() const { return shares_; }

private:
    // Runs fn(worker index) for every worker with a slice, each on its own thread (on this one
    // when there is one), while this thread runs `meanwhile`.
    void each_busy(const std::function<void(size_t)>& fn, const std::function<void()>& meanwhile = nullptr);
    int busy() const;  // workers with a slice in this step
    void measure_shares();
    double time_alone(size_t worker, int count);
    void join_exchange();                 // the exchange over the workers with a share
    size_t port_of(size_t worker) const;  // its place among the exchange's ports
    Engine& first_active();  // the first worker with a share: whose parameters are current

    Network net_;
    std::vector<std::unique_ptr<Engine>> workers_;
    std::vector<double> shares_;
    int batch_;
    ExchangeOptions options_;
    std::unique_ptr<Collective> ranks_;
    std::vector<size_t> active_;              // the workers with a share: the exchange's ports, in order
    std::unique_ptr<GradExchange> exchange_;
    bool measured_ = false, given_ = false;  // given: --workers named the shares
    int train_count_ = 0;
    std::vector<int> slice_;  // the last forward's samples per worker
    int count_ = 0;           // the last forward's samples over every rank
    int since_sync_ = 0;      // --sync-every: steps since the parameters were last averaged
    double reduce_ms_ = 0;    // exchanging since the last take_times
    std::vector<std::pair<std::string, PhaseTimes>> worker_times_;  // from the last take_times
    std::unique_ptr<WorkerThreads> threads_;  // started when several workers first have a slice
};

}  // namespace lenet5
