// Which of the lane code's algorithms takes a layer (HostOps::forward_lanes, backward_lanes).
//
// Include only from simd_avx2.cpp and simd_avx512.cpp (simd_layers.h's rules hold here).
#pragma once
#include "simd_lanes_winograd_alone.h"

namespace lenet5 {
namespace {

// The HostOps entries of the lane layers: LaneWinograd where it pays (several connections an
// output map) by the tile with fewer products a row (F(5,5) on C3's rows of 10, else F(4,5)),
// LaneWinogradAlone for one connection a map (its forward, and its weight gradient where no
// input gradient is asked), else SimdLanes' direct ones.
template <class V>
struct LaneLayers {
    using W = LaneWinograd<V, WinogradF45<V>>;
    using W5 = LaneWinograd<V, WinogradF55<V>>;
    using D = SimdLanes<V>;
    using A = LaneWinogradAlone<V>;
    static bool five(const LayerSpec& l) { return W5::pays(l) && W5::row_points(l) < W::row_points(l); }
    static void forward(const LayerSpec& l, const float* params, const float* in, float* out) {
        if (five(l)) return W5::forward(l, params, in, out);
        if (W::pays(l)) return W::forward(l, params, in, out);
        if (A::pays(l)) return A::forward(l, params, in, out);
        D::forward(l, params, in, out);
    }
    static bool backward(const LayerSpec& l, const float* params, const float* in, const float* out, float* dout,
                         float* din, float* grads, const LayerSpec* below, bool folded) {
        if (five(l)) return W5::backward(l, params, in, out, dout, din, grads, below, folded);
        if (W::pays(l)) return W::backward(l, params, in, out, dout, din, grads, below, folded);
        if (A::pays(l) && !din) {
            A::weight_grads(l, in, out, dout, grads, folded);
            return false;
        }
        return D::backward(l, params, in, out, dout, din, grads, below, folded);
    }
};

}  // namespace
}  // namespace lenet5
