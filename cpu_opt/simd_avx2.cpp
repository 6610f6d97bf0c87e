// The AVX2+FMA instance of simd_layers.h: 8 floats per vector, 16 registers,
// maskload and piecewise stores for remainders. Compiled with -mavx2 -mfma; simd_dispatch.cpp
// calls it only on a CPU with AVX2 and FMA.
#include <immintrin.h>

#include <cstdint>

#include "simd_lane_layers.h"
#include "simd_lane_staging.h"

namespace lenet5 {
namespace {

struct Avx2 {
    using F = __m256;
    // The first n lanes of a remainder: the lane mask of maskload, and n for stores.
    struct Mask {
        __m256i lanes;
        int n;
    };
    static constexpr int N = 8;
    static constexpr int kRegs = 16;

    static F zero() { return _mm256_setzero_ps(); }
    static F set1(float x) { return _mm256_set1_ps(x); }
    static F load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
    static Mask first(int n) {  // 0 <= n <= 8
        alignas(32) static const int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
        return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes + 8 - n)), n};
    }
    static F load(const float* p, Mask m) { return _mm256_maskload_ps(p, m.lanes); }
    // In pieces of 4, 2 and 1 lanes: Zen 3 takes about 4x as long for one maskstore (the
    // subsampling layers' row ends and C3's input-gradient rows store hundreds per sample).
    static void store(float* p, F v, Mask m) {
        if (m.n >= 8) return store(p, v);
        __m128 part = _mm256_castps256_ps128(v);
        if (m.n & 4) {
            _mm_storeu_ps(p, part);
            part = _mm256_extractf128_ps(v, 1);
            p += 4;
        }
        if (m.n & 2) {
            _mm_storel_pi(reinterpret_cast<__m64*>(p), part);
            part = _mm_movehl_ps(part, part);
            p += 2;
        }
        if (m.n & 1) _mm_store_ss(p, part);
    }

    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
    static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    static F min(F a, F b) { return _mm256_min_ps(a, b); }  // b when either is NaN
    static F max(F a, F b) { return _mm256_max_ps(a, b); }  // b when either is NaN
    static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }   // a*b + c
    static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a*b
    static F div(F a, F b) { return _mm256_div_ps(a, b); }
    static F round(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
    // 2^n for a whole n in [-126, 127]: n + 127 in the exponent bits.
    static F pow2(F n) {
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
    }

    using Cmp = __m256;  // a comparison's lanes: all ones where true
    static Cmp greater(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }  // false for NaN
    static F select(Cmp m, F a, F b) { return _mm256_blendv_ps(b, a, m); }   // a where m, else b
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
    // Adjacent pairs of the 16 floats a|b: [a0+a1, a2+a3, ..., b6+b7]. hadd works
    // within 128-bit halves, so the 64-bit pairs are put back in order after it.
    static F pair_sum(F a, F b) {
        const F h = _mm256_hadd_ps(a, b);  // [a01 a23 b01 b23 | a45 a67 b45 b67]
        return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(h), 0xD8));
    }
    // Every lane twice: lo = [v0 v0 v1 v1 v2 v2 v3 v3], hi = [v4 v4 ... v7 v7].
    static void dup_pairs(F v, F& lo, F& hi) {
        const F a = _mm256_unpacklo_ps(v, v);  // [v0 v0 v1 v1 | v4 v4 v5 v5]
        const F b = _mm256_unpackhi_ps(v, v);  // [v2 v2 v3 v3 | v6 v6 v7 v7]
        lo = _mm256_permute2f128_ps(a, b, 0x20);
        hi = _mm256_permute2f128_ps(a, b, 0x31);
    }
    // The 16 floats a|b split into their even lanes [a0 a2 .. b6] and odd lanes [a1 a3 .. b7];
    // shuffle_ps works within 128-bit halves, so the 64-bit pairs are put back in order after it.
    static void even_odd(F a, F b, F& even, F& odd) {
        even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
        odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
    }
    // The inverse: lo = [e0 o0 e1 o1 e2 o2 e3 o3], hi = [e4 o4 ... e7 o7].
    static void interleave(F even, F odd, F& lo, F& hi) {
        const F a = _mm256_unpacklo_ps(even, odd);  // [e0 o0 e1 o1 | e4 o4 e5 o5]
        const F b = _mm256_unpackhi_ps(even, odd);  // [e2 o2 e3 o3 | e6 o6 e7 o7]
        lo = _mm256_permute2f128_ps(a, b, 0x20);
        hi = _mm256_permute2f128_ps(a, b, 0x31);
    }
};

}  // namespace

const HostOps& simd_avx2_ops() {
    using L = SimdLayers<Avx2>;
    using G = SimdLanes<Avx2>;
    using W = LaneLayers<Avx2>;
    using S = LaneStaging<Avx2>;
    static const HostOps ops{L::forward,        L::backward,    L::update,     L::batched,
                             L::forward_batch,  L::backward_batch, L::backward_batch_set, L::outer_grads,
                             L::sgd_outer,      Avx2::N,        G::supported,  W::forward,
                             W::backward,       S::to_lanes,    S::from_lanes, S::images_to_lanes};
    return ops;
}

}  // namespace lenet5
