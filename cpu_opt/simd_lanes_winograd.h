// The lane layers' 5x5 convolutions where several connections feed each output map (LeNet-5's
// C3) by Winograd's F(4,5) along the rows: four outputs of a row from eight inputs take 8
// products a kernel row in place of 20, in each of the three passes.
//
// In one dimension, for a tile of 8 input columns d and a kernel row g of 5 taps,
//     y = A^T [(G g) * (B^T d)]        (4 outputs; * elementwise over 8 points)
// is exactly the correlation y[m] = sum_k g[k] d[m + k] in real arithmetic; in floats the
// rounding differs from the direct sum's by about its own size (the tests hold it to the `cpu`
// reference). The points are 0, +-1, +-2, +-1/2 and infinity; B^T is the common F(6,3)'s (same
// points), G carries the fractions. Along the columns nothing changes: for each tile t and point
// p the 2-D convolution becomes a 1-D one down the rows, with the transformed taps U[j][ky][p] as
// its kernel, which SimdLanes::row_taps computes in register blocks as it computes a row.
// The backward passes are the same identity's gradient, so they are exact too:
//     dU = sum over tiles and rows of (B^T d) * (A dy), dW = G^T dU     (the weight gradient)
//     dd = B [U * (A dy)], added over the tiles' overlapping columns     (the input gradient)
//
// C3's products a sample: 150,000 -> 72,000 in each pass (its 10 outputs a row take 3 tiles, 12
// columns). The transforms are paid per input map (B^T) and per output map (A^T), so these
// passes pay only where each output map sums several connections: on C1 (one each) the forward
// took 37 -> 40 us a group of 8, its backward 29 -> 35 (bench/RESULTS.md). C1's forward and
// weight gradient pay in an order of their own (simd_lanes_winograd_alone.h).
//
// Include only through simd_lane_layers.h.
#pragma once
#include <utility>

#include "simd_lanes.h"

namespace lenet5 {
namespace {

thread_local Scratch<float> tls_wino_kernel, tls_wino_in, tls_wino_dy, tls_wino_sums, tls_wino_rows, tls_wino_taps;

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

    // The point +1 (kGT's second column): its column of A^T is all ones, so a value added there
    // reaches each of the tile's outputs (LaneWinogradAlone adds the bias through it).
    static constexpr int kPlusOne = 1;

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

    // d = B v (B^T's transpose: the input gradient of a tile).
    static void input_transform_t(const F* v, F* d) {
        const F s12 = V::add(v[1], v[2]), d12 = V::sub(v[1], v[2]), s34 = V::add(v[3], v[4]), d34 = V::sub(v[3], v[4]);
        const F s56 = V::add(v[5], v[6]), d56 = V::sub(v[5], v[6]);
        d[0] = v[0];
        d[1] = V::sub(V::fma(c(2.0f), d56, V::fma(c(0.5f), d34, d12)), v[7]);
        d[2] = V::fma(c(4.0f), s56, V::fma(c(0.25f), s34, V::fnma(c(5.25f), v[0], s12)));
        d[3] = V::fma(c(5.25f), v[7], V::fnma(c(2.5f), V::add(d34, d56), V::mul(c(-4.25f), d12)));
        d[4] = V::fnma(c(5.0f), s56, V::fnma(c(1.25f), s34, V::fnma(c(4.25f), s12, V::mul(c(5.25f), v[0]))));
        d[5] = V::fnma(c(5.25f), v[7], V::fma(c(0.5f), d56, V::fma(c(2.0f), d34, d12)));
        d[6] = V::sub(V::add(V::add(s12, s34), s56), v[0]);
        d[7] = v[7];
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

    // (A y)[p], A = A^T's transpose, from y(x) for x < 4: a tile's output gradient at point p.
    template <int p, class Y>
    static F gradient_point(Y y) {
        if constexpr (p == 0) return y(0);
        if constexpr (p == 7) return y(3);
        if constexpr (p == 1 || p == 2) {
            const F e = V::add(y(0), y(2)), o = V::add(y(1), y(3));
            return p == 1 ? V::add(e, o) : V::sub(e, o);
        }
        if constexpr (p == 3 || p == 4) {
            const F e = V::fma(c(4.0f), y(2), y(0)), o = V::fma(c(8.0f), y(3), V::mul(c(2.0f), y(1)));
            return p == 3 ? V::add(e, o) : V::sub(e, o);
        }
        const F e = V::fma(c(0.25f), y(2), y(0)), o = V::fma(c(0.125f), y(3), V::mul(c(0.5f), y(1)));
        return p == 5 ? V::add(e, o) : V::sub(e, o);
    }

    // m = A y (the tile's output gradient at the 8 points; the compiler shares the points' common sums).
    static void output_transform_t(const F* y, F* m) { output_transform_t(y, m, std::make_integer_sequence<int, P>{}); }
    template <int... Ps>
    static void output_transform_t(const F* y, F* m, std::integer_sequence<int, Ps...>) {
        ((m[Ps] = gradient_point<Ps>([&](int x) { return y[x]; })), ...);
    }

    // ---- the transformed tensors ------------------------------------------------------
    //
    // A transformed map is [p][t][y]: for each point and tile, a column of vectors down the rows,
    // which row_taps and weight_grad_block walk.

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

    // The input gradient's transformed taps as broadcast vectors, [p][j][K], each kernel row
    // reversed: row_taps' weights in memory.
    static const float* reversed_tap_vectors(const LayerSpec& l, const float* u) {
        const int J = l.connections();
        float* wb = tls_wino_taps.get(static_cast<size_t>(P * J * K) * N);
        for (int p = 0; p < P; ++p)
            for (int j = 0; j < J; ++j)
                LENET5_UNROLL for (int kx = 0; kx < K; ++kx)
                    V::store(wb + static_cast<ptrdiff_t>((p * J + j) * K + kx) * N, V::set1(u[(j * K + K - 1 - kx) * P + p]));
        return wb;
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
    // the tiles' 8 columns overlapping by 4: rows [i][y][4T + 4] in scratch, then the IW columns.
    // With `below`, its activation and bias gradients are folded into din (its output is `in`).
    static void input_grads(const LayerSpec& l, const typename L::Feeds& f, const float* u, const float* g,
                            float* din, const LayerSpec* below, const float* in, float* grads) {
        const int T = tiles(l), GH = gradient_rows(l), IH = l.in.h, IW = l.in.w, W = T * M + M, J = l.connections();
        float* rows = tls_wino_rows.get(static_cast<size_t>(l.in.c * IH * W) * N);
        float* sums = tls_wino_sums.get(static_cast<size_t>(l.in.c * P * IH) * N);
        const float* wb = reversed_tap_vectors(l, u);
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
                                Lanes::template row_taps<K, R, false, From, To>(
                                    acc, wb + static_cast<ptrdiff_t>((p * J + j) * K) * N, col, 0, GH);
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
            for (int i = 0; i < l.in.c; ++i) {
                F sum = V::zero();
                for (int y = 0; y < IH; ++y)
                    for (int x = 0; x < IW; ++x) {
                        const ptrdiff_t at = static_cast<ptrdiff_t>((i * IH + y) * IW + x) * N;
                        F v = V::load(rows + static_cast<ptrdiff_t>((i * IH + y) * W + x) * N);
                        if (below) {
                            v = L::activation_grad(decltype(act)::value, v, V::load(in + at));
                            sum = V::add(sum, v);
                        }
                        V::store(din + at, v);
                    }
                if (below && below->bias_count == static_cast<size_t>(l.in.c)) grads[below->bias_offset + i] += V::sum(sum);
            }
        });
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

    // grads += G^T dU, dU [j][p][ky] (N lane sums each). Per kernel row: its 8 points' vectors
    // summed over lanes (one vector over p), then dW[k] = sum over p of G[p][k] dU[p] as the
    // lane sums of kGT[k] * dU.
    static void add_kernel_grads(const LayerSpec& l, const float* du, float* grads) {
        float* gw = grads + l.weight_offset;
        for (int j = 0; j < l.connections(); ++j)
            for (int ky = 0; ky < K; ++ky) {
                F part[N];
                LENET5_UNROLL for (int p = 0; p < P; ++p) part[p] = V::load(du + static_cast<ptrdiff_t>((j * P + p) * K + ky) * N);
                const F dU = V::sums(part);
                LENET5_UNROLL for (int k = 0; k < N; ++k) part[k] = k < K ? V::mul(V::load(kGT[k]), dU) : V::zero();
                float* dst = gw + (j * K + ky) * K;
                L::store_n(dst, V::add(L::load_n(dst, K), V::sums(part)), K);
            }
    }
};

}  // namespace
}  // namespace lenet5
