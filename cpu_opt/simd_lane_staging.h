// Moving samples into and out of lane groups (HostOps::to_lanes, from_lanes, images_to_lanes):
// the engine's scalar moves (engine/lane_groups.h, engine/preprocess.h), bit for bit, by 8x8
// transposes of whole vectors. The scalar ones move a float at a time, a lane of each position's
// vector: with the images' table lookups they took about 5% of LeNet-5's `avx` step.
//
// Include only from simd_avx2.cpp and simd_avx512.cpp (both lane structs are 8 floats of AVX2).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "simd_layers.h"

namespace lenet5 {
namespace {

template <class V>
struct LaneStaging {
    using L = SimdLayers<V>;
    using F = typename V::F;
    static constexpr int N = V::N;
    static_assert(N == 8, "the transposes are of 8x8 floats, AVX vectors");

    // r[k] becomes column k of the 8x8 block whose rows were r[0..7].
    static void transpose(F* r) {
        const F t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
        const F t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
        const F t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
        const F t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
        const F s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        const F s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        const F s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
        const F s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
        r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
        r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
        r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
        r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
        r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
        r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
        r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
    }

    // r[0 .. m) to dst, N floats apart. Unrolled: a loop GCC turns into a memcpy call (rep movsq),
    // which took a fifth of the images' staging.
    static void store_first(float* dst, const F* r, int m) {
        LENET5_UNROLL for (int k = 0; k < N; ++k) if (k < m) V::store(dst + k * N, r[k]);
    }

    // Blocks of up to N positions: fn(i, m), m the block's positions.
    template <class Fn>
    static void over_blocks(size_t size, Fn&& fn) {
        for (size_t i = 0; i < size; i += N) fn(i, size - i < N ? static_cast<int>(size - i) : N);
    }

    // [n][size] -> [size][N], lanes n.. zero.
    static void to_lanes(const float* samples, int n, size_t size, float* group) {
        over_blocks(size, [&](size_t i, int m) {
            F r[N];
            for (int s = 0; s < N; ++s) r[s] = s < n ? L::load_n(samples + s * size + i, m) : V::zero();
            transpose(r);
            store_first(group + i * N, r, m);
        });
    }

    // [size][N] -> [n][size], lanes n.. dropped.
    static void from_lanes(const float* group, int n, size_t size, float* samples) {
        over_blocks(size, [&](size_t i, int m) {
            F r[N];
            for (int k = 0; k < N; ++k) r[k] = k < m ? V::load(group + (i + k) * N) : V::zero();
            transpose(r);
            for (int s = 0; s < n; ++s) L::store_n(samples + s * size + i, r[s], m);
        });
    }

    // The values of 8 bytes as InputScaling::value computes them: b / 255 * scale + shift, three
    // roundings (a division, not a multiplication by 1/255, which rounds differently; the product
    // kept, or GCC fuses it with the add into one fma, whose one rounding differs).
    static F values(__m128i bytes, F scale, F shift) {
        const F b = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
        return V::add(L::kept(V::mul(V::div(b, V::set1(255.0f)), scale)), shift);
    }

    // Bytes ix .. ix+m-1 (m <= 8) of an image row, in the low bytes: one 8-byte load within the
    // row (for a short last block, the 8 ending at its end, shifted).
    static __m128i row_bytes(const uint8_t* row, int ix, int m) {
        uint64_t bytes = 0;
        if (m == N) {
            std::memcpy(&bytes, row + ix, N);
        } else if (ix + m >= N) {
            std::memcpy(&bytes, row + ix + m - N, N);
            bytes >>= 8 * (N - m);
        } else {
            for (int k = m; k-- > 0;) bytes = bytes << 8 | row[ix + k];
        }
        return _mm_cvtsi64_si128(static_cast<long long>(bytes));
    }

    // engine/preprocess.h's images_to_lanes for a group of N lanes, each image row 8 bytes at a time
    // (values, then a transpose). Returns false, writing nothing, where values() does not give
    // `pixel` (every byte's value as the engine computed it) bit for bit: a build that fused
    // value()'s multiply and add into one rounding.
    static bool images_to_lanes(const uint8_t* const* images, int n, int rows, int cols, const Shape& input,
                                const InputScaling& scaling, const float* pixel, float* group) {
        const F scale = V::set1(scaling.scale), shift = V::set1(scaling.shift);
        for (int b = 0; b < 256; b += N) {
            const __m256i want = _mm256_castps_si256(V::load(pixel + b));
            const __m128i bytes = _mm_setr_epi8(static_cast<char>(b), static_cast<char>(b + 1), static_cast<char>(b + 2),
                                                static_cast<char>(b + 3), static_cast<char>(b + 4), static_cast<char>(b + 5),
                                                static_cast<char>(b + 6), static_cast<char>(b + 7), 0, 0, 0, 0, 0, 0, 0, 0);
            const __m256i got = _mm256_castps_si256(values(bytes, scale, shift));
            if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(want, got)) != -1) return false;
        }
        alignas(32) float background[N] = {};
        for (int s = 0; s < n; ++s) background[s] = pixel[0];
        const F bg = V::load(background);
        const int H = input.h, W = input.w, top = (H - rows) / 2, left = (W - cols) / 2;
        const int x_lo = left > 0 ? left : 0, x_hi = left + cols < W ? left + cols : W;  // the image's columns
        for (int y = 0; y < H; ++y) {
            float* row = group + static_cast<ptrdiff_t>(y * W) * N;
            const int iy = y - top;
            if (iy < 0 || iy >= rows || x_lo >= x_hi) {
                for (int x = 0; x < W; ++x) V::store(row + x * N, bg);
                continue;
            }
            for (int x = 0; x < x_lo; ++x) V::store(row + x * N, bg);
            for (int x = x_hi; x < W; ++x) V::store(row + x * N, bg);
            for (int x0 = x_lo; x0 < x_hi; x0 += N) {
                const int m = x_hi - x0 < N ? x_hi - x0 : N, ix = x0 - left;
                F r[N];
                LENET5_UNROLL for (int s = 0; s < N; ++s)
                    r[s] = s < n ? values(row_bytes(images[s] + iy * cols, ix, m), scale, shift) : V::zero();
                transpose(r);
                store_first(row + x0 * N, r, m);
            }
        }
        return true;
    }
};

}  // namespace
}  // namespace lenet5
