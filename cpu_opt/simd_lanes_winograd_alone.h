// The lane layers' 5x5 convolutions of one connection an output map (LeNet-5's C1) by
// LaneWinograd's F(4,5) along the rows, in an order of their own.
//
// Include only from simd_lane_layers.h.
#pragma once
#include <utility>

#include "simd_lanes_winograd.h"

namespace lenet5 {
namespace {

// A 5x5 convolution of one connection an output map (LeNet-5's C1) by the same F(4,5) along
// the rows: 40 products for a tile row's 4 outputs in place of 100 (C1: 117,600 -> 47,040 a
// sample, in the forward and in the weight gradient). With one connection a map, each output
// (or output-gradient) transform serves 40 products (in C3, 150), so what pays is the order:
// - forward: map by map, tile by tile, the map's 8 points summed down its rows into 7 KB that
//   stays in L1, transformed into the tile's 4 columns of the map (25 KB, also in L1 until the
//   map's last tile), then the map activated as a whole. Tile-major with each tile row activated
//   in registers, it took as long as the direct one (33 us a group of 8 on C1: the map's rows
//   left L1 between tiles, and the activation's constants left the registers);
// - weight gradient (where no input gradient is asked: the network's first layer): each point
//   of A dy made in registers as it is used, never stored.
// With LaneWinograd's passes as they are (the transformed tensors whole), C1's forward took
// 37 -> 40-45 us a group of 8 and its backward 29 -> 35-38 (bench/results/JOURNAL.md,
// "C3 by Winograd's F(4,5)").
template <class V>
struct LaneWinogradAlone {
    using W = LaneWinograd<V, WinogradF45<V>>;
    using Lanes = SimdLanes<V>;
    using L = SimdLayers<V>;
    using F = typename V::F;
    static constexpr int N = V::N, K = W::K, M = W::M, P = W::P;

    static bool pays(const LayerSpec& l) {
        if (l.kind != LayerKind::Conv || l.kernel != K || l.out.w < 2 * M) return false;
        for (int o = 0; o < l.out.c; ++o)
            if (l.conn_begin[o + 1] - l.conn_begin[o] != 1) return false;
        return true;
    }

    static void forward(const LayerSpec& l, const float* params, const float* in, float* out) {
        const Shape is = Lanes::padded_shape(l);
        const int T = W::tiles(l), OH = l.out.h, OW = l.out.w;
        const float* u = W::kernel_rows(l, params);
        const float* v = W::input_tiles(l, Lanes::padded(l, in), is);
        float* sums = tls_wino_sums.get(static_cast<size_t>(P * OH) * N);
        for (int o = 0; o < l.out.c; ++o) {
            const int j = l.conn_begin[o];
            const float* col0 = v + static_cast<ptrdiff_t>(l.conn_in[j] * P * T) * is.h * N;
            for (int t = 0; t < T; ++t) {
                for (int p = 0; p < P; ++p) {
                    // The bias through the point +1: A^T adds it to each of the tile's outputs.
                    const F start = V::set1(p == W::kPlusOne ? params[l.bias_offset + o] : 0.0f);
                    F w[K];
                    LENET5_UNROLL for (int ky = 0; ky < K; ++ky) w[ky] = V::set1(u[(j * K + ky) * P + p]);
                    Lanes::template over_cols<Lanes::template kCols<K>>(OH, [&](int y0, auto rows) {
                        constexpr int R = decltype(rows)::value;
                        F acc[R];
                        LENET5_UNROLL for (int r = 0; r < R; ++r) acc[r] = start;
                        const float* col = col0 + static_cast<ptrdiff_t>((p * T + t) * is.h + y0) * N;
                        Lanes::template row_taps<K, R, false>(acc, w, col, 0, is.h);
                        float* dst = sums + static_cast<ptrdiff_t>(p * OH + y0) * N;
                        LENET5_UNROLL for (int r = 0; r < R; ++r) V::store(dst + r * N, acc[r]);
                    });
                }
                for (int y = 0; y < OH; ++y) {
                    F m[P], ys[M];
                    LENET5_UNROLL for (int p = 0; p < P; ++p) m[p] = V::load(sums + static_cast<ptrdiff_t>(p * OH + y) * N);
                    W::output_transform(m, ys);
                    float* dst = out + static_cast<ptrdiff_t>((o * OH + y) * OW + t * M) * N;
                    LENET5_UNROLL for (int x = 0; x < M; ++x)
                        if (t * M + x < OW) V::store(dst + x * N, ys[x]);
                }
            }
            L::activate(l, out + static_cast<ptrdiff_t>(o * OH * OW) * N, OH * OW * N);  // the map in L1
        }
    }

    // The bias and weight gradients (no input gradient: the network's first layer); dout becomes
    // the gradient before the activation unless `folded` (it is, and the bias gradients are in
    // grads). dU[j][p][ky] = sum over tiles and rows of (A dy)[p] * (B^T in)[p][y + ky], each
    // point's row of A dy made in registers as it is used, for two maps at once (each B^T in
    // vector loaded once for both): the transformed gradient is never stored (stored, its 8
    // vectors a tile row took as long as the products it saves).
    static void weight_grads(const LayerSpec& l, const float* in, const float* out, float* dout, float* grads,
                             bool folded) {
        const Shape is = Lanes::padded_shape(l);
        if (!folded) Lanes::bias_grads(l, out, dout, grads);
        const int T = W::tiles(l), OH = l.out.h, OW = l.out.w, taps = l.connections() * P * K;
        const float* v = W::input_tiles(l, Lanes::padded(l, in), is);
        float* du = tls_lanes_taps.get(static_cast<size_t>(taps) * N);
        L::zero(du, taps * N);
        float* edge = tls_wino_dy.get(static_cast<size_t>(2 * OH * M) * N);  // a tile past the map's edge, zero-filled
        const typename L::Feeds f = L::feeds(l);
        for (int i = 0; i < l.in.c; ++i)
            L::template in_groups<2>(f.begin[i + 1] - f.begin[i], [&](int first, auto maps) {
                constexpr int Maps = decltype(maps)::value;
                for (int t = 0; t < T; ++t) {
                    const float* dy[Maps];
                    float* gv[Maps];
                    ptrdiff_t stride = static_cast<ptrdiff_t>(OW) * N;  // between a tile's rows
                    for (int m = 0; m < Maps; ++m) {
                        const int j = f.conn[f.begin[i] + first + m];
                        dy[m] = dout + static_cast<ptrdiff_t>(l.conn_out[j] * OH * OW + t * M) * N;
                        gv[m] = du + static_cast<ptrdiff_t>(j * P * K) * N;
                    }
                    if (t * M + M > OW) {
                        const int cols = OW - t * M;
                        L::zero(edge, Maps * OH * M * N);
                        for (int m = 0; m < Maps; ++m) {
                            for (int y = 0; y < OH; ++y)
                                for (int x = 0; x < cols; ++x)
                                    V::store(edge + static_cast<ptrdiff_t>((m * OH + y) * M + x) * N,
                                             V::load(dy[m] + y * stride + x * N));
                            dy[m] = edge + static_cast<ptrdiff_t>(m * OH * M) * N;
                        }
                        stride = static_cast<ptrdiff_t>(M) * N;
                    }
                    const float* s = v + static_cast<ptrdiff_t>(i * P * T + t) * is.h * N;
                    point_grads<Maps>(dy, stride, s, static_cast<ptrdiff_t>(T) * is.h * N, OH, gv,
                                      std::make_integer_sequence<int, P>{});
                }
            });
        W::add_kernel_grads(l, du, grads);
    }

    // gv[m][p][ky] += sum over y < OH of (A dy[m])[p] at row y * s[p][y + ky], for every point p
    // (s's points `point_stride` apart).
    template <int Maps, int... Ps>
    static void point_grads(const float* const* dy, ptrdiff_t stride, const float* s, ptrdiff_t point_stride, int OH,
                            float* const* gv, std::integer_sequence<int, Ps...>) {
        (point_grads_at<Maps, Ps>(dy, stride, s + Ps * point_stride, OH, gv), ...);
    }
    template <int Maps, int p>
    static void point_grads_at(const float* const* dy, ptrdiff_t stride, const float* s, int OH, float* const* gv) {
        F acc[Maps][K];
        LENET5_UNROLL for (int m = 0; m < Maps; ++m)
            LENET5_UNROLL for (int ky = 0; ky < K; ++ky) acc[m][ky] = V::load(gv[m] + (p * K + ky) * N);
        for (int y = 0; y < OH; ++y) {
            F a[Maps];
            LENET5_UNROLL for (int m = 0; m < Maps; ++m) {
                const float* row = dy[m] + y * stride;
                a[m] = W::template gradient_point<p>([&](int x) { return V::load(row + x * N); });
            }
            LENET5_UNROLL for (int ky = 0; ky < K; ++ky) {
                // Loaded once for both maps (as the fmas' memory operands, twice: load-bound).
                const F x = L::load_once(s + static_cast<ptrdiff_t>(y + ky) * N);
                LENET5_UNROLL for (int m = 0; m < Maps; ++m) acc[m][ky] = V::fma(a[m], x, acc[m][ky]);
            }
        }
        LENET5_UNROLL for (int m = 0; m < Maps; ++m)
            LENET5_UNROLL for (int ky = 0; ky < K; ++ky) V::store(gv[m] + (p * K + ky) * N, acc[m][ky]);
    }
};

}  // namespace
}  // namespace lenet5
