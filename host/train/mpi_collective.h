// The ranks of `mpirun -np N lenet5 train` (collective.h) over an MPI communicator: sums through a
// window of memory the ranks share when they all run on one machine (node_sum.h; rank order, on
// every core), else with MPI_Iallreduce (MPI_SUM) in place; bfloat16 gradients with
// MPI_Iallgather, into the caller's persistent buffers. Either fixes the order of a sum for a given
// number of ranks, so a seed gives the same run twice. A failed call throws Error.
// LENET5_MPI_SHARED=0 takes MPI_Iallreduce on one machine too (to compare).
#pragma once
#include <mpi.h>

#include <memory>
#include <vector>

#include "train/collective.h"
#include "train/node_sum.h"

namespace lenet5 {

class MpiCollective final : public Collective {
public:
    // sum_capacity: the most floats that the sums in flight at once add up to.
    MpiCollective(MPI_Comm comm, size_t sum_capacity);

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    int start_sum(float* data, size_t n, float weight) override;
    int start_gather(const uint16_t* mine, uint16_t* all, size_t n) override;
    void wait(int request) override;
    void progress() override;
    Counters sum(const Counters& mine) override;
    std::vector<float> gather(const std::vector<float>& mine) override;

private:
    struct SharedSum {  // a sum through node_sum_
        bool node = false;
        float* data = nullptr;
        size_t n = 0, at = 0;
    };
    int started(MPI_Request r, SharedSum shared);  // keeps both, returns the request number
    int started(MPI_Request r) { return started(r, SharedSum()); }

    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
    std::unique_ptr<NodeSum> node_sum_;  // when every rank is on this machine
    std::vector<MPI_Request> requests_;  // by request number; MPI_REQUEST_NULL once done, or for a shared sum
    std::vector<SharedSum> shared_;      // by request number
    size_t waited_ = 0;                  // how many of them were waited for
};

}  // namespace lenet5
