// The update rule of the host variants, in one place: SGD (momentum, Nesterov, L2 weight decay) and
// Adam / AdamW as PyTorch's torch.optim.Adam / AdamW compute them. cl_kernels/update_rule.h is the
// OpenCL one, the same arithmetic.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "model/optimizer.h"

namespace lenet5 {

// SGD on one parameter p and its velocity v, g its gradient: v = momentum*v + g + weight_decay*p;
// p -= lr*v, or with `nesterov` p -= lr*(g + weight_decay*p + momentum*v) with the new v.
// `A` is the arithmetic: fma(a, b, c) = a*b + c, fnma(a, b, c) = c - a*b, on T (ScalarMath's two
// roundings for `cpu`, the SIMD vectors' fused ones in simd_layers.h).
template <class A, class T>
inline void sgd_step(T& p, T& v, T g, T lr, T momentum, T weight_decay, bool nesterov) {
    const T gw = A::fma(weight_decay, p, g);
    v = A::fma(momentum, v, gw);
    p = A::fnma(lr, nesterov ? A::fma(momentum, v, gw) : v, p);
}

struct ScalarMath {
    static float fma(float a, float b, float c) { return a * b + c; }
    static float fnma(float a, float b, float c) { return c - a * b; }
};

// What one Adam or AdamW update computes with, rounded to float as PyTorch rounds its scalars.
struct AdamStep {
    float one_minus_beta1, beta2, one_minus_beta2, eps;
    float step_size, bias2_sqrt;  // lr / (1 - beta1^t) and sqrt(1 - beta2^t), t the 1-based update count
    float weight_decay, decay;    // Adam: L2 into the gradient, decay 1; AdamW: 0, and p *= 1 - lr*wd
};

inline AdamStep adam_step(Optimizer optimizer, float beta1, float beta2, float eps, float lr, float weight_decay,
                          int64_t t) {
    const bool decoupled = optimizer == Optimizer::AdamW;
    const double b1 = beta1, b2 = beta2, n = static_cast<double>(t);
    return {static_cast<float>(1.0 - b1),
            beta2,
            static_cast<float>(1.0 - b2),
            eps,
            static_cast<float>(lr / (1.0 - std::pow(b1, n))),
            static_cast<float>(std::sqrt(1.0 - std::pow(b2, n))),
            decoupled ? 0.0f : weight_decay,
            decoupled ? static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay) : 1.0f};
}

// Adam on one parameter p, its first and second moments m and v, g its gradient (torch's
// single-tensor step: m by lerp, v by addcmul, p by addcdiv).
inline void adam_param(float& p, float& m, float& v, float g, const AdamStep& a) {
    g += a.weight_decay * p;
    p *= a.decay;
    m += a.one_minus_beta1 * (g - m);
    v = v * a.beta2 + a.one_minus_beta2 * g * g;
    p -= a.step_size * (m / (std::sqrt(v) / a.bias2_sqrt + a.eps));
}

// adam_param over n parameters (update_rule.cpp: compiled so that the loop vectorises).
void adam_update(float* p, float* m, float* v, const float* g, size_t n, const AdamStep& a);

}  // namespace lenet5
