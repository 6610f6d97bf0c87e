// The AVX-512 instance of simd_layers.h: 16 floats per vector, 32 registers,
// k-masks for remainders. Compiled with -mavx512f -mavx512dq -mavx2 -mfma;
// simd_dispatch.cpp calls it only on a CPU with AVX-512 F and DQ.
// GCC 12 warns inside its own AVX-512 headers (_mm*_undefined_* self-initialise;
// GCC bug 105593, fixed in 13); the warning points into the header, so silence it there.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "simd_layers.h"

namespace lenet5 {
namespace {

struct Avx512 {
    using F = __m512;
    using Mask = __mmask16;  // the first n lanes of a remainder; also a comparison result
    static constexpr int N = 16;
    static constexpr int kRegs = 32;
    static constexpr int kBlock = 14;  // accumulators per register block

    static F zero() { return _mm512_setzero_ps(); }
    static F set1(float x) { return _mm512_set1_ps(x); }
    static F load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
    static Mask first(int n) { return static_cast<Mask>((1u << n) - 1u); }  // 0 <= n <= 16
    static F load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
    static void store(float* p, F v, Mask m) { _mm512_mask_storeu_ps(p, m, v); }

    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
    static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static F div(F a, F b) { return _mm512_div_ps(a, b); }
    static F min(F a, F b) { return _mm512_min_ps(a, b); }        // b when either is NaN
    static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }   // a*b + c
    static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a*b
    static F abs(F x) { return _mm512_abs_ps(x); }
    // |mag| with the sign of sgn (mag >= 0).
    static F copysign(F mag, F sgn) { return _mm512_or_ps(mag, _mm512_and_ps(sgn, set1(-0.0f))); }
    static Mask less(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
    static F select(Mask m, F yes, F no) { return _mm512_mask_blend_ps(m, no, yes); }
    static F round(F x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
    // 2^n for integral n in the normal exponent range.
    static F pow2(F n) {
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
    }
    static float sum(F v) { return _mm512_reduce_add_ps(v); }
    // Adjacent pairs of the 32 floats a|b: [a0+a1, a2+a3, ..., b14+b15].
    static F pair_sum(F a, F b) {
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        return add(_mm512_permutex2var_ps(a, even, b), _mm512_permutex2var_ps(a, odd, b));
    }
    // Every lane twice: lo = [v0 v0 v1 v1 ... v7 v7], hi = [v8 v8 ... v15 v15].
    static void dup_pairs(F v, F& lo, F& hi) {
        lo = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), v);
        hi = _mm512_permutexvar_ps(_mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15), v);
    }
};

}  // namespace

const HostOps& simd_avx512_ops() {
    static const HostOps ops{SimdLayers<Avx512>::forward, SimdLayers<Avx512>::backward, SimdLayers<Avx512>::update};
    return ops;
}

}  // namespace lenet5
