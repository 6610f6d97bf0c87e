// The ranks of `mpirun -np N lenet5 train` (collective.h) over an MPI communicator: sums with
// MPI_Iallreduce (MPI_SUM) in place, bfloat16 gradients with MPI_Iallgather, both into the
// caller's persistent buffers; MPI's own reductions fix the order of a sum for a given number of
// ranks, so a seed gives the same run twice. A failed call throws Error.
#pragma once
#include <mpi.h>

#include <vector>

#include "train/collective.h"

namespace lenet5 {

class MpiCollective final : public Collective {
public:
    explicit MpiCollective(MPI_Comm comm);

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    int start_sum(float* data, size_t n) override;
    int start_gather(const uint16_t* mine, uint16_t* all, size_t n) override;
    void wait(int request) override;
    void progress() override;
    Counters sum(const Counters& mine) override;
    std::vector<float> gather(const std::vector<float>& mine) override;

private:
    int started(MPI_Request r);  // keeps r, returns its request number

    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
    std::vector<MPI_Request> requests_;  // by request number; MPI_REQUEST_NULL once done
    size_t waited_ = 0;                  // how many of them were waited for
};

}  // namespace lenet5
