// The layer operations of the host variants, one sample at a time. `cpu` is the
// plain scalar reference (cpu_ops.cpp); `avx` and `omp` supply the same table.
// HostEngine (host/host_engine.cpp) runs the batch loop over these.
#pragma once
#include <cstddef>

#include "network.h"

namespace lenet5 {

struct HostOps {
    // out[layer.out] = activation(layer(in[layer.in])) for one sample.
    void (*forward)(const LayerSpec& layer, const float* params, const float* in, float* out);

    // One sample backward. `dout` holds dLoss/d(out) on entry and may be overwritten.
    // Adds the layer's weight and bias gradients into `grads` (the flat layout) and,
    // unless `din` is null, writes dLoss/d(in).
    void (*backward)(const LayerSpec& layer, const float* params, const float* in, const float* out,
                     float* dout, float* din, float* grads);

    // Over n parameters: v = momentum*v + g; p -= lr*v.
    void (*update)(float* params, float* velocity, const float* grads, size_t n, float lr, float momentum);
};

const HostOps& cpu_ops();

}  // namespace lenet5
