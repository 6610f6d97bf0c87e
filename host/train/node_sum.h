// A sum across the ranks of one machine through memory they share (an MPI-3 shared window), for
// MpiCollective when every rank runs on the same machine: each rank copies its values into its
// part of the window, sums one slice of everyone's (in rank order, on all its cores), then copies
// every slice of the result back out. Open MPI's MPI_Allreduce over shared memory moves a large
// bucket (a CNN's 25.7 MB) through its FIFOs on one thread per rank, several times slower than
// this; the rank order also makes N ranks sum as N workers of one process do, bit for bit.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <vector>

namespace lenet5 {

class NodeSum {
public:
    // Collective over `node`: a window of `capacity` floats per rank, the most that sums started
    // and not yet finished (since the last time none was in flight) may hold together.
    NodeSum(MPI_Comm node, size_t capacity);
    ~NodeSum();
    NodeSum(const NodeSum&) = delete;
    NodeSum& operator=(const NodeSum&) = delete;

    // Copies weight x data[0..n) in (the product in the copy: no pass of its own); returns where it
    // went, for finish(). Every rank starts the same sums in the same order.
    size_t start(const float* data, size_t n, float weight);
    // Waits for every rank's values of the sum started at `at`, sums this rank's slice and writes
    // the whole sum into data[0..n).
    void finish(size_t at, float* data, size_t n);

private:
    void sync();  // every rank's writes to the window seen by all
    size_t slice_begin(size_t n, int rank) const;

    MPI_Comm node_;
    MPI_Win window_;
    int rank_ = 0, size_ = 1;
    size_t capacity_;
    std::vector<float*> parts_;  // every rank's part of the window, in rank order
    size_t used_ = 0;            // floats of this round's sums
    size_t in_flight_ = 0;       // sums started and not finished
};

}  // namespace lenet5
