// Run-time choice of the SIMD implementation. Compiled without -mavx* flags:
// nothing here may execute an instruction the CPU lacks.
#include <cstdlib>

#include "common/error.h"
#include "simd_ops.h"

namespace lenet5 {
namespace {

SimdLevel cpu_level() {
    // The AVX-512 code runs at 256-bit width: F (masks) with VL (on ymm registers).
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) return SimdLevel::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdLevel::Avx2;
    return SimdLevel::None;
}

// The CPU's level, capped by LENET5_SIMD.
SimdLevel chosen_level() {
    const SimdLevel cpu = cpu_level();
    const char* env = std::getenv("LENET5_SIMD");
    if (!env || !*env) return cpu;
    const std::string want = env;
    if (want == "avx512") return cpu;
    if (want == "avx2") return cpu == SimdLevel::None ? cpu : SimdLevel::Avx2;
    throw Error("LENET5_SIMD='" + want + "' is not a SIMD level (use avx512 or avx2)");
}

}  // namespace

const HostOps* simd_ops(SimdLevel level) {
    const SimdLevel cpu = cpu_level();
    switch (level) {
        case SimdLevel::Avx512: return cpu == SimdLevel::Avx512 ? &simd_avx512_ops() : nullptr;
        case SimdLevel::Avx2: return cpu != SimdLevel::None ? &simd_avx2_ops() : nullptr;
        case SimdLevel::None: break;
    }
    return nullptr;
}

const HostOps* simd_ops() { return simd_ops(chosen_level()); }

std::string simd_level() {
    switch (chosen_level()) {
        case SimdLevel::Avx512: return "avx512";
        case SimdLevel::Avx2: return "avx2";
        case SimdLevel::None: break;
    }
    return "";
}

}  // namespace lenet5
