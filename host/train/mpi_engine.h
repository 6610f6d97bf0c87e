// One rank's engine in a run of several processes (`mpirun -np N`). Every rank holds the whole
// data sets and its own copy of the parameters on its device; each step's batch is split into
// one contiguous slice per rank (rank order), each rank computes its slice's gradients, and
// every rank gathers all of them (MPI_Allgather) and sums them in rank order, so every rank
// applies the same update and a seed gives the same result twice. The counters (loss, hits)
// are summed over the ranks the same way.
#pragma once
#include <memory>
#include <mpi.h>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace lenet5 {

class MpiEngine final : public Engine {
public:
    MpiEngine(std::unique_ptr<Engine> local, MPI_Comm comm);

    std::string variant() const override { return local_->variant(); }
    std::string device() const override;  // this rank's device, and how many ranks there are
    std::string platform() const override { return local_->platform(); }

    void upload(Split split, const Dataset& data) override { local_->upload(split, data); }
    void set_params(const std::vector<float>& params) override { local_->set_params(params); }
    std::vector<float> params() override { return local_->params(); }
    void set_momentum_buffer(const std::vector<float>& velocity) override { local_->set_momentum_buffer(velocity); }
    std::vector<float> momentum_buffer() override { return local_->momentum_buffer(); }
    void set_order(const std::vector<int32_t>& order) override { local_->set_order(order); }

    void forward(Split split, int first, int count) override;
    void backward() override;
    void set_gradients(const std::vector<float>& gradients) override;
    void update(float lr, float momentum, float weight_decay) override { local_->update(lr, momentum, weight_decay); }

    Counters take_counters() override;
    PhaseTimes take_times() override;
    void profile_kernels() override { local_->profile_kernels(); }
    std::vector<KernelTime> take_kernel_times() override { return local_->take_kernel_times(); }

    std::vector<float> layer_output(size_t layer) override;  // the whole batch's, gathered
    std::vector<float> gradients() override { return sum_; }

private:
    std::unique_ptr<Engine> local_;
    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
    size_t params_ = 0;       // the network's parameter count
    std::vector<int> slice_;  // the last forward's samples per rank
    std::vector<float> sum_;  // the summed gradients of the last backward
    double reduce_ms_ = 0;
};

}  // namespace lenet5
