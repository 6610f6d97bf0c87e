// Data-parallel training over several engines in one process (`train --workers SPEC`).
//
// Each worker is any engine (an OpenCL device with a gpu variant, or a host variant) with its
// own copy of the data sets and the parameters. A training step's batch is split into one
// contiguous slice per worker, in proportion to its share; each worker computes its slice's
// gradients on its own device, the host sums them in worker order (so a seed gives the same
// result twice), every worker receives the sum and applies the same update to its own copy.
// Per step only the gradients travel. Workers run their slices at the same time, one host
// thread each.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

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
    // fastest worker alone leaves the others idle).
    WorkerEngine(std::vector<std::unique_ptr<Engine>> workers, std::vector<double> shares, int batch);

    std::string variant() const override;
    std::string device() const override;  // every worker's device and share
    std::string platform() const override;

    void upload(Split split, const Dataset& data) override;
    void set_params(const std::vector<float>& params) override;
    std::vector<float> params() override { return first_active().params(); }
    void set_momentum_buffer(const std::vector<float>& velocity) override;
    std::vector<float> momentum_buffer() override { return first_active().momentum_buffer(); }
    void set_order(const std::vector<int32_t>& order) override;

    void forward(Split split, int first, int count) override;
    void backward() override;
    void update(float lr, float momentum, float weight_decay) override;
    void set_gradients(const std::vector<float>& gradients) override;

    Counters take_counters() override;
    PhaseTimes take_times() override;
    // Each worker's phases of the last take_times().
    std::vector<std::pair<std::string, PhaseTimes>> take_worker_times() override;

    std::vector<float> layer_output(size_t layer) override;
    std::vector<float> gradients() override;

    const std::vector<double>& shares() const { return shares_; }

private:
    // Runs fn(worker index) for every worker with a slice, each on its own thread.
    template <class F>
    void each_busy(F fn);
    bool one_busy() const;  // this step's batch went to one worker alone
    void measure_shares();
    double time_alone(size_t worker, int count);
    Engine& first_active();  // the first worker with a share: whose parameters are current

    std::vector<std::unique_ptr<Engine>> workers_;
    std::vector<double> shares_;
    int batch_;
    bool measured_ = false, given_ = false;  // given: --workers named the shares
    int train_count_ = 0;
    std::vector<int> slice_;  // the last forward's samples per worker
    std::vector<float> sum_;  // the summed gradients of the last backward; empty when one worker took the batch
    double reduce_ms_ = 0;    // summing gradients since the last take_times
    std::vector<std::pair<std::string, PhaseTimes>> worker_times_;  // from the last take_times
};

}  // namespace lenet5
