// An MPI call's status as our error, for the MPI code of train/ (mpi_collective, node_sum).
#pragma once
#include <mpi.h>

#include <string>

#include "common/error.h"

namespace lenet5 {

// Throws Error "WHAT failed" unless `status` is MPI_SUCCESS.
inline void mpi_check(int status, const char* what) {
    if (status != MPI_SUCCESS) throw Error(std::string(what) + " failed");
}

}  // namespace lenet5
