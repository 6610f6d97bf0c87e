// Winograd's minimal filtering along a row, for the lane layers' 5x5 convolutions
// (simd_lanes_winograd.h): a tile of M outputs from M + 4 inputs takes P = M + 4 products a
// kernel row in place of 5M. In one dimension, for the tile's inputs d and a kernel row g,
//     y = A^T [(G g) * (B^T d)]        (M outputs; * elementwise over the P points)
// is exactly the correlation y[m] = sum_k g[k] d[m + k] in real arithmetic; in floats the
// rounding differs from the direct sum's (the tests hold it to the `cpu` reference). Each tile
// gives the passes its P x 5 matrix G (as kGT, by tap) and four transforms: B^T d, its
// transpose B v (the input gradient), A^T m (the outputs) and A y (the output gradient).
//
// Two tiles: F(4,5) on 8 points (C1's rows of 28, and most widths), F(5,5) on 9 (C3's rows of
// 10: 2 tiles and 18 points a row in place of F(4,5)'s 3 tiles and 24, and no padding).
//
// Include only through simd_lane_layers.h.
#pragma once
#include <utility>

#include "simd_layers.h"

namespace lenet5 {
namespace {

// F(4,5): the points 0, +-1, +-2, +-1/2 and infinity (B^T is the common F(6,3)'s, G carries the
// fractions), in the order 0, 1, -1, 1/2, -1/2, 2, -2, infinity.
template <class V>
struct WinogradF45 {
    using F = typename V::F;
    static constexpr int K = 5, M = 4, P = 8;  // kernel width, outputs a tile, points a tile

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

};

// F(5,5): the points +-1, +-1/2, +-2, +-1/4 and infinity, in pairs (+a, -a) then infinity, the
// tables derived by winograd_points.py. The 9th point costs about twice F(4,5)'s float error (a
// C3-like sum of 4 connections drawn at random: 2.7 -> 5.9 times the direct sum's error; 0 in
// place of a pair, or +-1/3, +-3/2, +-3, cost more; on LeNet-5's C3 against `cpu`, 4.5e-7 ->
// 8.6e-7 relative in the forward, 6.9e-7 -> 1.4e-6 in the input gradient, where the tests allow
// 1e-5). With the points in symmetric pairs every transform splits into the sums over the even
// and the odd inputs (x^k is even or odd in a): the rows of +a and -a are E + O and E - O, about
// half the products of the matrices as they stand.
template <class V>
struct WinogradF55 {
    using F = typename V::F;
    static constexpr int K = 5, M = 5, P = 9;

    static constexpr float kGT[K][P] = {
        {32.0f / 135, 32.0f / 135, -256.0f / 135, -256.0f / 135, -16.0f / 2835, -16.0f / 2835, 8192.0f / 2835, 8192.0f / 2835, 0.0f},
        {32.0f / 135, -32.0f / 135, -128.0f / 135, 128.0f / 135, -32.0f / 2835, 32.0f / 2835, 2048.0f / 2835, -2048.0f / 2835, 0.0f},
        {32.0f / 135, 32.0f / 135, -64.0f / 135, -64.0f / 135, -64.0f / 2835, -64.0f / 2835, 512.0f / 2835, 512.0f / 2835, 0.0f},
        {32.0f / 135, -32.0f / 135, -32.0f / 135, 32.0f / 135, -128.0f / 2835, 128.0f / 2835, 128.0f / 2835, -128.0f / 2835, 0.0f},
        {32.0f / 135, 32.0f / 135, -16.0f / 135, -16.0f / 135, -256.0f / 2835, -256.0f / 2835, 32.0f / 2835, 32.0f / 2835, 1.0f},
    };
    static constexpr int kPairs = 4;
    // B^T's row of the pair's +a: kBEven on the inputs 0, 2, 4, 6 and kBOdd on 1, 3, 5, 7 (the
    // row of -a is the even part minus the odd); infinity's row, kBInf, on 0, 2, 4, 6, 8.
    static constexpr float kBEven[kPairs][4] = {{1.0f / 16, -81.0f / 64, 69.0f / 16, -1.0f},
                                                {1.0f / 8, -69.0f / 32, 81.0f / 32, -1.0f / 2},
                                                {1.0f / 32, -21.0f / 32, 21.0f / 8, -2.0f},
                                                {1.0f / 4, -21.0f / 16, 21.0f / 16, -1.0f / 4}};
    static constexpr float kBOdd[kPairs][4] = {{1.0f / 16, -81.0f / 64, 69.0f / 16, -1.0f},
                                               {1.0f / 4, -69.0f / 16, 81.0f / 16, -1.0f},
                                               {1.0f / 64, -21.0f / 64, 21.0f / 16, -1.0f},
                                               {1.0f, -21.0f / 4, 21.0f / 4, -1.0f}};
    static constexpr float kBInf[5] = {1.0f / 16, -85.0f / 64, 357.0f / 64, -85.0f / 16, 1.0f};
    // A^T's columns of +a: a^j for the outputs j (those of -a are (-a)^j); infinity adds to the last.
    static constexpr float kAT[M][kPairs] = {{1.0f, 1.0f, 1.0f, 1.0f},
                                             {1.0f, 1.0f / 2, 2.0f, 1.0f / 4},
                                             {1.0f, 1.0f / 4, 4.0f, 1.0f / 16},
                                             {1.0f, 1.0f / 8, 8.0f, 1.0f / 64},
                                             {1.0f, 1.0f / 16, 16.0f, 1.0f / 256}};

    // sum over k < n of coef(k) * x[k]: the coefficients are constants, so that after unrolling
    // the zeros drop out and the ones become adds.
    template <int n, class Coef>
    static F dot(Coef coef, const F* x) {
        F s = V::zero();
        bool first = true;
        LENET5_UNROLL for (int k = 0; k < n; ++k) {
            const float c = coef(k);
            if (c == 0.0f) continue;
            if (first) s = c == 1.0f ? x[k] : V::mul(V::set1(c), x[k]);
            else s = c == 1.0f ? V::add(s, x[k]) : c == -1.0f ? V::sub(s, x[k]) : V::fma(V::set1(c), x[k], s);
            first = false;
        }
        return s;
    }

    // v = B^T d.
    static void input_transform(const F* d, F* v) {
        const F even[5] = {d[0], d[2], d[4], d[6], d[8]}, odd[4] = {d[1], d[3], d[5], d[7]};
        LENET5_UNROLL for (int q = 0; q < kPairs; ++q) {
            const F e = dot<4>([q](int k) { return kBEven[q][k]; }, even);
            const F o = dot<4>([q](int k) { return kBOdd[q][k]; }, odd);
            v[2 * q] = V::add(e, o);
            v[2 * q + 1] = V::sub(e, o);
        }
        v[8] = dot<5>([](int k) { return kBInf[k]; }, even);
    }

    // d = B v.
    static void input_transform_t(const F* v, F* d) {
        F sums[kPairs + 1], diffs[kPairs];
        LENET5_UNROLL for (int q = 0; q < kPairs; ++q) {
            sums[q] = V::add(v[2 * q], v[2 * q + 1]);
            diffs[q] = V::sub(v[2 * q], v[2 * q + 1]);
        }
        sums[kPairs] = v[8];
        LENET5_UNROLL for (int k = 0; k < 4; ++k) {
            d[2 * k] = dot<kPairs + 1>([k](int q) { return q < kPairs ? kBEven[q][k] : kBInf[k]; }, sums);
            d[2 * k + 1] = dot<kPairs>([k](int q) { return kBOdd[q][k]; }, diffs);
        }
        d[8] = v[8];
    }

    // y = A^T m.
    static void output_transform(const F* m, F* y) {
        F sums[kPairs], diffs[kPairs];
        LENET5_UNROLL for (int q = 0; q < kPairs; ++q) {
            sums[q] = V::add(m[2 * q], m[2 * q + 1]);
            diffs[q] = V::sub(m[2 * q], m[2 * q + 1]);
        }
        LENET5_UNROLL for (int j = 0; j < M; ++j) y[j] = dot<kPairs>([j](int q) { return kAT[j][q]; }, j % 2 ? diffs : sums);
        y[M - 1] = V::add(y[M - 1], m[8]);
    }

    // m = A y.
    static void output_transform_t(const F* y, F* m) {
        const F even[3] = {y[0], y[2], y[4]}, odd[2] = {y[1], y[3]};
        LENET5_UNROLL for (int q = 0; q < kPairs; ++q) {
            const F e = dot<3>([q](int j) { return kAT[2 * j][q]; }, even);
            const F o = dot<2>([q](int j) { return kAT[2 * j + 1][q]; }, odd);
            m[2 * q] = V::add(e, o);
            m[2 * q + 1] = V::sub(e, o);
        }
        m[8] = y[M - 1];
    }
};

}  // namespace
}  // namespace lenet5
