// OpenBLAS under an address-space limit (see openblas_guard.cpp).
#pragma once

namespace lenet5 {

// Where `ulimit -v` (or a data-size limit) is set and OPENBLAS_NUM_THREADS is not, runs this program
// again in place of itself with one OpenBLAS thread, and does not return; otherwise returns at once.
void one_openblas_thread_under_a_memory_limit(char** argv);

}  // namespace lenet5
