// The lane layers' 5x5 convolutions where several connections feed each output map (LeNet-5's
// C3) by Winograd's minimal filtering along the rows (a tile of simd_winograd_tiles.h: F(4,5)
// or F(5,5)), in each of the three passes. Along the columns nothing changes: for each tile t
// and point p the 2-D convolution becomes a 1-D one down the rows, with the transformed taps
// U[j][ky][p] = (G g_{j,ky})[p] as its kernel, which SimdLanes::row_taps computes in register
// blocks as it computes a row. The backward passes are the same identity's gradient, so they
// are exact too:
//     dU = sum over tiles and rows of (B^T d) * (A dy), dW = G^T dU     (the weight gradient)
//     dd = B [U * (A dy)], added over the tiles' overlapping columns     (the input gradient)
//
// C3's products a sample: 150,000 -> 72,000 in each pass by F(4,5) (its 10 outputs a row take
// 3 tiles, 12 columns), 54,000 by F(5,5) (2 tiles). The transforms are paid per input map (B^T)
// and per output map (A^T), so these passes pay only where each output map sums several
// connections: on C1 (one each) the forward took 37 -> 40 us a group of 8, its backward 29 ->
// 35 (bench/results/JOURNAL.md, "C3 by Winograd's F(4,5)"). C1's forward and weight gradient
// pay in an order of their own (simd_lanes_winograd_alone.h).
//
// Include only through simd_lane_layers.h.
#pragma once
#include <cmath>
#include <utility>

#include "simd_lanes.h"
#include "simd_winograd_tiles.h"

namespace lenet5 {
namespace {

thread_local Scratch<float> tls_wino_kernel, tls_wino_in, tls_wino_dy, tls_wino_sums, tls_wino_rows;

// Tile: WinogradF45<V> or WinogradF55<V>.
template <class V, class Tile>
struct LaneWinograd : Tile {
    using Lanes = SimdLanes<V>;
    using L = SimdLayers<V>;
    using F = typename V::F;
    static constexpr int N = V::N;
    using Tile::K, Tile::M, Tile::P, Tile::kGT;
    using Tile::input_transform, Tile::input_transform_t, Tile::output_transform, Tile::output_transform_t;

    // Rows of at least two tiles (narrower, the padding to a whole tile costs more than it saves)
    // and at least two connections an output map on average (see above).
    static bool pays(const LayerSpec& l) {
        return l.kind == LayerKind::Conv && l.kernel == K && l.out.w >= 2 * M && l.connections() >= 2 * l.out.c;
    }
    static int tiles(const LayerSpec& l) { return (l.out.w + M - 1) / M; }
    static int row_points(const LayerSpec& l) { return tiles(l) * P; }  // products a kernel row, a row

    // ---- the transformed tensors ------------------------------------------------------
    //
    // A transformed map is [p][t][y]: for each point and tile, a column of vectors down the rows,
    // which row_taps and weight_grad_block walk.

    // U[r][p] = (G g_r)[p] for each kernel row r = j*K + ky, P floats a row (read back as
    // scalars: one broadcast serves the group): the first N points a vector, any more one by one.
    static const float* kernel_rows(const LayerSpec& l, const float* params) {
        const int rows = l.connections() * K;
        float* u = tls_wino_kernel.get(static_cast<size_t>(rows) * P);
        const float* w = params + l.weight_offset;
        static_assert(P >= N, "a kernel row's first N points are one vector");
        for (int r = 0; r < rows; ++r) {
            F acc = V::zero();
            LENET5_UNROLL for (int k = 0; k < K; ++k) acc = V::fma(V::load(kGT[k]), V::set1(w[r * K + k]), acc);
            V::store(u + r * P, acc);
            LENET5_UNROLL for (int p = N; p < P; ++p) {
                float sum = 0.0f;
                LENET5_UNROLL for (int k = 0; k < K; ++k) sum = std::fma(kGT[k][p], w[r * K + k], sum);
                u[r * P + p] = sum;
            }
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

    // A over each tile of each output-gradient row: [o][p][t][K-1 + OH + K-1], the rows between
    // K-1 zero rows at each end (the input gradient's taps read them instead of checking rows,
    // or leave them out at compile time), columns past the output zero. An input-gradient column
    // in one block (input_grads' over_cols<kTallCols>) leaves out every zero row, so then they
    // stay unwritten (C3: 3,072 vectors).
    static int gradient_rows(const LayerSpec& l) { return l.out.h + 2 * (K - 1); }
    static const float* gradient_tiles(const LayerSpec& l, const float* dout) {
        const int T = tiles(l), OH = l.out.h, OW = l.out.w, GH = gradient_rows(l);
        float* g = tls_wino_dy.get(static_cast<size_t>(l.out.c * P * T * GH) * N);
        if (l.in.h > Lanes::kTallCols)
            for (int col = 0; col < l.out.c * P * T; ++col) {
                float* c0 = g + static_cast<ptrdiff_t>(col * GH) * N;
                L::zero(c0, (K - 1) * N);
                L::zero(c0 + (K - 1 + OH) * N, (K - 1) * N);
            }
        for (int o = 0; o < l.out.c; ++o)
            for (int y = 0; y < OH; ++y) {
                const float* row = dout + static_cast<ptrdiff_t>((o * OH + y) * OW) * N;
                for (int t = 0; t < T; ++t) {
                    F dy[M], m[P];
                    LENET5_UNROLL for (int x = 0; x < M; ++x)
                        dy[x] = t * M + x < OW ? V::load(row + static_cast<ptrdiff_t>(t * M + x) * N) : V::zero();
                    output_transform_t(dy, m);
                    LENET5_UNROLL for (int p = 0; p < P; ++p)
                        V::store(g + static_cast<ptrdiff_t>(((o * P + p) * T + t) * GH + K - 1 + y) * N, m[p]);
                }
            }
        return g;
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

    // Returns whether it folded `below` (SimdLanes::winograd_folds): a window layer under an
    // unpadded one.
    static bool backward(const LayerSpec& l, const float* params, const float* in, const float* out, float* dout,
                         float* din, float* grads, const LayerSpec* below, bool folded) {
        const Shape is = Lanes::padded_shape(l);
        if (!folded) Lanes::bias_grads(l, out, dout, grads);
        const float* g = gradient_tiles(l, dout);
        const typename L::Feeds f = L::feeds(l);
        weight_grads(l, f, input_tiles(l, Lanes::padded(l, in), is), g, is, grads);
        if (!din) return false;
        if (l.pad != 0) {
            Lanes::template din_cols<K>(l, params, f, dout, din);
            return false;
        }
        const bool fold = below && Lanes::winograd_folds(*below);
        input_grads(l, f, kernel_rows(l, params), g, din, fold ? below : nullptr, in, grads);
        return fold;
    }

    // dd = B [sum over the connections from i and the kernel rows of U * (A dy)], tile by tile,
    // the tiles' P columns overlapping by K-1: rows [i][y][T*M + K-1] in scratch, then the IW columns.
    // With `below`, its activation and bias gradients are folded into din (its output is `in`).
    static void input_grads(const LayerSpec& l, const typename L::Feeds& f, const float* u, const float* g,
                            float* din, const LayerSpec* below, const float* in, float* grads) {
        const int T = tiles(l), GH = gradient_rows(l), IH = l.in.h, W = T * M + K - 1;
        float* rows = tls_wino_rows.get(static_cast<size_t>(l.in.c * IH * W) * N);
        float* sums = tls_wino_sums.get(static_cast<size_t>(l.in.c * P * IH) * N);
        L::zero(rows, l.in.c * IH * W * N);
        for (int t = 0; t < T; ++t) {
            for (int p = 0; p < P; ++p)
                for (int i = 0; i < l.in.c; ++i)
                    Lanes::template over_cols<Lanes::kTallCols>(IH, [&](int y0, auto cols) {
                        constexpr int R = decltype(cols)::value;
                        auto block = [&](auto first, auto last) {
                            F acc[R];
                            LENET5_UNROLL for (int r = 0; r < R; ++r) acc[r] = V::zero();
                            for (int k = f.begin[i]; k < f.begin[i + 1]; ++k) {
                                const int j = f.conn[k];  // acc[y] += U[ky] * g[y - ky], g's rows from K-1 on
                                const float* col = g + static_cast<ptrdiff_t>(((l.conn_out[j] * P + p) * T + t) * GH + y0) * N;
                                // The column's K-1 zero rows at each end left out where they fall in
                                // the block (with them, C3's input gradient took 70 products a column for 50).
                                constexpr int From = decltype(first)::value ? K - 1 : 0;
                                constexpr int To = decltype(last)::value ? R : R + K - 1;
                                F w[K];  // the kernel row reversed
                                LENET5_UNROLL for (int kx = 0; kx < K; ++kx) w[kx] = V::set1(u[(j * K + K - 1 - kx) * P + p]);
                                Lanes::template row_taps<K, R, false, From, To>(acc, w, col, 0, GH);
                            }
                            float* dst = sums + static_cast<ptrdiff_t>((i * P + p) * IH + y0) * N;
                            LENET5_UNROLL for (int r = 0; r < R; ++r) V::store(dst + r * N, acc[r]);
                        };
                        using Yes = std::true_type;
                        using No = std::false_type;
                        const bool first = y0 == 0, last = y0 + R == IH;
                        if (first && last) block(Yes{}, Yes{});
                        else if (first) block(Yes{}, No{});
                        else if (last) block(No{}, Yes{});
                        else block(No{}, No{});
                    });
            for (int i = 0; i < l.in.c; ++i)
                for (int y = 0; y < IH; ++y) {
                    F m[P], d[P];
                    LENET5_UNROLL for (int p = 0; p < P; ++p) m[p] = V::load(sums + static_cast<ptrdiff_t>((i * P + p) * IH + y) * N);
                    input_transform_t(m, d);
                    float* dst = rows + static_cast<ptrdiff_t>((i * IH + y) * W + t * M) * N;
                    LENET5_UNROLL for (int q = 0; q < P; ++q) V::store(dst + q * N, V::add(V::load(dst + q * N), d[q]));
                }
        }
        Lanes::with_activation(below ? below->activation : Activation::None, [&](auto act) {
            rows_to_din<decltype(act)::value>(l, rows, W, below, in, din, grads);
        });
    }

    // din from the rows input_grads summed (W columns apart); with `below`, its activation and
    // bias gradients folded in. A function of its own, with its arguments by value: as a lambda
    // that GCC did not inline, the loop read each captured pointer again after every store.
    template <Activation A>
    static void rows_to_din(const LayerSpec& l, const float* rows, int W, const LayerSpec* below, const float* in,
                            float* din, float* grads) {
        const int IH = l.in.h, IW = l.in.w;
        for (int i = 0; i < l.in.c; ++i) {
            F sum = V::zero();
            for (int y = 0; y < IH; ++y)
                for (int x = 0; x < IW; ++x) {
                    const ptrdiff_t at = static_cast<ptrdiff_t>((i * IH + y) * IW + x) * N;
                    F v = V::load(rows + static_cast<ptrdiff_t>((i * IH + y) * W + x) * N);
                    if (below) {
                        v = L::activation_grad(A, v, V::load(in + at));
                        sum = V::add(sum, v);
                    }
                    V::store(din + at, v);
                }
            if (below && below->bias_count == static_cast<size_t>(l.in.c)) grads[below->bias_offset + i] += V::sum(sum);
        }
    }

    // dU[j][p][ky] = sum over tiles and rows of (A dy)[o_j] * (B^T d)[i_j] (lanes summed), then
    // grads += G^T dU. Point by point; the connections from one input map in pairs that share its loads.
    static void weight_grads(const LayerSpec& l, const typename L::Feeds& f, const float* v, const float* g,
                             const Shape& is, float* grads) {
        const int T = tiles(l), OH = l.out.h, GH = gradient_rows(l), taps = l.connections() * P * K;
        float* du = tls_lanes_taps.get(static_cast<size_t>(taps) * N);
        for (int p = 0; p < P; ++p)
            for (int i = 0; i < l.in.c; ++i) {
                const float* s = v + static_cast<ptrdiff_t>((i * P + p) * T * is.h) * N;
                L::template in_groups<2>(f.begin[i + 1] - f.begin[i], [&](int first, auto maps) {
                    constexpr int Maps = decltype(maps)::value;
                    const float* d[Maps];
                    float* gv[Maps];
                    for (int m = 0; m < Maps; ++m) {
                        const int j = f.conn[f.begin[i] + first + m];
                        d[m] = g + static_cast<ptrdiff_t>((l.conn_out[j] * P + p) * T * GH + K - 1) * N;
                        gv[m] = du + static_cast<ptrdiff_t>((j * P + p) * K) * N;
                    }
                    // The tiles as rows of OH vectors (GH apart in d, is.h in s); the taps are the kernel rows.
                    Lanes::template weight_grad_block<K, Maps, 1>(d, s, T, OH, GH, is.h, 0, gv);
                });
            }
        add_kernel_grads(l, du, grads);
    }

    // grads += G^T dU, dU [j][p][ky] (N lane sums each). Per kernel row: the first N points'
    // vectors summed over lanes (one vector over p), then dW[k] = sum over p of G[p][k] dU[p] as
    // the lane sums of kGT[k] * dU, and any more points one by one.
    static void add_kernel_grads(const LayerSpec& l, const float* du, float* grads) {
        float* gw = grads + l.weight_offset;
        for (int j = 0; j < l.connections(); ++j)
            for (int ky = 0; ky < K; ++ky) {
                F part[N];
                LENET5_UNROLL for (int p = 0; p < N; ++p) part[p] = V::load(du + static_cast<ptrdiff_t>((j * P + p) * K + ky) * N);
                const F dU = V::sums(part);
                LENET5_UNROLL for (int k = 0; k < N; ++k) part[k] = k < K ? V::mul(V::load(kGT[k]), dU) : V::zero();
                F dW = V::sums(part);
                LENET5_UNROLL for (int p = N; p < P; ++p) {
                    alignas(32) float column[N] = {};  // G[p][k] in lane k
                    LENET5_UNROLL for (int k = 0; k < K; ++k) column[k] = kGT[k][p];
                    const F sum = V::set1(V::sum(V::load(du + static_cast<ptrdiff_t>((j * P + p) * K + ky) * N)));
                    dW = V::fma(V::load(column), sum, dW);
                }
                float* dst = gw + (j * K + ky) * K;
                L::store_n(dst, V::add(L::load_n(dst, K), dW), K);
            }
    }
};

}  // namespace
}  // namespace lenet5
