// Several processes through MPI (`mpirun -np N lenet5 train ...`): one rank per device, the
// gradients summed over all ranks every step (mpi_engine.h). A build without MPI, or a process
// not started by mpirun, is a world of one rank and never calls MPI.
#pragma once
#include <memory>

#include "engine/engine.h"

namespace lenet5 {

struct MpiWorld {
    int rank = 0, size = 1;
    int local_rank = 0;  // among the ranks on this machine: which of its devices this rank takes
    bool root() const { return rank == 0; }
};

// This process's place; a world of one until an MpiSession has started MPI.
const MpiWorld& mpi_world();

// Starts MPI when the process was started by mpirun (and the build has MPI), ends it when
// destroyed. One per process, in main.
class MpiSession {
public:
    MpiSession(int* argc, char*** argv);
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;
};

// After a failure on this rank: ends every rank (a rank alone must not leave the others
// waiting in a collective), with `status`. Returns only when there is no MPI world.
void mpi_abort(int status);

// The largest of `value` over the ranks (`value` itself without MPI): a collective, so every
// rank must call it at the same point.
int mpi_max(int value);

// With more than one rank: `local` wrapped so that each step's batch is split across the ranks
// and the gradients summed over them (mpi_engine.h); otherwise `local` itself.
std::unique_ptr<Engine> distribute(std::unique_ptr<Engine> local);

}  // namespace lenet5
