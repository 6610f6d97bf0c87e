// The scalar activations of the reference (host/model/layers/, host/conv/conv_reference.cpp), and their
// derivatives from the output y.
#pragma once
#include <cmath>

#include "model/network.h"

namespace lenet5 {

inline float activate(Activation a, float x) {
    switch (a) {
        case Activation::Tanh: return std::tanh(x);
        case Activation::Sigmoid: return 1.0f / (1.0f + std::exp(-x));
        case Activation::ReLU: return x > 0.0f ? x : 0.0f;
        case Activation::None: break;
    }
    return x;
}

// dout (gradient after the activation) becomes the gradient before it.
inline void activation_backward(Activation a, const float* out, float* dout, int n) {
    for (int i = 0; i < n; ++i) {
        const float y = out[i];
        switch (a) {
            case Activation::Tanh: dout[i] *= 1.0f - y * y; break;
            case Activation::Sigmoid: dout[i] *= y * (1.0f - y); break;
            case Activation::ReLU: dout[i] = y > 0.0f ? dout[i] : 0.0f; break;
            case Activation::None: return;
        }
    }
}

}  // namespace lenet5
