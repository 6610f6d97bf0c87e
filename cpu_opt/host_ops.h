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

    // Over n parameters: v = momentum*v + g + weight_decay*p; p -= lr*v.
    void (*update)(float* params, float* velocity, const float* grads, size_t n, float lr, float momentum,
                   float weight_decay);

    // Optional (null in `cpu`): forward and backward of one layer over `count` samples in
    // one call (in, out, dout, din are [count][size]), for the layers `batched` accepts.
    // A fully connected layer then reads its weights, and writes its weight gradients,
    // once per call instead of once per sample. HostEngine runs the network's longest
    // tail of such layers this way (LeNet-5: C5, F6, output).
    bool (*batched)(const LayerSpec& layer) = nullptr;
    void (*forward_batch)(const LayerSpec& layer, const float* params, const float* in, float* out, int count) = nullptr;
    void (*backward_batch)(const LayerSpec& layer, const float* params, const float* in, const float* out, float* dout,
                           float* din, float* grads, int count) = nullptr;
};

const HostOps& cpu_ops();

}  // namespace lenet5
