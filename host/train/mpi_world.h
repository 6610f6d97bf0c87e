// Several processes through MPI (`mpirun -np N lenet5 train ...`): one rank per device, the
// gradients summed over all ranks every step (worker_engine.h, grad_exchange.h). A build without MPI, or a process
// not started by mpirun, is a world of one rank and never calls MPI.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/collective.h"

namespace lenet5 {

struct MpiWorld {
    int rank = 0, size = 1;
    int local_rank = 0;  // among the ranks on this machine: which of its devices this rank takes
    int local_size = 1;  // the ranks on this machine
    bool root() const { return rank == 0; }
};

// This process's place; a world of one until an MpiSession has started MPI.
const MpiWorld& mpi_world();

// Starts MPI when the process was started by mpirun (and the build has MPI), ends it when
// destroyed. One per process, in main. A rank that may run on more cores than its share of the
// machine (the cores over the ranks on it: mpirun --bind-to none) runs that share of OpenMP
// threads, unless OMP_NUM_THREADS is set; rank 0 warns when it has fewer (binding_warning).
class MpiSession {
public:
    MpiSession(int* argc, char*** argv);
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;
};

// A warning when the launcher bound this rank to fewer cores than its share of the machine's
// (`cores` of `online`, with `local_size` ranks on it; Open MPI binds up to 2 ranks to a core each
// by default): the exchange's passes over a bucket, OpenMP and the OpenCL driver then run on those
// alone. Empty when the binding leaves each rank its share. (A rank bound to more than its share,
// or not at all, runs that many OpenMP threads: see MpiSession.)
std::string binding_warning(int cores, int online, int local_size);

// After a failure on this rank: ends every rank (a rank alone must not leave the others
// waiting in a collective), with `status`. Returns only when there is no MPI world.
void mpi_abort(int status);

// The largest of `value` over the ranks (`value` itself without MPI): a collective, so every
// rank must call it at the same point.
int mpi_max(int value);

// With more than one rank: the ranks as a WorkerEngine exchanges with them (mpi_collective.h),
// summing up to sum_capacity floats in flight at once (a network's parameters); otherwise null.
std::unique_ptr<Collective> world_ranks(size_t sum_capacity);

// One fact every rank must share to train together (a hash, a count), with what it is about.
struct RankFact {
    std::string what;  // e.g. "the model (network hash)"
    uint64_t value = 0;
    bool hex = false;  // printed in hexadecimal (a hash)
};

// One small collective: throws AgreedError on every rank, naming the first fact on which a rank
// differs from rank 0 and both values, unless every rank has the same facts. Without ranks it
// does nothing.
void check_ranks_agree(const std::vector<RankFact>& facts);

}  // namespace lenet5
