// The SIMD layer operations of the `avx` and `omp` variants (LENET5_HAVE_SIMD).
// One algorithm (simd_layers.h) is compiled twice, once per instruction set
// (simd_avx2.cpp, simd_avx512.cpp, each with its own -m flags); simd_dispatch.cpp,
// compiled for plain x86-64, picks one at run time, so the binary runs anywhere.
#pragma once
#include <string>

#include "host_ops.h"

namespace lenet5 {

enum class SimdLevel { None, Avx2, Avx512 };  // Avx2: AVX2 + FMA; Avx512: F + VL (256-bit, see simd_avx512.cpp)

// The best SIMD implementation this CPU supports (AVX-512, else AVX2+FMA),
// chosen at run time from CPUID; nullptr when the CPU has neither.
// The environment variable LENET5_SIMD=avx2 caps the choice at AVX2 (to run
// the AVX2 code on an AVX-512 machine); Error for a value other than avx2/avx512.
const HostOps* simd_ops();

// The implementation of exactly `level`, or nullptr when this CPU lacks it
// (tests use it to cover every level the machine can run).
const HostOps* simd_ops(SimdLevel level);

// The level simd_ops() picks: "avx512", "avx2" or "" (none), for reports.
std::string simd_level();

// Defined by simd_avx2.cpp / simd_avx512.cpp; call only when the CPU has the ISA.
const HostOps& simd_avx2_ops();
const HostOps& simd_avx512_ops();

}  // namespace lenet5
