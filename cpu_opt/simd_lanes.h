// The layers before a network's fully connected tail (LeNet-5: C1 to S4) over a group of N
// samples at once, one sample per vector lane: a group's tensor [C][H][W] is stored
// [C][H][W][N], so element (c, y, x) of every sample is the one vector at ((c*H + y)*W + x)*N.
//
// Why: a sample's own maps are 10 to 28 floats wide, which vectors cover badly (simd_layers.h's
// wide grid computes C3 on 136 positions for 100) and whose taps are unaligned loads. Across
// samples every vector is full and aligned to its row, a weight is one broadcast for all N
// samples, and a convolution row is a register block: R outputs take the K weights of a kernel
// row and the R+K-1 inputs under them, R*K fmas, with no sum through memory.
//
// Unused lanes of a group (a batch that does not fill it) must hold zeros, in the input and in
// the output gradient: the weight gradients sum over lanes, and 0 * 0 adds nothing.
//
// Include only from simd_avx2.cpp and simd_avx512.cpp, after simd_layers.h (its rules hold here).
#pragma once
#include "simd_layers.h"

namespace lenet5 {
namespace {

thread_local Scratch<float> tls_lanes_padded, tls_lanes_taps, tls_lanes_weights;

template <class V>
struct SimdLanes {
    using L = SimdLayers<V>;
    using F = typename V::F;
    static constexpr int N = V::N;

    // Convolutions of stride 1 with 3x3 or 5x5 kernels, and the 2x2 windows simd_layers.h takes.
    static bool supported(const LayerSpec& l) {
        if (!simd_supports(l) || l.kind == LayerKind::FullyConnected) return false;
        return l.kind != LayerKind::Conv || l.kernel == 3 || l.kernel == 5;
    }

    // Output columns per register block: R accumulators beside K weights and an input vector.
    template <int K>
    static constexpr int kCols = V::kRegs - K - 1 < 16 ? V::kRegs - K - 1 : 16;

    // Calls fn(x0, std::integral_constant<int, R>) over n columns in balanced blocks of at most Max.
    template <int Max, class Fn>
    static void over_cols(int n, Fn&& fn) {
        const auto b = L::blocks(n, Max);
        for (int c = 0; c < b.count; ++c) {
            const int x0 = c * b.size, cols = n - x0 < b.size ? n - x0 : b.size;
            with_count<Max>(cols, [&](auto r) { fn(x0, r); });
        }
    }

    // acc[r] += sum over kx of w[kx] * row[(col0 + r + kx)*N] for r < R: one kernel row over R
    // output columns, each input vector loaded once for the K outputs it feeds. With Clip, only
    // the columns col0 + t in [0, width) are read (the rest count as zeros); the inputs t outside
    // [From, To) are known zeros and left out at compile time. Blocks of kCols<K> keep the
    // accumulators, the K weights and an input in registers. Blocks of up to kTallCols leave GCC
    // to spill some: C3's 14-row input-gradient columns in two kCols blocks of 7, their edge rows
    // left out, waited on fma latency (an accumulator's 5 dependent fmas, 20 cycles, for 25 fmas,
    // 12.5 cycles of the two pipes); in one tall block they do not (C3's backward 60 -> 56 us).
    static constexpr int kTallCols = V::kRegs - 1 < 16 ? V::kRegs - 1 : 16;
    template <int K, int R, bool Clip, int From = 0, int To = R + K - 1>
    static void row_taps(F* acc, const F* w, const float* row, int col0, int width) {
        // Unclipped, column col0 + t is at base + t*N: one base register, constant offsets.
        const float* base = Clip ? row : row + static_cast<ptrdiff_t>(col0) * N;
        LENET5_UNROLL for (int t = From; t < To; ++t) {
            if (Clip && (col0 + t < 0 || col0 + t >= width)) continue;
            const F v = V::load(Clip ? row + static_cast<ptrdiff_t>(col0 + t) * N : base + t * N);
            LENET5_UNROLL for (int kx = 0; kx < K; ++kx)
                if (t - kx >= 0 && t - kx < R) acc[t - kx] = V::fma(w[kx], v, acc[t - kx]);
        }
    }

    // ---- activations -------------------------------------------------------------
    //
    // Over whole rows or maps, so that the switch on the activation is outside the loop (inside,
    // the compiler keeps it: a fifth of C1's backward went to it).

    // fn(std::integral_constant<Activation, a>): the activation a compile-time constant.
    template <class Fn>
    static auto with_activation(Activation a, Fn&& fn) {
        switch (a) {
            case Activation::Tanh: return fn(std::integral_constant<Activation, Activation::Tanh>{});
            case Activation::Sigmoid: return fn(std::integral_constant<Activation, Activation::Sigmoid>{});
            case Activation::ReLU: return fn(std::integral_constant<Activation, Activation::ReLU>{});
            case Activation::None: break;
        }
        return fn(std::integral_constant<Activation, Activation::None>{});
    }

    // d[k] = the gradient before the activation from d[k] (after it) and out[k], k < n vectors;
    // returns their sum.
    static F pre_activation_grads(Activation a, float* d, const float* out, int n) {
        return with_activation(a, [d, out, n](auto act) {  // by value: by reference, read again after each store
            F sum = V::zero();
            for (ptrdiff_t k = 0; k < static_cast<ptrdiff_t>(n) * N; k += N) {
                const F dv = L::activation_grad(decltype(act)::value, V::load(d + k), V::load(out + k));
                V::store(d + k, dv);
                sum = V::add(sum, dv);
            }
            return sum;
        });
    }

    // ---- convolution -------------------------------------------------------------

    static Shape padded_shape(const LayerSpec& l) { return {l.in.c, l.in.h + 2 * l.pad, l.in.w + 2 * l.pad}; }

    // The input with P zero columns and rows around each map, or the input itself when P is 0.
    static const float* padded(const LayerSpec& l, const float* in) {
        if (l.pad == 0) return in;
        const Shape ps = padded_shape(l);
        float* buf = tls_lanes_padded.get(static_cast<size_t>(ps.size()) * N);
        L::zero(buf, ps.size() * N);
        for (int c = 0; c < l.in.c; ++c)
            for (int y = 0; y < l.in.h; ++y) {
                const float* src = in + static_cast<ptrdiff_t>((c * l.in.h + y) * l.in.w) * N;
                float* dst = buf + static_cast<ptrdiff_t>((c * ps.h + y + l.pad) * ps.w + l.pad) * N;
                for (int k = 0; k < l.in.w * N; k += N) V::store(dst + k, V::load(src + k));
            }
        return buf;
    }

    // out[o] = act(b[o] + sum over the connections j of o of W[j] correlated with in[conn_in[j]]),
    // summed as the reference does: bias, then connection by connection, row by row, tap by tap.
    template <int K>
    static void conv_forward(const LayerSpec& l, const float* params, const float* in, float* out) {
        const Shape is = padded_shape(l);
        const float* src = padded(l, in);
        const int OH = l.out.h, OW = l.out.w;
        const float* W = params + l.weight_offset;
        const float* bias = params + l.bias_offset;
        for (int o = 0; o < l.out.c; ++o)
            for (int y = 0; y < OH; ++y) {
                float* out_row = out + static_cast<ptrdiff_t>((o * OH + y) * OW) * N;
                over_cols<kCols<K>>(OW, [&](int x0, auto cols) {
                    constexpr int R = decltype(cols)::value;
                    F acc[R];
                    LENET5_UNROLL for (int r = 0; r < R; ++r) acc[r] = V::set1(bias[o]);
                    for (int j = l.conn_begin[o]; j < l.conn_begin[o + 1]; ++j) {
                        const float* w = W + j * K * K;
                        for (int ky = 0; ky < K; ++ky) {
                            F wv[K];
                            LENET5_UNROLL for (int kx = 0; kx < K; ++kx) wv[kx] = V::set1(w[ky * K + kx]);
                            const float* row = src + static_cast<ptrdiff_t>((l.conn_in[j] * is.h + y + ky) * is.w) * N;
                            row_taps<K, R, false>(acc, wv, row, x0, is.w);
                        }
                    }
                    LENET5_UNROLL for (int r = 0; r < R; ++r) V::store(out_row + (x0 + r) * N, acc[r]);
                });
                L::activate(l, out_row, OW * N);  // while the row is in L1
            }
    }

    // Weight-gradient register blocks: M connections from one input map x Rows kernel rows x K taps.
    template <int K>
    static constexpr int kGradAcc = V::kRegs >= 32 ? 25 : 12;
    template <int K, int M>
    static constexpr int kGradRows = kGradAcc<K> / (M * K) < K ? kGradAcc<K> / (M * K) : K;

    // gv[m][ky][kx] (N lane sums each) = sum over y, x of d[m][y][x] * s[y + ky][x + kx], for
    // the kernel rows ky0 .. ky0+Rows of M connections that read the same input map s (rows IW
    // apart; d's rows DW apart).
    template <int K, int M, int Rows>
    static void weight_grad_block(const float* const* d, const float* s, int OH, int OW, int DW, int IW, int ky0,
                                  float* const* gv) {
        F acc[M][Rows][K];
        LENET5_UNROLL for (int m = 0; m < M; ++m) LENET5_UNROLL for (int r = 0; r < Rows; ++r)
            LENET5_UNROLL for (int kx = 0; kx < K; ++kx) acc[m][r][kx] = V::zero();
        // C columns from x on (2, then 1 for an odd last): the input vectors under them slide
        // through a window of C, each loaded once (column c's tap kx is column 0's tap kx+c),
        // K+C-1 loads for C*K; each accumulator still sums in column order.
        auto columns = [&](int y, int x, auto cols) {
            constexpr int C = decltype(cols)::value;
            F dv[C][M];
            LENET5_UNROLL for (int c = 0; c < C; ++c) LENET5_UNROLL for (int m = 0; m < M; ++m)
                dv[c][m] = V::load(d[m] + static_cast<ptrdiff_t>(y * DW + x + c) * N);
            LENET5_UNROLL for (int r = 0; r < Rows; ++r) {
                const float* t = s + static_cast<ptrdiff_t>((y + ky0 + r) * IW + x) * N;
                // One use of a vector (C and M of 1) leaves the load to the fma's memory operand.
                auto load = [&](int k) { return C * M > 1 ? L::load_once(t + k * N) : V::load(t + k * N); };
                F win[C];
                LENET5_UNROLL for (int c = 0; c + 1 < C; ++c) win[c] = load(c);
                LENET5_UNROLL for (int kx = 0; kx < K; ++kx) {
                    win[C - 1] = load(kx + C - 1);
                    LENET5_UNROLL for (int m = 0; m < M; ++m)
                        LENET5_UNROLL for (int c = 0; c < C; ++c) acc[m][r][kx] = V::fma(dv[c][m], win[c], acc[m][r][kx]);
                    LENET5_UNROLL for (int c = 0; c + 1 < C; ++c) win[c] = win[c + 1];
                }
            }
        };
        for (int y = 0; y < OH; ++y) {
            int x = 0;
            for (; x + 2 <= OW; x += 2) columns(y, x, std::integral_constant<int, 2>{});
            if (x < OW) columns(y, x, std::integral_constant<int, 1>{});
        }
        LENET5_UNROLL for (int m = 0; m < M; ++m) LENET5_UNROLL for (int r = 0; r < Rows; ++r)
            LENET5_UNROLL for (int kx = 0; kx < K; ++kx) V::store(gv[m] + ((ky0 + r) * K + kx) * N, acc[m][r][kx]);
    }

    template <int K, int M>
    static void weight_grad_rows(const float* const* d, const float* s, int OH, int OW, int IW, float* const* gv) {
        constexpr int Rows = kGradRows<K, M>;
        int ky0 = 0;
        for (; ky0 + Rows <= K; ky0 += Rows) weight_grad_block<K, M, Rows>(d, s, OH, OW, OW, IW, ky0, gv);
        if constexpr (K % Rows != 0) weight_grad_block<K, M, K % Rows>(d, s, OH, OW, OW, IW, ky0, gv);
    }

    // dout becomes the gradient before the activation; adds the bias gradients (summed over lanes).
    static void bias_grads(const LayerSpec& l, const float* out, float* dout, float* grads) {
        const int OHW = l.out.h * l.out.w;
        for (int o = 0; o < l.out.c; ++o) {
            const ptrdiff_t at = static_cast<ptrdiff_t>(o * OHW) * N;
            grads[l.bias_offset + o] += V::sum(pre_activation_grads(l.activation, dout + at, out + at, OHW));
        }
    }

    // dout becomes the gradient before the activation (unless `folded`: it is, and the bias
    // gradients are in grads); adds the bias and weight gradients (summed over lanes) into grads
    // and, unless din is null, writes din.
    template <int K>
    static void conv_backward(const LayerSpec& l, const float* params, const float* in, const float* out,
                              float* dout, float* din, float* grads, bool folded) {
        const Shape is = padded_shape(l);
        const int OH = l.out.h, OW = l.out.w, OHW = OH * OW;
        if (!folded) bias_grads(l, out, dout, grads);

        // Weight gradients: over the connections from each input map, in groups that share its loads.
        const float* src = padded(l, in);
        const typename L::Feeds f = L::feeds(l);
        float* gv = tls_lanes_taps.get(static_cast<size_t>(l.connections() * K * K * N));
        for (int i = 0; i < l.in.c; ++i) {
            const float* s = src + static_cast<ptrdiff_t>(i * is.h * is.w) * N;
            L::template in_groups<2>(f.begin[i + 1] - f.begin[i], [&](int first, auto maps) {
                constexpr int M = decltype(maps)::value;
                const float* d[M];
                float* g[M];
                for (int m = 0; m < M; ++m) {
                    const int j = f.conn[f.begin[i] + first + m];
                    d[m] = dout + static_cast<ptrdiff_t>(l.conn_out[j] * OHW) * N;
                    g[m] = gv + j * K * K * N;
                }
                weight_grad_rows<K, M>(d, s, OH, OW, is.w, g);
            });
        }
        L::add_tap_sums(gv, l.connections() * K * K, grads + l.weight_offset);

        if (!din) return;
        if (l.pad == 0 && l.in.w <= kDinRow)
            with_count<kDinRow>(l.in.w, [&](auto iw) { din_rows<K, decltype(iw)::value>(l, params, f, dout, din); });
        else
            din_cols<K>(l, params, f, dout, din);
    }

    // The input gradient: din[i][yp][xp] (padded coordinates) = sum over the connections j from i
    // and the taps of d[o][yp - ky][xp - kx] * W[j][ky][kx].

    // By register blocks of din columns: row_taps over d's rows with each kernel row reversed,
    // the d columns outside [0, OW) skipped.
    template <int K>
    static void din_cols(const LayerSpec& l, const float* params, const typename L::Feeds& f, const float* d,
                         float* din) {
        const float* W = params + l.weight_offset;
        const int P = l.pad, OH = l.out.h, OW = l.out.w;
        for (int i = 0; i < l.in.c; ++i)
            for (int yi = 0; yi < l.in.h; ++yi)
                over_cols<kCols<K>>(l.in.w, [&](int x0, auto cols) {
                    constexpr int R = decltype(cols)::value;
                    const int yp = yi + P, col0 = x0 + P - (K - 1);
                    F acc[R];
                    LENET5_UNROLL for (int r = 0; r < R; ++r) acc[r] = V::zero();
                    const int ky_lo = yp - OH + 1 > 0 ? yp - OH + 1 : 0, ky_hi = yp < K - 1 ? yp : K - 1;
                    for (int k = f.begin[i]; k < f.begin[i + 1]; ++k) {
                        const int j = f.conn[k];
                        const float* w = W + j * K * K;
                        for (int ky = ky_lo; ky <= ky_hi; ++ky) {
                            F wv[K];
                            LENET5_UNROLL for (int kx = 0; kx < K; ++kx) wv[kx] = V::set1(w[ky * K + K - 1 - kx]);
                            const float* row = d + static_cast<ptrdiff_t>((l.conn_out[j] * OH + yp - ky) * OW) * N;
                            row_taps<K, R, true>(acc, wv, row, col0, OW);
                        }
                    }
                    float* dst = din + static_cast<ptrdiff_t>((i * l.in.h + yi) * l.in.w + x0) * N;
                    LENET5_UNROLL for (int r = 0; r < R; ++r) V::store(dst + r * N, acc[r]);
                });
    }

    // Whole din rows in registers, for an unpadded input at most kDinRow wide (C3's 14): each d
    // vector is scattered into the row, acc[t + kx] += d[t] * W[ky][kx], every product a real one
    // and no column checked. The weights are fma operands from memory, broadcast beforehand, so
    // that the IW accumulators and a d vector have the registers (din_cols' clipped taps left the
    // fma pipes 40% idle on C3).
    static constexpr int kDinRow = V::kRegs - 1;

    template <int K, int IW>
    static void din_rows(const LayerSpec& l, const float* params, const typename L::Feeds& f, const float* d,
                         float* din) {
        constexpr int OW = IW - K + 1;
        const int OH = l.out.h, IH = l.in.h, taps = l.connections() * K * K;
        const float* W = params + l.weight_offset;
        float* wb = tls_lanes_weights.get(static_cast<size_t>(taps) * N);
        for (int k = 0; k < taps; ++k) V::store(wb + k * N, V::set1(W[k]));
        for (int i = 0; i < l.in.c; ++i)
            for (int yi = 0; yi < IH; ++yi) {
                F acc[IW];
                LENET5_UNROLL for (int x = 0; x < IW; ++x) acc[x] = V::zero();
                const int ky_lo = yi - OH + 1 > 0 ? yi - OH + 1 : 0, ky_hi = yi < K - 1 ? yi : K - 1;
                for (int k = f.begin[i]; k < f.begin[i + 1]; ++k) {
                    const int j = f.conn[k];
                    for (int ky = ky_lo; ky <= ky_hi; ++ky) {
                        const float* w = wb + (j * K + ky) * K * N;
                        const float* row = d + static_cast<ptrdiff_t>((l.conn_out[j] * OH + yi - ky) * OW) * N;
                        LENET5_UNROLL for (int t = 0; t < OW; ++t) {
                            const F v = V::load(row + t * N);
                            LENET5_UNROLL for (int kx = 0; kx < K; ++kx)
                                acc[t + kx] = V::fma(v, V::load(w + kx * N), acc[t + kx]);
                        }
                    }
                }
                float* dst = din + static_cast<ptrdiff_t>((i * IH + yi) * IW) * N;
                LENET5_UNROLL for (int x = 0; x < IW; ++x) V::store(dst + x * N, acc[x]);
            }
    }

    // ---- 2x2 windows ---------------------------------------------------------------
    //
    // Window (y, x) of map c: the vectors a b (row 2y) and c d (row 2y+1) at columns 2x, 2x+1.

    struct Window {
        F a, b, c, d;
    };
    // The window over columns 2x, 2x+1 of the row pair starting at `top` (`down` to the row below).
    static Window window(const float* top, ptrdiff_t down, int x) {
        const float* p = top + static_cast<ptrdiff_t>(2 * x) * N;
        return {V::load(p), V::load(p + N), V::load(p + down), V::load(p + down + N)};
    }
    // The reference's sum, left to right.
    static F sum(const Window& w) { return V::add(V::add(V::add(w.a, w.b), w.c), w.d); }

    // fn(std::integral_constant<LayerKind, k>) for a window layer's kind k: the kind a
    // compile-time constant, so that the loops over the windows hold no switch (with it, and the
    // window's address worked out from its indices, S2's backward ran 2.5 instructions for each one
    // it needed).
    template <class Fn>
    static void with_window_kind(LayerKind kind, Fn&& fn) {
        switch (kind) {
            case LayerKind::Subsample: return fn(std::integral_constant<LayerKind, LayerKind::Subsample>{});
            case LayerKind::MaxPool: return fn(std::integral_constant<LayerKind, LayerKind::MaxPool>{});
            default: return fn(std::integral_constant<LayerKind, LayerKind::AvgPool>{});
        }
    }

    static void window_forward(const LayerSpec& l, const float* params, const float* in, float* out) {
        with_window_kind(l.kind, [&](auto kind) {
            constexpr LayerKind Kind = decltype(kind)::value;
            const int OH = l.out.h, OW = l.out.w;
            const ptrdiff_t down = static_cast<ptrdiff_t>(l.in.w) * N;
            for (int c = 0; c < l.out.c; ++c) {
                const F coef = V::set1(Kind == LayerKind::Subsample ? params[l.weight_offset + c] : 0.25f);
                const F bias = V::set1(Kind == LayerKind::Subsample ? params[l.bias_offset + c] : 0.0f);
                float* map = out + static_cast<ptrdiff_t>(c * OH * OW) * N;
                for (int y = 0; y < OH; ++y) {
                    const float* top = in + static_cast<ptrdiff_t>(c * l.in.h + 2 * y) * down;
                    float* dst = map + static_cast<ptrdiff_t>(y * OW) * N;
                    for (int x = 0; x < OW; ++x) {
                        const Window w = window(top, down, x);
                        F v;
                        if constexpr (Kind == LayerKind::Subsample) v = V::fma(coef, sum(w), bias);
                        else if constexpr (Kind == LayerKind::MaxPool) v = L::max4(w.a, w.b, w.c, w.d);
                        else v = V::mul(sum(w), coef);
                        V::store(dst + x * N, v);
                    }
                }
                L::activate(l, map, OH * OW * N);
            }
        });
    }

    // Folding (HostOps::backward_lanes): a layer's backward takes on the activation and bias
    // gradients of the layer below it as it writes the input gradient, in registers, which spares
    // below's backward a pass over that gradient. A window layer folds a convolution below it
    // (LeNet-5's C1: the pass over its 150 KB gradient took a sixth of C1's backward); a
    // convolution by Winograd folds a window layer below it (S2: a quarter of its backward).
    static bool window_folds(const LayerSpec& below) {
        return below.kind == LayerKind::Conv && below.bias_count == static_cast<size_t>(below.out.c);
    }
    static bool winograd_folds(const LayerSpec& below) {
        return below.kind == LayerKind::Subsample || below.kind == LayerKind::MaxPool || below.kind == LayerKind::AvgPool;
    }

    // The coefficient, bias and folded bias gradients are summed in two chains (the even and the
    // odd windows of a row), a window's four folded gradients added in pairs first: in one chain
    // in the reference's order (the lower row of windows read back after each row), each add
    // waited on the one before (S2's backward 7.4 -> 6.7 us a group of 8, S4's 2.7 -> 2.4).
    struct WindowSums {
        F coef, bias, below;
    };
    static bool window_backward(const LayerSpec& l, const float* params, const float* in, const float* out,
                                float* dout, float* din, float* grads, const LayerSpec* below, bool folded) {
        const bool fold = din && below && window_folds(*below);
        if (!folded) pre_activation_grads(l.activation, dout, out, l.out.size());
        with_window_kind(l.kind, [&](auto kind) {
            with_activation(fold ? below->activation : Activation::None, [&](auto act) {
                constexpr LayerKind Kind = decltype(kind)::value;
                constexpr bool Sub = Kind == LayerKind::Subsample;
                for (int c = 0; c < l.out.c; ++c) {
                    WindowSums even{V::zero(), V::zero(), V::zero()}, odd = even;
                    map_window_grads<Kind, decltype(act)::value>(l, c, Sub ? params[l.weight_offset + c] : 0.25f, in,
                                                                  dout, din, fold, even, odd);
                    if constexpr (Sub) {
                        grads[l.weight_offset + c] += V::sum(V::add(even.coef, odd.coef));
                        if (!folded) grads[l.bias_offset + c] += V::sum(V::add(even.bias, odd.bias));
                    }
                    if (fold) grads[below->bias_offset + c] += V::sum(V::add(even.below, odd.below));
                }
            });
        });
        return fold;
    }

    // Map c's windows: their gradients into din (unless it is null; with `fold`, through the layer
    // below's activation A), their sums into even and odd. A function of its own, its arguments by
    // value: in the lambdas that pick Kind and A, din and fold were captures, read again after
    // every vector store (the intrinsics' stores may alias anything).
    template <LayerKind Kind, Activation A>
    static void map_window_grads(const LayerSpec& l, int c, float coefficient, const float* in, const float* dout,
                                 float* din, bool fold, WindowSums& even, WindowSums& odd) {
        const int OH = l.out.h, OW = l.out.w;
        const ptrdiff_t down = static_cast<ptrdiff_t>(l.in.w) * N;
        const F coef = V::set1(coefficient);
        for (int y = 0; y < OH; ++y) {
            const ptrdiff_t row = static_cast<ptrdiff_t>(c * l.in.h + 2 * y) * down;
            const float* top = in + row;
            const float* drow = dout + static_cast<ptrdiff_t>((c * OH + y) * OW) * N;
            auto window_grads = [&](int x, WindowSums& sums) {
                const F d = V::load(drow + x * N);
                const Window w = window(top, down, x);
                F g[4];  // a b c d
                if constexpr (Kind == LayerKind::MaxPool) {
                    L::max4_grads(w.a, w.b, w.c, w.d, d, g);
                } else {
                    if constexpr (Kind == LayerKind::Subsample) {
                        sums.coef = V::fma(d, sum(w), sums.coef);
                        sums.bias = V::add(sums.bias, d);
                    }
                    g[0] = g[1] = g[2] = g[3] = V::mul(d, coef);
                }
                if (!din) return;
                if (fold) {  // the window is the layer below's output
                    const F o[4] = {w.a, w.b, w.c, w.d};
                    LENET5_UNROLL for (int k = 0; k < 4; ++k) g[k] = L::activation_grad(A, g[k], o[k]);
                    sums.below = V::add(sums.below, V::add(V::add(g[0], g[1]), V::add(g[2], g[3])));
                }
                float* p = din + row + static_cast<ptrdiff_t>(2 * x) * N;
                V::store(p, g[0]);
                V::store(p + N, g[1]);
                V::store(p + down, g[2]);
                V::store(p + down + N, g[3]);
            };
            for (int x = 0; x < OW; x += 2) {
                window_grads(x, even);
                if (x + 1 < OW) window_grads(x + 1, odd);
            }
        }
    }

    // ---- the HostOps entries -------------------------------------------------------

    static void forward(const LayerSpec& l, const float* params, const float* in, float* out) {
        if (l.kind != LayerKind::Conv) return window_forward(l, params, in, out);
        if (l.kernel == 5) return conv_forward<5>(l, params, in, out);
        conv_forward<3>(l, params, in, out);
    }

    static bool backward(const LayerSpec& l, const float* params, const float* in, const float* out, float* dout,
                         float* din, float* grads, const LayerSpec* below, bool folded) {
        if (l.kind != LayerKind::Conv) return window_backward(l, params, in, out, dout, din, grads, below, folded);
        if (l.kernel == 5) conv_backward<5>(l, params, in, out, dout, din, grads, folded);
        else conv_backward<3>(l, params, in, out, dout, din, grads, folded);
        return false;
    }
};

}  // namespace
}  // namespace lenet5
