// The SIMD layer operations, written once over a thin vector type V that
// simd_avx2.cpp and simd_avx512.cpp define (N floats per vector, load/store with
// a lane mask for remainders, fma, a few shuffles). Shapes come from the LayerSpec,
// so any network works; shapes without a vector path (conv K other than 3 and 5 or
// a stride, subsampling and pooling other than 2x2 windows tiling the input)
// fall back to the scalar reference.
//
// Include only from those two files. Everything is in an unnamed namespace so each
// ISA gets its own copy: an inline function shared between them could be merged by
// the linker into the AVX2 path with AVX-512 code. For the same reason this code
// calls no std:: templates over floats (std::vector<float>, std::fill, ...).
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "common/aligned.h"
#include "host_ops.h"
#include "update_rule.h"

#if defined(__clang__)
#define LENET5_UNROLL _Pragma("unroll")
#else
#define LENET5_UNROLL _Pragma("GCC unroll 32")
#endif

namespace lenet5 {
namespace {

// A per-thread buffer that grows to the largest size asked for and is then
// reused, so no step allocates once the first one has run.
template <class T>
class Scratch {
public:
    Scratch() = default;
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    ~Scratch() { release(); }
    // Zeroed when it grows; a cache line at its start (no vector split over two lines).
    T* get(size_t n) {
        if (n > size_) {
            release();
            data_ = static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t{kCacheLine}));
            for (size_t i = 0; i < n; ++i) data_[i] = T();
            size_ = n;
        }
        return data_;
    }

private:
    void release() {
        if (data_) ::operator delete[](data_, std::align_val_t{kCacheLine});
    }
    T* data_ = nullptr;
    size_t size_ = 0;
};

thread_local Scratch<float> tls_input, tls_work, tls_padded, tls_din, tls_taps;
thread_local Scratch<int32_t> tls_feeds;

// Calls fn(std::integral_constant<int, n>) for 1 <= n <= Max, so register
// blocks get a compile-time size (their accumulators then live in registers).
template <int Max, class Fn>
void with_count(int n, Fn&& fn) {
    if constexpr (Max > 1)
        if (n < Max) return with_count<Max - 1>(n, fn);
    fn(std::integral_constant<int, Max>{});
}

// What this code implements: every activation; convolutions of stride 1 (padded or not),
// 2x2 windows of stride 2 that tile their input (subsampling, max and average pooling),
// fully connected layers. Anything else runs the scalar reference.
inline bool simd_supports(const LayerSpec& l) {
    switch (l.kind) {
        case LayerKind::FullyConnected: return true;
        case LayerKind::Conv: return l.stride == 1;
        case LayerKind::Subsample:
        case LayerKind::MaxPool:
        case LayerKind::AvgPool:
            return l.kernel == 2 && l.stride == 2 && l.in.h == 2 * l.out.h && l.in.w == 2 * l.out.w;
        default: return false;  // the other kinds run their reference (host/model/layers/)
    }
}

// A conv whose window covers its whole unpadded input over all input maps (C5) is a fully
// connected layer: connection (o, i) holds W[o][i][K][K], i.e. row o of a [out.c][in.size()] matrix.
inline bool conv_is_dense(const LayerSpec& l) {
    return l.kernel == l.in.h && l.kernel == l.in.w && l.pad == 0 && l.connections() == l.out.c * l.in.c;
}

template <class V>
struct SimdLayers {
    using F = typename V::F;
    static constexpr int N = V::N;

    static int vectors(int n) { return (n + N - 1) / N; }

    // Loads and stores of the first n (<= N) lanes; lanes past n load as 0.
    static F load_n(const float* p, int n) { return n >= N ? V::load(p) : V::load(p, V::first(n > 0 ? n : 0)); }
    static void store_n(float* p, F v, int n) {
        if (n >= N)
            V::store(p, v);
        else if (n > 0)
            V::store(p, v, V::first(n));
    }

    // A load kept in a register: the compiler would fold it into each fma that uses it (one
    // load per use), and in the convolutions loads, not fmas, are the limit (Zen 3: 1.3x).
    static F load_once(const float* p) { return kept(V::load(p)); }
    static F load_once_n(const float* p, int n) { return kept(load_n(p, n)); }
    static F kept(F x) {
        asm("" : "+v"(x));
        return x;
    }

    // n vectors covered by `count` register blocks of `size` (<= max) vectors,
    // balanced so that at most count-1 vectors past n are computed.
    struct Blocks {
        int count, size;
    };
    static Blocks blocks(int n, int max) {
        const int count = (n + max - 1) / max;
        return {count, (n + count - 1) / count};
    }

    // ---- tanh --------------------------------------------------------------

    // tanh within 5e-7 relative of std::tanh (the test checks < 1e-6): x P(x^2) / Q(x^2), P
    // monic of degree 4 and Q of degree 3, fitted for the least largest relative error on
    // [0, 7.9] by fit_tanh.py, on x clamped to +-7.9 (where tanh rounds to 1 in float).
    // No branch, no exp, 12 vector operations (P monic: its first Horner step is an add). Its
    // time follows the operation count, not the chain's latency (bench/results/JOURNAL.md, "a tanh
    // of 12 vector operations for 14"): Eigen's degree 13 over 6, used before, took 14, and C1's forward spent a third of its time in it.
    // NaN stays NaN (max and min return their second operand then).
    static F tanh(F x) {
        x = V::min(V::set1(7.90531110763549805f), V::max(V::set1(-7.90531110763549805f), x));
        const F t = V::mul(x, x);
        F p = V::add(t, V::set1(-1.154823730e+03f));
        p = V::fma(p, t, V::set1(-4.322834375e+05f));
        p = V::fma(p, t, V::set1(-2.033037400e+07f));
        p = V::fma(p, t, V::set1(-1.598240000e+08f));
        F q = V::fma(V::set1(-3.161635352e+04f), t, V::set1(-3.657686000e+06f));
        q = V::fma(q, t, V::set1(-7.360480000e+07f));
        q = V::fma(q, t, V::set1(-1.598240320e+08f));
        return V::div(V::mul(p, x), q);
    }

    // ---- sigmoid, ReLU ---------------------------------------------------------

    // e^x within ~2 ulp for x in [-87, 88] (clamped there; e^-87 ~ 1.6e-38 is still normal):
    // x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so r is exact), e^r by Cephes'
    // degree-7 polynomial, times 2^n. NaN stays NaN.
    static F exp(F x) {
        x = V::min(V::set1(88.0f), V::max(V::set1(-87.0f), x));
        const F n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
        F r = V::fnma(n, V::set1(0.693359375f), x);
        r = V::fnma(n, V::set1(-2.12194440e-4f), r);
        F p = V::set1(1.9875691500e-4f);
        p = V::fma(p, r, V::set1(1.3981999507e-3f));
        p = V::fma(p, r, V::set1(8.3334519073e-3f));
        p = V::fma(p, r, V::set1(4.1665795894e-2f));
        p = V::fma(p, r, V::set1(1.6666665459e-1f));
        p = V::fma(p, r, V::set1(5.0000001201e-1f));
        p = V::fma(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
        return V::mul(p, V::pow2(n));
    }

    static F sigmoid(F x) {
        const F one = V::set1(1.0f);
        return V::div(one, V::add(one, exp(V::fnma(x, one, V::zero()))));  // 1 / (1 + e^-x)
    }

    // max(x, 0); NaN gives 0, as in the reference (max returns its second operand then).
    static F relu(F x) { return V::max(x, V::zero()); }

    static F activation(Activation a, F x) {
        switch (a) {
            case Activation::Tanh: return tanh(x);
            case Activation::Sigmoid: return sigmoid(x);
            case Activation::ReLU: return relu(x);
            case Activation::None: break;
        }
        return x;
    }

    // The activation over a whole layer output (after compaction, so that every
    // vector is full however short the rows), four vectors at a time: tanh's and the
    // sigmoid's polynomials are chains of dependent fmas, which one vector at a time
    // leaves waiting on their latency (C1's forward took 1.5x as long).
    static void activate(const LayerSpec& l, float* x, int n) {
        constexpr int R = 4;
        int k = 0;
        auto in_fours = [&](auto fn) {
            for (; k + R * N <= n; k += R * N) {
                F v[R];
                LENET5_UNROLL for (int r = 0; r < R; ++r) v[r] = fn(V::load(x + k + r * N));
                LENET5_UNROLL for (int r = 0; r < R; ++r) V::store(x + k + r * N, v[r]);
            }
        };
        switch (l.activation) {
            case Activation::Tanh: in_fours([](F v) { return tanh(v); }); break;
            case Activation::Sigmoid: in_fours([](F v) { return sigmoid(v); }); break;
            case Activation::ReLU: break;  // one max: nothing to overlap
            case Activation::None: return;
        }
        for (; k < n; k += N) store_n(x + k, activation(l.activation, load_n(x + k, n - k)), n - k);
    }

    // dLoss/d(pre-activation) from dLoss/d(out), in terms of the output as the reference
    // writes it (same roundings): d (1 - out^2) for tanh, d (out (1 - out)) for sigmoid,
    // d where out > 0 (else 0) for ReLU.
    static F activation_grad(const LayerSpec& l, F d, F out) { return activation_grad(l.activation, d, out); }
    static F activation_grad(Activation a, F d, F out) {
        const F one = V::set1(1.0f);
        switch (a) {
            case Activation::Tanh: return V::mul(d, V::fnma(out, out, one));
            case Activation::Sigmoid: return V::mul(d, V::mul(out, V::fnma(out, one, one)));
            case Activation::ReLU: return V::select(V::greater(out, V::zero()), d, V::zero());
            case Activation::None: break;
        }
        return d;
    }

    // ---- buffers -----------------------------------------------------------

    // The n floats of `in` followed by `pad` zeros, in a per-thread buffer, so that
    // whole vectors may read past the end of the last map.
    static const float* padded(const float* in, int n, int pad) {
        float* buf = tls_input.get(static_cast<size_t>(n + pad));
        int k = 0;
        for (; k + N <= n; k += N) V::store(buf + k, V::load(in + k));
        for (; k < n; ++k) buf[k] = in[k];
        for (; k < n + pad; ++k) buf[k] = 0.0f;
        return buf;
    }

    static void zero(float* p, int n) {
        int k = 0;
        for (; k + N <= n; k += N) V::store(p + k, V::zero());
        for (; k < n; ++k) p[k] = 0.0f;
    }

    // ---- convolution -------------------------------------------------------
    //
    // Both passes work on the "wide" output grid p = y*IW + x (x < IW, the input's
    // row length), where tap (ky, kx) reads in[p + ky*IW + kx]: contiguous, so one
    // vector covers N output positions whatever the map width. Columns x >= OW are
    // dropped (forward) or held at zero (backward); P = (OH-1)*IW + OW positions.

    // The connections grouped by input map: those from map i are conn[begin[i] .. begin[i+1]),
    // in connection order. Both passes run over these groups, so that one load of an input
    // vector serves every output map it feeds in a register block (LeNet-5's C3: 10 maps).
    struct Feeds {
        const int32_t* begin;
        const int32_t* conn;
    };
    static Feeds feeds(const LayerSpec& l) {
        int32_t* begin = tls_feeds.get(static_cast<size_t>(l.in.c + 1 + l.connections()));
        int32_t* conn = begin + l.in.c + 1;
        for (int i = 0; i <= l.in.c; ++i) begin[i] = 0;
        for (int j = 0; j < l.connections(); ++j) ++begin[l.conn_in[j] + 1];
        for (int i = 0; i < l.in.c; ++i) begin[i + 1] += begin[i];
        for (int i = 0; i < l.in.c; ++i)  // a counting sort, stable: connection order within a map
            for (int j = 0, k = begin[i]; j < l.connections(); ++j)
                if (l.conn_in[j] == i) conn[k++] = j;
        return {begin, conn};
    }

    // Calls group(first, count) over n items in balanced groups of at most Max.
    template <int Max, class Group>
    static void in_groups(int n, Group&& group) {
        const int groups = (n + Max - 1) / Max;
        for (int g = 0; g < groups; ++g) {
            const int b = n * g / groups, e = n * (g + 1) / groups;
            with_count<Max>(e - b, [&](auto count) { group(b, count); });
        }
    }

    // Forward register blocks: M maps fed by one input map x kFwdAcc/M vectors of positions.
    static constexpr int kFwdAcc = V::kRegs >= 32 ? 24 : 12, kFwdMaps = V::kRegs >= 32 ? 8 : 6;
    // Weight-gradient register blocks: M maps x the K taps of a kernel row, with M output-gradient
    // vectors and an input vector beside them.
    template <int K>
    static constexpr int kGradMaps = (V::kRegs - 1) / (K + 1) < 3 ? (V::kRegs - 1) / (K + 1) : 3;

    // in [C][IH][IW] (`is`: the layer's input, or its zero-padded copy) -> out [OC][OH][OW]:
    // out[o] = act(b[o] + sum over connections j of o of W[j] (KxK) correlated with in[conn_in[j]]).
    // The wide sums of every map are accumulated in memory, input map after input map; a block
    // of M maps x R vectors stays in registers over the K*K taps of one input map, which load
    // R input vectors and broadcast M weights per M*R fmas.
    template <int K>
    static void conv_forward(const LayerSpec& l, const Shape& is, const float* params, const float* in, float* out) {
        const int IW = is.w, IHW = is.h * is.w, OH = l.out.h, OW = l.out.w, O = l.out.size();
        const int P = (OH - 1) * IW + OW, nv = vectors(P);
        // A block runs whole: up to kFwdAcc - 1 vectors past the grid, + N for the compaction.
        const int reach = (nv + kFwdAcc) * N, stride = reach + N;
        const float* src = padded(in, is.c * IHW, reach - P);  // the last tap of the last vector reads this far
        float* wide = tls_work.get(static_cast<size_t>(l.out.c * stride));
        const float* W = params + l.weight_offset;
        const float* bias = params + l.bias_offset;
        const Feeds f = feeds(l);
        for (int o = 0; o < l.out.c; ++o) {  // every map starts from its bias
            const F b = V::set1(bias[o]);
            for (int p = 0; p < (nv + 1) * N; p += N) V::store(wide + o * stride + p, b);  // what the compaction reads
        }
        for (int i = 0; i < l.in.c; ++i)
            in_groups<kFwdMaps>(f.begin[i + 1] - f.begin[i], [&](int first, auto maps) {
                conv_forward_block<K, decltype(maps)::value>(l, f.conn + f.begin[i] + first, src + i * IHW, IW, W, nv,
                                                            wide, stride);
            });
        // The wide rows -> out, then activated. Whole vectors: what spills past a row's end is
        // rewritten by the rows after it; only the very last vector is cut at the buffer's end.
        for (int o = 0; o < l.out.c; ++o)
            for (int y = 0; y < OH; ++y)
                for (int x0 = 0; x0 < OW; x0 += N) {
                    const int at = (o * OH + y) * OW + x0;
                    store_n(out + at, V::load(wide + o * stride + y * IW + x0), O - at);
                }
        activate(l, out, O);
    }

    // wide[conn_out[j]] += W[j] correlated with s, for the M connections j in conn (all from s).
    template <int K, int M>
    static void conv_forward_block(const LayerSpec& l, const int32_t* conn, const float* s, int IW, const float* W,
                                   int nv, float* wide, int stride) {
        constexpr int R = kFwdAcc / M;
        float* dst[M];
        const float* w[M];
        LENET5_UNROLL for (int m = 0; m < M; ++m) {
            dst[m] = wide + l.conn_out[conn[m]] * stride;
            w[m] = W + conn[m] * K * K;
        }
        for (int p0 = 0; p0 < nv * N; p0 += R * N) {
            F acc[M][R];
            LENET5_UNROLL for (int m = 0; m < M; ++m)
                LENET5_UNROLL for (int r = 0; r < R; ++r) acc[m][r] = V::load(dst[m] + p0 + r * N);
            for (int ky = 0; ky < K; ++ky)
                LENET5_UNROLL for (int kx = 0; kx < K; ++kx) {
                    F x[R];
                    LENET5_UNROLL for (int r = 0; r < R; ++r) x[r] = load_once(s + p0 + ky * IW + kx + r * N);
                    LENET5_UNROLL for (int m = 0; m < M; ++m) {
                        const F wv = V::set1(w[m][ky * K + kx]);
                        LENET5_UNROLL for (int r = 0; r < R; ++r) acc[m][r] = V::fma(x[r], wv, acc[m][r]);
                    }
                }
            LENET5_UNROLL for (int m = 0; m < M; ++m)
                LENET5_UNROLL for (int r = 0; r < R; ++r) V::store(dst[m] + p0 + r * N, acc[m][r]);
        }
    }

    // The weight gradients below leave each tap's sum as a vector of N partial sums, gv[j][ky][kx]
    // (N floats each), and add_tap_sums() adds them all into gW at the end: full-vector stores
    // in the inner kernels, and the horizontal sums N taps at a time.

    // Row ky of the M connections in gv (all reading the input s):
    // gv[m][ky][kx] = sum_p d[m][p] * s[p + ky*IW + kx]; each input vector serves M maps.
    template <int K, int M>
    static void conv_weight_grad_maps(const float* const* d, const float* s, int np, int IW, int ky, float* const* gv) {
        F acc[M][K];
        LENET5_UNROLL for (int m = 0; m < M; ++m) LENET5_UNROLL for (int kx = 0; kx < K; ++kx) acc[m][kx] = V::zero();
        for (int c = 0; c < np * N; c += N) {
            F dv[M];
            LENET5_UNROLL for (int m = 0; m < M; ++m) dv[m] = V::load(d[m] + c);
            const float* t = s + c + ky * IW;
            LENET5_UNROLL for (int kx = 0; kx < K; ++kx) {
                const F x = load_once(t + kx);
                LENET5_UNROLL for (int m = 0; m < M; ++m) acc[m][kx] = V::fma(dv[m], x, acc[m][kx]);
            }
        }
        LENET5_UNROLL for (int m = 0; m < M; ++m)
            LENET5_UNROLL for (int kx = 0; kx < K; ++kx) V::store(gv[m] + (ky * K + kx) * N, acc[m][kx]);
    }

    // Rows ky0 .. ky0+Rows of one connection in gv: Rows*K accumulators over the np vectors of
    // the wide grid.
    template <int K, int Rows>
    static void conv_weight_grad_rows(const float* d, const float* s, int np, int IW, int ky0, float* gv) {
        F acc[Rows][K];
        LENET5_UNROLL for (int ty = 0; ty < Rows; ++ty)
            LENET5_UNROLL for (int kx = 0; kx < K; ++kx) acc[ty][kx] = V::zero();
        for (int c = 0; c < np * N; c += N) {
            const F dv = V::load(d + c);
            LENET5_UNROLL for (int ty = 0; ty < Rows; ++ty) {
                const float* t = s + c + (ky0 + ty) * IW;
                LENET5_UNROLL for (int kx = 0; kx < K; ++kx) acc[ty][kx] = V::fma(dv, V::load(t + kx), acc[ty][kx]);
            }
        }
        LENET5_UNROLL for (int ty = 0; ty < Rows; ++ty)
            LENET5_UNROLL for (int kx = 0; kx < K; ++kx) V::store(gv + ((ky0 + ty) * K + kx) * N, acc[ty][kx]);
    }

    // dst[k] += the sum of the N lanes at v + k*N, k < n; N sums at a time by V::sums.
    static void add_tap_sums(const float* v, int n, float* dst) {
        for (int g = 0; g < n; g += N) {
            F part[N];
            for (int k = 0; k < N; ++k) part[k] = g + k < n ? V::load(v + (g + k) * N) : V::zero();
            store_n(dst + g, V::add(load_n(dst + g, n - g), V::sums(part)), n - g);
        }
    }

    template <int K>
    static void conv_backward(const LayerSpec& l, const Shape& is, const float* params, const float* in,
                              const float* out, const float* dout, float* din, float* grads) {
        const int IW = is.w, IHW = is.h * is.w, OH = l.out.h, OW = l.out.w;
        const int P = (OH - 1) * IW + OW, np = vectors(P);
        // The input gradient is computed in column blocks of cols.size vectors, as many as
        // leave registers for K rows of accumulators.
        constexpr int kDinCols = (V::kRegs - 2) / (K + 1);
        const Blocks cols = blocks(vectors(IW), kDinCols);
        const int cspan = cols.count * cols.size * N;
        // Each map's wide gradient sits after `front` zeros (reads reach K-1 columns left
        // of row 0) and is followed by zeros up to the furthest vector read.
        const int front = K - 1, last = (OH - 1) * IW + cspan > np * N ? (OH - 1) * IW + cspan : np * N;
        const int stride = front + last + N;
        float* dwide_all = tls_work.get(static_cast<size_t>(l.out.c * stride));
        const float* W = params + l.weight_offset;
        float* gW = grads + l.weight_offset;

        // 1. The wide gradient before the activation, zero off the grid, and the bias gradient.
        // (The activation in a local: the stores below may alias l, which would be read again
        // and switched on at every vector.)
        const Activation act = l.activation;
        for (int o = 0; o < l.out.c; ++o) {
            float* d = dwide_all + o * stride;
            zero(d, stride);
            d += front;
            F bsum = V::zero();
            for (int y = 0; y < OH; ++y) {
                const float* g = dout + (o * OH + y) * OW;
                const float* v = out + (o * OH + y) * OW;
                float* w = d + y * IW;
                int x0 = 0;
                for (; x0 + N <= OW; x0 += N) {
                    const F dv = activation_grad(act, V::load(g + x0), V::load(v + x0));
                    bsum = V::add(bsum, dv);
                    V::store(w + x0, dv);
                }
                if (x0 < OW) {  // lanes past OW are 0; a spill into the next row is rewritten by that row
                    const F dv = activation_grad(act, load_n(g + x0, OW - x0), load_n(v + x0, OW - x0));
                    bsum = V::add(bsum, dv);
                    V::store(w + x0, dv);
                }
            }
            grads[l.bias_offset + o] += V::sum(bsum);
        }

        // 2. Weight gradients: gW[j][ky][kx] = sum_p dwide[o][p] * in[i][p + ky*IW + kx], over the
        // connections from each input map i in groups that share its loads. A lone one instead takes
        // as many kernel rows per pass as the registers hold (all five with AVX-512).
        const float* src = padded(in, is.c * IHW, np * N - P);
        constexpr int kRows = (V::kRegs - 3) / K < K ? (V::kRegs - 3) / K : K;
        static_assert(kRows >= 1, "kernel too wide for the register file");
        const Feeds f = feeds(l);
        float* gv = tls_taps.get(static_cast<size_t>(l.connections() * K * K * N));
        for (int i = 0; i < is.c; ++i) {
            const float* s = src + i * IHW;
            in_groups<kGradMaps<K>>(f.begin[i + 1] - f.begin[i], [&](int first, auto maps) {
                constexpr int M = decltype(maps)::value;
                const int32_t* conn = f.conn + f.begin[i] + first;
                if constexpr (M == 1) {
                    const float* d = dwide_all + l.conn_out[conn[0]] * stride + front;
                    float* gw = gv + conn[0] * K * K * N;
                    int ky0 = 0;
                    for (; ky0 + kRows <= K; ky0 += kRows) conv_weight_grad_rows<K, kRows>(d, s, np, IW, ky0, gw);
                    if constexpr (K % kRows != 0) conv_weight_grad_rows<K, K % kRows>(d, s, np, IW, ky0, gw);
                } else {
                    const float* d[M];
                    float* gw[M];
                    for (int m = 0; m < M; ++m) {
                        d[m] = dwide_all + l.conn_out[conn[m]] * stride + front;
                        gw[m] = gv + conn[m] * K * K * N;
                    }
                    for (int ky = 0; ky < K; ++ky) conv_weight_grad_maps<K, M>(d, s, np, IW, ky, gw);
                }
            });
        }
        add_tap_sums(gv, l.connections() * K * K, gW);

        // 3. Input gradient, by rows: d[o] row y, shifted by kx, times W[j][ky][kx] adds to
        // din row y+ky (the zero columns x >= OW of the row before supply the left edge).
        // The K din rows that d row y feeds live in registers as a ring (slot = row % K,
        // constant once y is unrolled by K); din row y is complete once d row y is done.
        // Each d vector loaded serves K taps, and no tap reads a row of zeros.
        if (!din) return;
        with_count<kDinCols>(cols.size, [&](auto count) {
            constexpr int C = decltype(count)::value;
            for (int i = 0; i < is.c; ++i) {
                for (int c0 = 0; c0 < cspan; c0 += C * N) {
                    float* dst = din + i * IHW + c0;
                    auto store_row = [&](const F* row, int y) {
                        LENET5_UNROLL for (int v = 0; v < C; ++v)
                            store_n(dst + y * IW + v * N, row[v], IW - c0 - v * N);
                    };
                    F acc[K][C];
                    LENET5_UNROLL for (int s = 0; s < K; ++s)
                        LENET5_UNROLL for (int v = 0; v < C; ++v) acc[s][v] = V::zero();
                    for (int y0 = 0; y0 < OH; y0 += K)
                        LENET5_UNROLL for (int yy = 0; yy < K; ++yy) {
                            const int y = y0 + yy;
                            if (y >= OH) continue;
                            for (int k = f.begin[i]; k < f.begin[i + 1]; ++k) {
                                const int j = f.conn[k];
                                const float* d = dwide_all + l.conn_out[j] * stride + front + y * IW + c0;
                                const float* w = W + j * K * K;
                                LENET5_UNROLL for (int kx = 0; kx < K; ++kx) {
                                    F dv[C];
                                    LENET5_UNROLL for (int v = 0; v < C; ++v) dv[v] = load_once(d - kx + v * N);
                                    LENET5_UNROLL for (int ky = 0; ky < K; ++ky) {
                                        const F wv = V::set1(w[ky * K + kx]);
                                        F* a = acc[(yy + ky) % K];
                                        LENET5_UNROLL for (int v = 0; v < C; ++v) a[v] = V::fma(wv, dv[v], a[v]);
                                    }
                                }
                            }
                            store_row(acc[yy], y);
                            LENET5_UNROLL for (int v = 0; v < C; ++v) acc[yy][v] = V::zero();
                        }
                    // The last K-1 din rows are complete once the last d row is done.
                    LENET5_UNROLL for (int s = 0; s < K; ++s) {
                        const int y = OH + (s - OH % K + K) % K;  // the row in slot s
                        if (y < is.h) store_row(acc[s], y);
                    }
                }
            }
        });
    }

    // ---- zero padding ------------------------------------------------------------
    //
    // A padded convolution is the valid one over a copy of the input with P zeros on every
    // side of each map; its input gradient is that copy's, cropped.

    static Shape padded_shape(const LayerSpec& l) { return {l.in.c, l.in.h + 2 * l.pad, l.in.w + 2 * l.pad}; }

    static const float* pad_maps(const LayerSpec& l, const float* in) {
        const Shape ps = padded_shape(l);
        float* buf = tls_padded.get(static_cast<size_t>(ps.size()));
        zero(buf, ps.size());
        for (int c = 0; c < l.in.c; ++c)
            for (int y = 0; y < l.in.h; ++y) {
                const float* src = in + (c * l.in.h + y) * l.in.w;
                float* dst = buf + (c * ps.h + y + l.pad) * ps.w + l.pad;
                for (int x = 0; x < l.in.w; x += N) store_n(dst + x, load_n(src + x, l.in.w - x), l.in.w - x);
            }
        return buf;
    }

    template <int K>
    static void conv_forward_padded(const LayerSpec& l, const float* params, const float* in, float* out) {
        if (l.pad == 0) return conv_forward<K>(l, l.in, params, in, out);
        conv_forward<K>(l, padded_shape(l), params, pad_maps(l, in), out);
    }

    template <int K>
    static void conv_backward_padded(const LayerSpec& l, const float* params, const float* in, const float* out,
                                     const float* dout, float* din, float* grads) {
        if (l.pad == 0) return conv_backward<K>(l, l.in, params, in, out, dout, din, grads);
        const Shape ps = padded_shape(l);
        float* dpad = din ? tls_din.get(static_cast<size_t>(ps.size())) : nullptr;
        conv_backward<K>(l, ps, params, pad_maps(l, in), out, dout, dpad, grads);
        if (!din) return;
        for (int c = 0; c < l.in.c; ++c)
            for (int y = 0; y < l.in.h; ++y) {
                const float* src = dpad + (c * ps.h + y + l.pad) * ps.w + l.pad;
                float* dst = din + (c * l.in.h + y) * l.in.w;
                for (int x = 0; x < l.in.w; x += N) store_n(dst + x, load_n(src + x, l.in.w - x), l.in.w - x);
            }
    }

    // ---- fully connected, over a batch of samples -----------------------------
    //
    // W is [O][I] (a dense 1x1-output conv is the same matrix), in [count][I], out and the
    // output gradient d [count][O]. Vectors run along I, the last `last` (1..N) lanes wide;
    // register blocks of rows x samples (or x vectors) share their loads, so W and its
    // gradient pass through the core a few times per call rather than once per sample.

    static constexpr bool kBig = V::kRegs >= 32;
    // The backward blocks: 4 rows (or 4 or 5 samples) x 3 or 5 vectors, 12 accumulators on AVX2 (2 or 3
    // rows left the fma latency exposed: C5's backward over 32 samples took 1.2x as long).
    static constexpr int kFcRows = 4, kFcSamples = kBig ? 5 : 4, kFcVectors = kBig ? 5 : 3;
    // The forward pass keeps 4 rows' weight vectors in registers beside 4 x 3 accumulators (C5 on
    // AVX2: 1.5x over 2 x 3, which left the fma latency exposed).
    static constexpr int kFcFwdRows = 4, kFcFwdSamples = kBig ? 5 : 3;

    // Vector r of a block whose last vector (r == R-1) has `last` lanes: an int, or
    // std::integral_constant<int, N> for a block of whole vectors (no masks then).
    template <int R, class Last>
    static F load_block(const float* p, int r, Last last) { return r == R - 1 ? load_n(p, last) : V::load(p); }
    template <int R, class Last>
    static void store_block(float* p, F v, int r, Last last) { store_n(p, v, r == R - 1 ? last : N); }

    // Calls block(i0, R, last) over the vectors of I in blocks of up to Max vectors.
    template <int Max, class Block>
    static void over_vectors(int I, Block&& block) {
        const int nv = vectors(I), last = I - (nv - 1) * N;
        int v = 0;
        for (; v + Max < nv; v += Max)
            block(v * N, std::integral_constant<int, Max>{}, std::integral_constant<int, N>{});
        with_count<Max>(nv - v, [&](auto count) { block(v * N, count, last); });
    }

    // dst[k] = the sum of v[k]'s lanes, k < n.
    static void sum_each(const F* v, int n, float* dst) {
        for (int g = 0; g < n; g += N) {
            F part[N];
            for (int k = 0; k < N; ++k) part[k] = g + k < n ? v[g + k] : V::zero();
            store_n(dst + g, V::sums(part), n - g);
        }
    }

    // out[s0+s][o0+r] = b + W[o0+r] . in[s0+s] for Rows rows x S samples, over the inputs
    // [i0, i1): the first chunk starts from the bias, a later one adds to out.
    template <int Rows, int S>
    static void fc_forward_block(int I, int O, const float* W, const float* b, const float* in, float* out, int o0,
                                 int s0, int i0, int i1) {
        F acc[S][Rows];
        LENET5_UNROLL for (int s = 0; s < S; ++s) LENET5_UNROLL for (int r = 0; r < Rows; ++r) acc[s][r] = V::zero();
        auto step = [&](int i, int n) {
            F w[Rows];
            LENET5_UNROLL for (int r = 0; r < Rows; ++r) w[r] = load_n(W + static_cast<ptrdiff_t>(o0 + r) * I + i, n);
            LENET5_UNROLL for (int s = 0; s < S; ++s) {
                const F x = load_once_n(in + static_cast<ptrdiff_t>(s0 + s) * I + i, n);
                LENET5_UNROLL for (int r = 0; r < Rows; ++r) acc[s][r] = V::fma(w[r], x, acc[s][r]);
            }
        };
        int i = i0;
        for (; i + N < i1; i += N) step(i, N);
        step(i, i1 - i);
        float sums[S * Rows];
        sum_each(&acc[0][0], S * Rows, sums);
        for (int s = 0; s < S; ++s)
            for (int r = 0; r < Rows; ++r) {
                float& o = out[(s0 + s) * O + o0 + r];
                o = (i0 == 0 ? b[o0 + r] : o) + sums[s * Rows + r];
            }
    }

    // Inputs per chunk of the forward pass: a chunk of every sample's input (a batch of 64:
    // 64 x 4 KB) stays in L2 while all rows pass over it, so a large W (the CNN's F1,
    // 6272 inputs) is read from memory once per call, not once per block of samples.
    static constexpr int kFcChunk = 1024;

    static void fc_forward(const LayerSpec& l, const float* params, const float* in, float* out, int count) {
        const int I = l.in.size(), O = l.out.size();
        const float* W = params + l.weight_offset;
        const float* b = params + l.bias_offset;
        const int chunks = (I + kFcChunk - 1) / kFcChunk, chunk = (vectors(I) + chunks - 1) / chunks * N;
        for (int i0 = 0; i0 < I; i0 += chunk) {
            const int i1 = i0 + chunk < I ? i0 + chunk : I;
            auto rows = [&](int o, auto r) {
                constexpr int Rows = decltype(r)::value;
                for (int s0 = 0; s0 < count; s0 += kFcFwdSamples)
                    with_count<kFcFwdSamples>(count - s0 < kFcFwdSamples ? count - s0 : kFcFwdSamples, [&](auto samples) {
                        fc_forward_block<Rows, decltype(samples)::value>(I, O, W, b, in, out, o, s0, i0, i1);
                    });
            };
            int o = 0;
            for (; o + kFcFwdRows <= O; o += kFcFwdRows) rows(o, std::integral_constant<int, kFcFwdRows>{});
            for (; o < O; ++o) rows(o, std::integral_constant<int, 1>{});
        }
        activate(l, out, count * O);
    }

    // gW[o0+r][i0 .. +R vectors] += sum over samples of d[s][o0+r] * in[s][i0 ..].
    template <int Rows, int R, class Last>
    // With `set`, gW is written as if it had been zero (it is not read).
    static void fc_weight_grad_block(int I, int O, int count, const float* in, const float* d, float* gW, int o0,
                                     int i0, Last last, bool set) {
        F acc[Rows][R];
        LENET5_UNROLL for (int r = 0; r < Rows; ++r) LENET5_UNROLL for (int v = 0; v < R; ++v)
            acc[r][v] = set ? V::zero() : load_block<R>(gW + static_cast<ptrdiff_t>(o0 + r) * I + i0 + v * N, v, last);
        for (int s = 0; s < count; ++s) {
            F x[R];
            LENET5_UNROLL for (int v = 0; v < R; ++v)
                x[v] = kept(load_block<R>(in + static_cast<ptrdiff_t>(s) * I + i0 + v * N, v, last));
            LENET5_UNROLL for (int r = 0; r < Rows; ++r) {
                const F dv = V::set1(d[s * O + o0 + r]);
                LENET5_UNROLL for (int v = 0; v < R; ++v) acc[r][v] = V::fma(dv, x[v], acc[r][v]);
            }
        }
        LENET5_UNROLL for (int r = 0; r < Rows; ++r) LENET5_UNROLL for (int v = 0; v < R; ++v)
            store_block<R>(gW + static_cast<ptrdiff_t>(o0 + r) * I + i0 + v * N, acc[r][v], v, last);
    }

    // din[s0+s][i0 .. +R vectors] = sum over o of W[o][i0 ..] * d[s0+s][o].
    template <int S, int R, class Last>
    static void fc_input_grad_block(int I, int O, const float* W, const float* d, float* din, int s0, int i0,
                                    Last last) {
        F acc[S][R];
        LENET5_UNROLL for (int s = 0; s < S; ++s) LENET5_UNROLL for (int v = 0; v < R; ++v) acc[s][v] = V::zero();
        for (int o = 0; o < O; ++o) {
            F w[R];
            LENET5_UNROLL for (int v = 0; v < R; ++v)
                w[v] = kept(load_block<R>(W + static_cast<ptrdiff_t>(o) * I + i0 + v * N, v, last));
            LENET5_UNROLL for (int s = 0; s < S; ++s) {
                const F dv = V::set1(d[(s0 + s) * O + o]);
                LENET5_UNROLL for (int v = 0; v < R; ++v) acc[s][v] = V::fma(dv, w[v], acc[s][v]);
            }
        }
        LENET5_UNROLL for (int s = 0; s < S; ++s) LENET5_UNROLL for (int v = 0; v < R; ++v)
            store_block<R>(din + static_cast<ptrdiff_t>(s0 + s) * I + i0 + v * N, acc[s][v], v, last);
    }

    // Adds the gradients into grads, or with `set` writes them (bit for bit the sums into zeros).
    static void fc_backward(const LayerSpec& l, const float* params, const float* in, const float* out, float* dout,
                            float* din, float* grads, int count, bool set = false) {
        const int I = l.in.size(), O = l.out.size();
        // dout becomes the gradient before the activation; the bias gradient sums it over samples.
        for (int k = 0; k < O; k += N) {
            F bsum = V::zero();
            for (int s = 0; s < count; ++s) {
                const int at = s * O + k;
                const F dv = activation_grad(l, load_n(dout + at, O - k), load_n(out + at, O - k));
                store_n(dout + at, dv, O - k);
                bsum = V::add(bsum, dv);
            }
            if (!grads) continue;
            float* gb = grads + l.bias_offset + k;
            store_n(gb, V::add(set ? V::zero() : load_n(gb, O - k), bsum), O - k);
        }
        if (!grads && !din) return;
        const float* W = params + l.weight_offset;
        float* gW = grads ? grads + l.weight_offset : nullptr;
        over_vectors<kFcVectors>(I, [&](int i0, auto vecs, int last) {
            constexpr int R = decltype(vecs)::value;
            if (gW) {
                int o = 0;
                for (; o + kFcRows <= O; o += kFcRows)
                    fc_weight_grad_block<kFcRows, R>(I, O, count, in, dout, gW, o, i0, last, set);
                for (; o < O; ++o) fc_weight_grad_block<1, R>(I, O, count, in, dout, gW, o, i0, last, set);
            }
            if (!din) return;
            int s = 0;
            for (; s + kFcSamples <= count; s += kFcSamples)
                fc_input_grad_block<kFcSamples, R>(I, O, W, dout, din, s, i0, last);
            for (; s < count; ++s) fc_input_grad_block<1, R>(I, O, W, dout, din, s, i0, last);
        });
    }

    // One sample's gradient, written: gW[o][i] = d[o] x[i] + 0 and gb[o] = 0 + d[o], the
    // roundings of fc_backward into zeroed gradients (fma onto 0, add onto 0).
    static void outer_grads(const LayerSpec& l, const float* x, const float* d, float* grads) {
        const int I = l.in.size(), O = l.out.size();
        float* gW = grads + l.weight_offset;
        for (int o = 0; o < O; ++o) {
            const F dv = V::set1(d[o]);
            float* row = gW + static_cast<ptrdiff_t>(o) * I;
            for (int i = 0; i < I; i += N) store_n(row + i, V::fma(dv, load_n(x + i, I - i), V::zero()), I - i);
        }
        for (int o = 0; o < O; o += N) store_n(grads + l.bias_offset + o, V::add(V::zero(), load_n(d + o, O - o)), O - o);
    }

    // SGD only (HostEngine runs it without momentum and weight decay, never under Adam).
    // p -= lr * g for that gradient, g rounded as outer_grads writes it: update() with
    // momentum 0 and weight decay 0 gives v = 0*v + (0*p + g) = g exactly (g is never -0:
    // an exact -0 product plus +0 is +0), then p = p - lr*v by one fnma, as here.
    static void sgd_outer(const LayerSpec& l, float* params, const float* x, const float* d, float lr) {
        const int I = l.in.size(), O = l.out.size();
        const F rate = V::set1(lr);
        float* W = params + l.weight_offset;
        constexpr int kRows = 4;  // rows per pass: one load of x serves four rows
        int o = 0;
        for (; o + kRows <= O; o += kRows) {
            F dv[kRows];
            LENET5_UNROLL for (int r = 0; r < kRows; ++r) dv[r] = V::set1(d[o + r]);
            float* row = W + static_cast<ptrdiff_t>(o) * I;
            int i = 0;
            for (; i + N <= I; i += N) {
                const F xv = V::load(x + i);
                LENET5_UNROLL for (int r = 0; r < kRows; ++r) {
                    float* p = row + r * I + i;
                    V::store(p, V::fnma(rate, V::fma(dv[r], xv, V::zero()), V::load(p)));
                }
            }
            if (i < I) {
                const F xv = load_n(x + i, I - i);
                LENET5_UNROLL for (int r = 0; r < kRows; ++r) {
                    float* p = row + r * I + i;
                    store_n(p, V::fnma(rate, V::fma(dv[r], xv, V::zero()), load_n(p, I - i)), I - i);
                }
            }
        }
        for (; o < O; ++o) {
            const F dv = V::set1(d[o]);
            float* row = W + static_cast<ptrdiff_t>(o) * I;
            for (int i = 0; i < I; i += N)
                store_n(row + i, V::fnma(rate, V::fma(dv, load_n(x + i, I - i), V::zero()), load_n(row + i, I - i)), I - i);
        }
        float* b = params + l.bias_offset;
        for (int k = 0; k < O; k += N)
            store_n(b + k, V::fnma(rate, V::add(V::zero(), load_n(d + k, O - k)), load_n(b + k, O - k)), O - k);
    }

    // ---- 2x2 subsampling ---------------------------------------------------
    //
    // Output vector x0..x0+N of row y reads input columns 2*x0 .. 2*x0+2N of rows 2y
    // and 2y+1: two vectors per row, summed vertically, then in adjacent pairs.

    static F window_sums(const float* r0, const float* r1, int n) {  // n outputs
        const int n0 = 2 * n < N ? 2 * n : N, n1 = 2 * n - n0;
        const F lo = V::add(load_n(r0, n0), load_n(r1, n0));
        const F hi = n1 > 0 ? V::add(load_n(r0 + N, n1), load_n(r1 + N, n1)) : V::zero();
        return V::pair_sum(lo, hi);
    }

    static void subsample_forward(const LayerSpec& l, const float* params, const float* in, float* out) {
        const int IW = l.in.w, OH = l.out.h, OW = l.out.w;
        for (int c = 0; c < l.out.c; ++c) {
            const F coef = V::set1(params[l.weight_offset + c]), bias = V::set1(params[l.bias_offset + c]);
            for (int y = 0; y < OH; ++y) {
                const float* r0 = in + (c * l.in.h + 2 * y) * IW;
                for (int x0 = 0; x0 < OW; x0 += N) {
                    const F s = window_sums(r0 + 2 * x0, r0 + IW + 2 * x0, OW - x0);
                    store_n(out + (c * OH + y) * OW + x0, V::fma(coef, s, bias), OW - x0);
                }
            }
        }
        activate(l, out, l.out.size());
    }

    static void subsample_backward(const LayerSpec& l, const float* params, const float* in, const float* out,
                                   const float* dout, float* din, float* grads) {
        const int IW = l.in.w, OH = l.out.h, OW = l.out.w;
        for (int c = 0; c < l.out.c; ++c) {
            const F coef = V::set1(params[l.weight_offset + c]);
            F gcoef = V::zero(), gbias = V::zero();
            for (int y = 0; y < OH; ++y) {
                const float* r0 = in + (c * l.in.h + 2 * y) * IW;
                for (int x0 = 0; x0 < OW; x0 += N) {
                    const int at = (c * OH + y) * OW + x0, n = OW - x0;
                    const F d = activation_grad(l, load_n(dout + at, n), load_n(out + at, n));
                    gcoef = V::fma(d, window_sums(r0 + 2 * x0, r0 + IW + 2 * x0, n), gcoef);
                    gbias = V::add(gbias, d);
                    if (!din) continue;
                    // Every input of a window gets d * coef.
                    F lo, hi;
                    V::dup_pairs(V::mul(d, coef), lo, hi);
                    float* d0 = din + (r0 - in) + 2 * x0;
                    const int n0 = 2 * n < N ? 2 * n : N, n1 = 2 * n - n0;
                    store_n(d0, lo, n0);
                    store_n(d0 + IW, lo, n0);
                    store_n(d0 + N, hi, n1);
                    store_n(d0 + IW + N, hi, n1);
                }
            }
            grads[l.weight_offset + c] += V::sum(gcoef);
            grads[l.bias_offset + c] += V::sum(gbias);
        }
    }

    // ---- 2x2 max and average pooling ----------------------------------------------
    //
    // As subsampling, but the window's four inputs are split into even and odd columns
    // (e0 o0 in row 2y, e1 o1 in row 2y+1), each a vector over N outputs, and combined
    // in the reference's order.

    struct Window {
        F e0, o0, e1, o1;
    };
    static Window window(const float* r0, const float* r1, int n) {  // n outputs
        const int n0 = 2 * n < N ? 2 * n : N, n1 = 2 * n - n0;
        Window w;
        V::even_odd(load_n(r0, n0), load_n(r0 + N, n1), w.e0, w.o0);
        V::even_odd(load_n(r1, n0), load_n(r1 + N, n1), w.e1, w.o1);
        return w;
    }

    // The reference's running maximum of a window's four inputs in its order (replaced only by a
    // larger input, so the first largest wins), and the gradient d routed to that input: g[k] is
    // d for the input where the maximum last changed, 0 for the others. Shared with simd_lanes.h.
    static F max4(F a, F b, F c, F d) {
        F m = V::select(V::greater(b, a), b, a);
        m = V::select(V::greater(c, m), c, m);
        return V::select(V::greater(d, m), d, m);
    }
    static void max4_grads(F a, F b, F c, F d, F grad, F* g) {
        const auto tb = V::greater(b, a);
        const F m0 = V::select(tb, b, a);
        const auto tc = V::greater(c, m0);
        const auto td = V::greater(d, V::select(tc, c, m0));
        F rest = grad;
        g[3] = V::select(td, rest, V::zero());
        rest = V::select(td, V::zero(), rest);
        g[2] = V::select(tc, rest, V::zero());
        rest = V::select(tc, V::zero(), rest);
        g[1] = V::select(tb, rest, V::zero());
        g[0] = V::select(tb, V::zero(), rest);
    }
    static F window_max(const Window& w) { return max4(w.e0, w.o0, w.e1, w.o1); }
    static F window_mean(const Window& w) { return V::mul(V::add(V::add(V::add(w.e0, w.o0), w.e1), w.o1), V::set1(0.25f)); }

    static void pool_forward(const LayerSpec& l, const float* in, float* out) {
        const int IW = l.in.w, OH = l.out.h, OW = l.out.w;
        const bool max = l.kind == LayerKind::MaxPool;
        for (int c = 0; c < l.out.c; ++c)
            for (int y = 0; y < OH; ++y) {
                const float* r0 = in + (c * l.in.h + 2 * y) * IW;
                for (int x0 = 0; x0 < OW; x0 += N) {
                    const Window w = window(r0 + 2 * x0, r0 + IW + 2 * x0, OW - x0);
                    store_n(out + (c * OH + y) * OW + x0, max ? window_max(w) : window_mean(w), OW - x0);
                }
            }
        activate(l, out, l.out.size());
    }

    // Every input of a window gets d/4 (average), or the first largest gets d (max).
    static void pool_backward(const LayerSpec& l, const float* in, const float* out, const float* dout, float* din) {
        if (!din) return;
        const int IW = l.in.w, OH = l.out.h, OW = l.out.w;
        const bool max = l.kind == LayerKind::MaxPool;
        for (int c = 0; c < l.out.c; ++c)
            for (int y = 0; y < OH; ++y) {
                const float* r0 = in + (c * l.in.h + 2 * y) * IW;
                float* d0 = din + (r0 - in);
                for (int x0 = 0; x0 < OW; x0 += N) {
                    const int at = (c * OH + y) * OW + x0, n = OW - x0;
                    const F d = activation_grad(l, load_n(dout + at, n), load_n(out + at, n));
                    F g[4];  // e0 o0 e1 o1
                    if (max) {
                        const Window w = window(r0 + 2 * x0, r0 + IW + 2 * x0, n);
                        max4_grads(w.e0, w.o0, w.e1, w.o1, d, g);
                    } else {
                        g[0] = g[1] = g[2] = g[3] = V::mul(d, V::set1(0.25f));  // = d / 4 exactly
                    }
                    const int n0 = 2 * n < N ? 2 * n : N, n1 = 2 * n - n0;
                    for (int r = 0; r < 2; ++r) {
                        F lo, hi;
                        V::interleave(g[2 * r], g[2 * r + 1], lo, hi);
                        store_n(d0 + r * IW + 2 * x0, lo, n0);
                        store_n(d0 + r * IW + 2 * x0 + N, hi, n1);
                    }
                }
            }
    }

    // ---- the HostOps table -------------------------------------------------

    // The layers forward_batch and backward_batch take: those that are a matrix.
    static bool batched(const LayerSpec& l) {
        return simd_supports(l) &&
               (l.kind == LayerKind::FullyConnected || (l.kind == LayerKind::Conv && conv_is_dense(l)));
    }

    static void forward_batch(const LayerSpec& l, const float* p, const float* in, float* out, int count) {
        fc_forward(l, p, in, out, count);
    }

    static void backward_batch(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout,
                               float* din, float* g, int count) {
        fc_backward(l, p, in, out, dout, din, g, count);
    }

    static void backward_batch_set(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout,
                                   float* din, float* g, int count) {
        fc_backward(l, p, in, out, dout, din, g, count, true);
    }

    static void forward(const LayerSpec& l, const float* p, const float* in, float* out) {
        if (!simd_supports(l)) return cpu_ops().forward(l, p, in, out);
        if (batched(l)) return fc_forward(l, p, in, out, 1);
        switch (l.kind) {
            case LayerKind::Conv:
                if (l.kernel == 5) return conv_forward_padded<5>(l, p, in, out);
                if (l.kernel == 3) return conv_forward_padded<3>(l, p, in, out);
                break;
            case LayerKind::Subsample: return subsample_forward(l, p, in, out);
            case LayerKind::MaxPool:
            case LayerKind::AvgPool: return pool_forward(l, in, out);
            default: break;
        }
        cpu_ops().forward(l, p, in, out);
    }

    static void backward(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout,
                         float* din, float* g) {
        if (!simd_supports(l)) return cpu_ops().backward(l, p, in, out, dout, din, g);
        if (batched(l)) return fc_backward(l, p, in, out, dout, din, g, 1);
        switch (l.kind) {
            case LayerKind::Conv:
                if (l.kernel == 5) return conv_backward_padded<5>(l, p, in, out, dout, din, g);
                if (l.kernel == 3) return conv_backward_padded<3>(l, p, in, out, dout, din, g);
                break;
            case LayerKind::Subsample: return subsample_backward(l, p, in, out, dout, din, g);
            case LayerKind::MaxPool:
            case LayerKind::AvgPool: return pool_backward(l, in, out, dout, din);
            default: break;
        }
        cpu_ops().backward(l, p, in, out, dout, din, g);
    }

    // update_rule.h's sgd_step on vectors.
    static void update(float* p, float* v, const float* g, size_t n, float lr, float momentum, float weight_decay,
                       bool nesterov) {
        const F m = V::set1(momentum), rate = V::set1(lr), wd = V::set1(weight_decay);
        // The remainder takes the same vector arithmetic, so an element's result does not
        // depend on where a range starts (HostEngine splits the update between threads).
        for (size_t k = 0; k < n; k += N) {
            const int lanes = n - k < N ? static_cast<int>(n - k) : N;
            F pk = load_n(p + k, lanes), vk = load_n(v + k, lanes);
            sgd_step<V>(pk, vk, load_n(g + k, lanes), rate, m, wd, nesterov);
            store_n(v + k, vk, lanes);
            store_n(p + k, pk, lanes);
        }
    }
};

}  // namespace
}  // namespace lenet5
