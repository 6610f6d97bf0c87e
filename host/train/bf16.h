// bfloat16: the upper half of an IEEE-754 float (8 exponent bits, 7 mantissa bits), as the
// gradient exchange sends gradients with --grad-precision bf16.
#pragma once
#include <cstdint>
#include <cstring>

namespace lenet5 {

// Round to nearest, ties to even; a NaN stays a (quiet) NaN, and what overflows becomes infinity.
inline uint16_t to_bf16(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);  // half an ulp of the kept bits, a bit more when they are odd
    return static_cast<uint16_t>(u >> 16);
}

inline float from_bf16(uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

}  // namespace lenet5
