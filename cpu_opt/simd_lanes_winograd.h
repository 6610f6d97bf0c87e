// The lane layers' forward 5x5 convolution where several connections feed each output map
// (LeNet-5's C3) by Winograd's F(4,5) along the rows: four outputs of a row from eight inputs take
// 8 products a kernel row in place of 20.
//
// In one dimension, for a tile of 8 input columns d and a kernel row g of 5 taps,
//     y = A^T [(G g) * (B^T d)]        (4 outputs; * elementwise over 8 points)
// is exactly the correlation y[m] = sum_k g[k] d[m + k] in real arithmetic; in floats the
// rounding differs from the direct sum's by about its own size (the tests hold it to the `cpu`
// reference). The points are 0, +-1, +-2, +-1/2 and infinity; B^T is the common F(6,3)'s (same
// points), G carries the fractions. Along the columns nothing changes: for each tile t and point
// p the 2-D convolution becomes a 1-D one down the rows, with the transformed taps U[j][ky][p] as
// its kernel, which SimdLanes::row_taps computes in register blocks as it computes a row.
//
// C3's products a sample: 150,000 -> 72,000 (its 10 outputs a row take 3 tiles, 12 columns). The
// transforms are paid per input map (B^T) and per output map (A^T), so it pays only where each
// output map sums several connections: on C1 (one each) the forward took 37 -> 40 us a group of 8.
// The backward passes (the identity's gradient, dU = (B^T d) * (A dy) and dd = B [U * (A dy)])
// ran slower than SimdLanes' direct ones here: their transformed tensors are twice the size of
// the maps and left L1 (bench/RESULTS.md); they stay direct.
//
// Include only from simd_avx2.cpp and simd_avx512.cpp, after simd_lanes.h.
#pragma once
#include "simd_lanes.h"

namespace lenet5 {
namespace {

thread_local Scratch<float> tls_wino_kernel, tls_wino_in, tls_wino_sums;

template <class V>
struct LaneWinograd {
    using Lanes = SimdLanes<V>;
    using L = SimdLayers<V>;
    using F = typename V::F;
    static constexpr int N = V::N;
    static constexpr int K = 5, M = 4, P = 8;  // kernel width, outputs a tile, points a tile

    // Rows of at least two tiles (narrower, the padding to a whole tile costs more than it saves)
    // and at least two connections an output map on average (see above).
    static bool pays(const LayerSpec& l) {
        return l.kind == LayerKind::Conv && l.kernel == K && l.out.w >= 2 * M && l.connections() >= 2 * l.out.c;
    }
    static int tiles(const LayerSpec& l) { return (l.out.w + M - 1) / M; }

    // G (8 points x 5 taps), stored by tap: kGT[k][p] = G[p][k].
    static constexpr float kGT[K][P] = {
        {1.0f, -2.0f / 9, -2.0f / 9, 1.0f / 90, 1.0f / 90, 32.0f / 45, 32.0f / 45, 0.0f},
        {0.0f, -2.0f / 9, 2.0f / 9, 1.0f / 45, -1.0f / 45, 16.0f / 45, -16.0f / 45, 0.0f},
        {0.0f, -2.0f / 9, -2.0f / 9, 2.0f / 45, 2.0f / 45, 8.0f / 45, 8.0f / 45, 0.0f},
        {0.0f, -2.0f / 9, 2.0f / 9, 4.0f / 45, -4.0f / 45, 4.0f / 45, -4.0f / 45, 0.0f},
        {0.0f, -2.0f / 9, -2.0f / 9, 8.0f / 45, 8.0f / 45, 2.0f / 45, 2.0f / 45, 1.0f},
    };

    static F c(float x) { return V::set1(x); }

    // v = B^T d.
    static void input_transform(const F* d, F* v) {
        v[0] = V::fma(c(5.25f), V::sub(d[4], d[2]), V::sub(d[0], d[6]));
        v[7] = V::fma(c(5.25f), V::sub(d[3], d[5]), V::sub(d[7], d[1]));
        F a = V::fnma(c(4.25f), d[4], V::add(d[2], d[6])), b = V::fnma(c(4.25f), d[3], V::add(d[1], d[5]));
        v[1] = V::add(a, b);
        v[2] = V::sub(a, b);
        a = V::fnma(c(1.25f), d[4], V::fma(c(0.25f), d[2], d[6]));
        b = V::fma(c(2.0f), d[5], V::fnma(c(2.5f), d[3], V::mul(c(0.5f), d[1])));
        v[3] = V::add(a, b);
        v[4] = V::sub(a, b);
        a = V::fma(c(4.0f), V::fnma(c(1.25f), d[4], d[2]), d[6]);
        b = V::fma(c(0.5f), d[5], V::fnma(c(2.5f), d[3], V::mul(c(2.0f), d[1])));
        v[5] = V::add(a, b);
        v[6] = V::sub(a, b);
    }

    // y = A^T m (the 4 outputs of a tile).
    static void output_transform(const F* m, F* y) {
        const F s12 = V::add(m[1], m[2]), d12 = V::sub(m[1], m[2]), s34 = V::add(m[3], m[4]), d34 = V::sub(m[3], m[4]);
        const F s56 = V::add(m[5], m[6]), d56 = V::sub(m[5], m[6]);
        y[0] = V::add(V::add(V::add(m[0], s12), s34), s56);
        y[1] = V::fma(c(0.5f), d56, V::fma(c(2.0f), d34, d12));
        y[2] = V::fma(c(0.25f), s56, V::fma(c(4.0f), s34, s12));
        y[3] = V::add(V::fma(c(0.125f), d56, V::fma(c(8.0f), d34, d12)), m[7]);
    }

    // ---- the transformed tensors ------------------------------------------------------
    //
    // A transformed map is [p][t][y]: for each point and tile, a column of vectors down the rows,
    // which is what row_taps walks.

    // U[r][p] = (G g_r)[p] for each kernel row r = j*K + ky, one vector a row (read back as scalars:
    // one broadcast serves the group).
    static const float* kernel_rows(const LayerSpec& l, const float* params) {
        const int rows = l.connections() * K;
        float* u = tls_wino_kernel.get(static_cast<size_t>(rows) * P);
        const float* w = params + l.weight_offset;
        static_assert(N == P, "a kernel row's 8 points are one vector");
        for (int r = 0; r < rows; ++r) {
            F acc = V::zero();
            LENET5_UNROLL for (int k = 0; k < K; ++k) acc = V::fma(V::load(kGT[k]), V::set1(w[r * K + k]), acc);
            V::store(u + r * P, acc);
        }
        return u;
    }

    // B^T over each tile of each (padded) input row: [c][p][t][y], columns past the input zero.
    static const float* input_tiles(const LayerSpec& l, const float* src, const Shape& is) {
        const int T = tiles(l);
        float* v = tls_wino_in.get(static_cast<size_t>(is.c * P * T * is.h) * N);
        for (int ch = 0; ch < is.c; ++ch)
            for (int y = 0; y < is.h; ++y) {
                const float* row = src + static_cast<ptrdiff_t>((ch * is.h + y) * is.w) * N;
                for (int t = 0; t < T; ++t) {
                    F d[P], b[P];
                    LENET5_UNROLL for (int q = 0; q < P; ++q)
                        d[q] = t * M + q < is.w ? V::load(row + static_cast<ptrdiff_t>(t * M + q) * N) : V::zero();
                    input_transform(d, b);
                    LENET5_UNROLL for (int p = 0; p < P; ++p)
                        V::store(v + static_cast<ptrdiff_t>(((ch * P + p) * T + t) * is.h + y) * N, b[p]);
                }
            }
        return v;
    }

    // ---- the passes --------------------------------------------------------------------
    //
    // Tile and point outermost: a (t, p) slice of the transformed maps is a few KB, so the rows a
    // map's connections read again stay in L1 (map-major, C3 read its 64 KB of input tiles 16 times).

    // sums[o][p][y] (for one tile t) = sum over the connections j of o and the kernel rows of
    // U[j][ky][p] * (B^T d)[in_j][p][t][y + ky].
    static void tile_sums(const LayerSpec& l, const float* u, const float* v, int IH, int t, float* sums) {
        const int T = tiles(l), OH = l.out.h;
        for (int p = 0; p < P; ++p)
            for (int o = 0; o < l.out.c; ++o)
                Lanes::template over_cols<Lanes::template kCols<K>>(OH, [&](int y0, auto rows) {
                    constexpr int R = decltype(rows)::value;
                    F acc[R];
                    LENET5_UNROLL for (int r = 0; r < R; ++r) acc[r] = V::zero();
                    for (int j = l.conn_begin[o]; j < l.conn_begin[o + 1]; ++j) {
                        F w[K];
                        LENET5_UNROLL for (int ky = 0; ky < K; ++ky) w[ky] = V::set1(u[(j * K + ky) * P + p]);
                        // From row y0 on, passed as the start: GCC otherwise keeps each row's offset in a register.
                        const float* col = v + static_cast<ptrdiff_t>(((l.conn_in[j] * P + p) * T + t) * IH + y0) * N;
                        Lanes::template row_taps<K, R, false>(acc, w, col, 0, IH);
                    }
                    float* dst = sums + static_cast<ptrdiff_t>((o * P + p) * OH + y0) * N;
                    LENET5_UNROLL for (int r = 0; r < R; ++r) V::store(dst + r * N, acc[r]);
                });
    }

    static void forward(const LayerSpec& l, const float* params, const float* in, float* out) {
        const Shape is = Lanes::padded_shape(l);
        const int T = tiles(l), OH = l.out.h, OW = l.out.w;
        const float* u = kernel_rows(l, params);
        const float* v = input_tiles(l, Lanes::padded(l, in), is);
        float* sums = tls_wino_sums.get(static_cast<size_t>(l.out.c * P * OH) * N);
        for (int t = 0; t < T; ++t) {
            tile_sums(l, u, v, is.h, t, sums);
            for (int o = 0; o < l.out.c; ++o) {
                const F bias = V::set1(params[l.bias_offset + o]);
                for (int y = 0; y < OH; ++y) {
                    F m[P], ys[M];
                    LENET5_UNROLL for (int p = 0; p < P; ++p) m[p] = V::load(sums + static_cast<ptrdiff_t>((o * P + p) * OH + y) * N);
                    output_transform(m, ys);
                    float* dst = out + static_cast<ptrdiff_t>((o * OH + y) * OW + t * M) * N;
                    LENET5_UNROLL for (int x = 0; x < M; ++x)
                        if (t * M + x < OW) V::store(dst + x * N, V::add(ys[x], bias));
                }
            }
        }
        L::activate(l, out, l.out.size() * N);
    }

};

// The HostOps entry of the lane layers' forward pass: Winograd where it pays, else SimdLanes' direct one.
template <class V>
struct LaneLayers {
    static void forward(const LayerSpec& l, const float* params, const float* in, float* out) {
        if (LaneWinograd<V>::pays(l)) return LaneWinograd<V>::forward(l, params, in, out);
        SimdLanes<V>::forward(l, params, in, out);
    }
};

}  // namespace
}  // namespace lenet5
