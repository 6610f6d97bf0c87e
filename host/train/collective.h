// The other ranks of a run, as a WorkerEngine and its gradient exchange see them
// (mpi_collective.h implements it over MPI). Every rank must start the same operations in the
// same order. An operation that starts returns a request number, to wait for exactly once; the
// numbers count from 0 again once every request started has been waited for.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/engine.h"

namespace lenet5 {

class Collective {
public:
    virtual ~Collective() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;

    // In place: `data` (n floats) becomes the sum over the ranks of each rank's weight x data (one
    // product per value, rounded as weight * data[k] is), the same on every rank and in the same
    // order from run to run for a fixed number of ranks.
    virtual int start_sum(float* data, size_t n, float weight) = 0;
    // `all` ([size()][n]) gets every rank's `mine` (n bfloat16 values), in rank order.
    virtual int start_gather(const uint16_t* mine, uint16_t* all, size_t n) = 0;
    virtual void wait(int request) = 0;
    // Lets the operations in flight move on, without waiting for them.
    virtual void progress() = 0;

    // Blocking: the counters summed in rank order; every rank's floats, concatenated in rank order.
    virtual Counters sum(const Counters& mine) = 0;
    virtual std::vector<float> gather(const std::vector<float>& mine) = 0;
};

}  // namespace lenet5
