// The SIMD layer operations of the `avx` and `omp` variants (LENET5_HAVE_SIMD).
#pragma once
#include <string>

#include "host_ops.h"

namespace lenet5 {

// The best SIMD implementation this CPU supports (AVX-512, else AVX2+FMA),
// chosen at run time from CPUID; nullptr when the CPU has neither.
const HostOps* simd_ops();

// "avx512", "avx2" or "" (none), for reports.
std::string simd_level();

}  // namespace lenet5
