// The AVX-512 instance of simd_layers.h: AVX-512VL at 256-bit width, i.e. 8 floats
// per vector with AVX-512's 32 registers (register blocks twice as large as AVX2's),
// k-mask loads and stores for remainders.
//
// Why not 512-bit vectors: measured on the 2-core Xeon (Ice Lake class, VM) this
// project runs on, a 512-bit instance of this same code was 5-30% slower per training
// step (C3 and C5 most). Its peak FMA rate is 1.6x the 256-bit one, but these kernels
// are bound by loads, not FMAs: the conv taps are unaligned loads, and an unaligned
// 64-byte load always splits a cache line (a 32-byte one half the time); parameter
// rows sit at 16-byte offsets; and rows of 10, 14 or 28 floats fill fewer of 16 lanes.
// Compilers default to 256-bit vectors on these CPUs (-mprefer-vector-width=256) too.
//
// The large fully connected layers are the exception: Avx512Wide below.
//
// Compiled with -mavx512f -mavx512vl -mavx2 -mfma; simd_dispatch.cpp calls it only
// on a CPU with AVX-512 F and VL.
// GCC 12 warns that the 512-bit shuffles' _mm512_undefined operands are uninitialized
// (a false positive of its headers).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "simd_lane_layers.h"
#include "simd_lane_staging.h"

namespace lenet5 {
namespace {

struct Avx512 {
    using F = __m256;
    using Mask = __mmask8;  // the first n lanes of a remainder; also a comparison result
    static constexpr int N = 8;
    static constexpr int kRegs = 32;

    static F zero() { return _mm256_setzero_ps(); }
    static F set1(float x) { return _mm256_set1_ps(x); }
    static F load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
    static Mask first(int n) { return static_cast<Mask>((1u << n) - 1u); }  // 0 <= n <= 8
    static F load(const float* p, Mask m) { return _mm256_maskz_loadu_ps(m, p); }
    static void store(float* p, F v, Mask m) { _mm256_mask_storeu_ps(p, m, v); }

    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
    static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    static F min(F a, F b) { return _mm256_min_ps(a, b); }  // b when either is NaN
    static F max(F a, F b) { return _mm256_max_ps(a, b); }  // b when either is NaN
    static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }   // a*b + c
    static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a*b
    static F div(F a, F b) { return _mm256_div_ps(a, b); }
    static F round(F a) { return _mm256_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
    // 2^n for a whole n in [-126, 127]: n + 127 in the exponent bits.
    static F pow2(F n) {
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
    }

    using Cmp = __mmask8;  // a comparison's lanes
    static Cmp greater(F a, F b) { return _mm256_cmp_ps_mask(a, b, _CMP_GT_OQ); }  // false for NaN
    static F select(Cmp m, F a, F b) { return _mm256_mask_blend_ps(m, b, a); }   // a where m, else b
    static float sum(F v) {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
    }
    // Lane k = the sum of v[k]'s lanes: pairwise hadds, then the two 128-bit halves.
    static F sums(const F* v) {
        const F a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
        const F b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
        return add(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
    // Adjacent pairs of the 16 floats a|b: [a0+a1, a2+a3, ..., b6+b7].
    static F pair_sum(F a, F b) {
        const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
        const __m256i odd = _mm256_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15);
        return add(_mm256_permutex2var_ps(a, even, b), _mm256_permutex2var_ps(a, odd, b));
    }
    // Every lane twice: lo = [v0 v0 v1 v1 v2 v2 v3 v3], hi = [v4 v4 ... v7 v7].
    static void dup_pairs(F v, F& lo, F& hi) {
        lo = _mm256_permutexvar_ps(_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), v);
        hi = _mm256_permutexvar_ps(_mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7), v);
    }
    // The 16 floats a|b split into their even lanes [a0 a2 .. b6] and odd lanes [a1 a3 .. b7].
    static void even_odd(F a, F b, F& even, F& odd) {
        even = _mm256_permutex2var_ps(a, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14), b);
        odd = _mm256_permutex2var_ps(a, _mm256_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15), b);
    }
    // The inverse: lo = [e0 o0 e1 o1 e2 o2 e3 o3], hi = [e4 o4 ... e7 o7].
    static void interleave(F even, F odd, F& lo, F& hi) {
        lo = _mm256_permutex2var_ps(even, _mm256_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11), odd);
        hi = _mm256_permutex2var_ps(even, _mm256_setr_epi32(4, 12, 5, 13, 6, 14, 7, 15), odd);
    }
};

// The full 512-bit width, for the fully connected layers with large matrices only (the
// CNN's 6272x1024 F1): those kernels are FMA-bound register blocks over long rows of whole
// vectors, where twice the lanes per instruction pay (Zen 4 splits a 512-bit FMA in two,
// Zen 5 and Intel's server cores run it whole). The rest stays at 256 bits (see above).
struct Avx512Wide {
    using F = __m512;
    using Mask = __mmask16;
    static constexpr int N = 16;
    static constexpr int kRegs = 32;

    static F zero() { return _mm512_setzero_ps(); }
    static F set1(float x) { return _mm512_set1_ps(x); }
    static F load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
    static Mask first(int n) { return static_cast<Mask>((1u << n) - 1u); }  // 0 <= n <= 16
    static F load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
    static void store(float* p, F v, Mask m) { _mm512_mask_storeu_ps(p, m, v); }

    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static F min(F a, F b) { return _mm512_min_ps(a, b); }
    static F max(F a, F b) { return _mm512_max_ps(a, b); }
    static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
    static F div(F a, F b) { return _mm512_div_ps(a, b); }
    static F round(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
    static F pow2(F n) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
    }

    using Cmp = __mmask16;
    static Cmp greater(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
    static F select(Cmp m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }
    static float sum(F v) { return Avx512::sum(half_sum(v)); }
    // Lane k = the sum of v[k]'s lanes: each folded to 256 bits, then Avx512::sums by eights.
    static F sums(const F* v) {
        Avx512::F h[N];
        for (int k = 0; k < N; ++k) h[k] = half_sum(v[k]);
        return _mm512_shuffle_f32x4(_mm512_zextps256_ps512(Avx512::sums(h)), _mm512_zextps256_ps512(Avx512::sums(h + 8)),
                                    0x44);  // the low halves of both
    }
    static Avx512::F half_sum(F v) {
        return _mm512_castps512_ps256(_mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xEE)));  // low + high half
    }
};

// Matrix layers from this many weights on run at 512 bits.
constexpr size_t kWideWeights = size_t{1} << 20;

using Narrow = SimdLayers<Avx512>;
using Wide = SimdLayers<Avx512Wide>;

void forward_batch(const LayerSpec& l, const float* p, const float* in, float* out, int count) {
    if (l.weight_count >= kWideWeights) return Wide::forward_batch(l, p, in, out, count);
    Narrow::forward_batch(l, p, in, out, count);
}

void backward_batch(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout, float* din,
                    float* g, int count) {
    if (l.weight_count >= kWideWeights) return Wide::backward_batch(l, p, in, out, dout, din, g, count);
    Narrow::backward_batch(l, p, in, out, dout, din, g, count);
}

void backward_batch_set(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout, float* din,
                        float* g, int count) {
    if (l.weight_count >= kWideWeights) return Wide::backward_batch_set(l, p, in, out, dout, din, g, count);
    Narrow::backward_batch_set(l, p, in, out, dout, din, g, count);
}

void forward(const LayerSpec& l, const float* p, const float* in, float* out) {
    if (l.weight_count >= kWideWeights && Narrow::batched(l)) return Wide::forward_batch(l, p, in, out, 1);
    Narrow::forward(l, p, in, out);
}

void backward(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout, float* din, float* g) {
    if (l.weight_count >= kWideWeights && Narrow::batched(l)) return Wide::backward_batch(l, p, in, out, dout, din, g, 1);
    Narrow::backward(l, p, in, out, dout, din, g);
}

}  // namespace

const HostOps& simd_avx512_ops() {
    using L = Narrow;
    using G = SimdLanes<Avx512>;
    using W = LaneLayers<Avx512>;
    using S = LaneStaging<Avx512>;
    static const HostOps ops{forward,       backward,       L::update,          L::batched,
                             forward_batch, backward_batch, backward_batch_set, L::outer_grads,
                             L::sgd_outer,  Avx512::N,      G::supported,       W::forward,
                             W::backward,   S::to_lanes,    S::from_lanes,      S::images_to_lanes};
    return ops;
}

}  // namespace lenet5
