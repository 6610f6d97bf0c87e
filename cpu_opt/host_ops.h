// The layer operations of the host variants, one sample at a time. `cpu` is the
// plain scalar reference (cpu_ops.cpp); `avx` and `omp` supply the same table.
// HostEngine (host/engine/host_engine.cpp) runs the batch loop over these.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/layers/activation.h"
#include "model/network.h"

namespace lenet5 {

// dst[x] = activate(act, src[x]) for x < n, the branch outside the loop so that each vectorises.
inline void activate_into(const float* src, int n, Activation act, float* dst) {
    if (act == Activation::None)
        for (int x = 0; x < n; ++x) dst[x] = src[x];
    else if (act == Activation::ReLU)
        for (int x = 0; x < n; ++x) dst[x] = src[x] > 0.0f ? src[x] : 0.0f;
    else
        for (int x = 0; x < n; ++x) dst[x] = activate(act, src[x]);
}

struct HostOps {
    // out[layer.out] = activation(layer(in[layer.in])) for one sample.
    void (*forward)(const LayerSpec& layer, const float* params, const float* in, float* out);

    // One sample backward. `dout` holds dLoss/d(out) on entry and may be overwritten.
    // Adds the layer's weight and bias gradients into `grads` (the flat layout) and,
    // unless `din` is null, writes dLoss/d(in).
    void (*backward)(const LayerSpec& layer, const float* params, const float* in, const float* out,
                     float* dout, float* din, float* grads);

    // SGD over n parameters: update_rule.h's sgd_step on each (Adam is update_rule.h's adam_update).
    void (*update)(float* params, float* velocity, const float* grads, size_t n, float lr, float momentum,
                   float weight_decay, bool nesterov);

    // Optional (null in `cpu`): forward and backward of one layer over `count` samples in
    // one call (in, out, dout, din are [count][size]), for the layers `batched` accepts.
    // A fully connected layer then reads its weights, and writes its weight gradients,
    // once per call instead of once per sample. HostEngine runs the network's longest
    // tail of such layers this way (LeNet-5: C5, F6, output).
    bool (*batched)(const LayerSpec& layer) = nullptr;
    void (*forward_batch)(const LayerSpec& layer, const float* params, const float* in, float* out, int count) = nullptr;
    // grads may be null: then no weight or bias gradient is computed (dout still becomes
    // the gradient before the activation, and din is written), for outer_grads/sgd_outer.
    void (*backward_batch)(const LayerSpec& layer, const float* params, const float* in, const float* out, float* dout,
                           float* din, float* grads, int count) = nullptr;

    // Optional: backward_batch that writes the weight and bias gradients instead of adding
    // them: bit for bit backward_batch into zeroed gradients, without zeroing and reading them.
    void (*backward_batch_set)(const LayerSpec& layer, const float* params, const float* in, const float* out,
                               float* dout, float* din, float* grads, int count) = nullptr;

    // Optional: one sample's gradient of a layer `batched` accepts, from its input x and d,
    // the gradient before the activation (dout after backward_batch): gW = d x^T, gb = d,
    // written (not added), with the roundings of backward_batch into zeroed gradients.
    void (*outer_grads)(const LayerSpec& layer, const float* x, const float* d, float* grads) = nullptr;
    // Optional, SGD only: that gradient's step without momentum or weight decay in one pass over
    // the weights: bit for bit outer_grads into g, then update(p, v, g, n, lr, 0, 0) on the
    // layer's range (for finite parameters and velocity; v is not written).
    void (*sgd_outer)(const LayerSpec& layer, float* params, const float* x, const float* d, float lr) = nullptr;

    // Optional (0 and null in `cpu`): the layers before the batched tail over a group of `lanes`
    // samples at once, one per vector lane (cpu_opt/simd_lanes.h): each tensor [C][H][W] of the
    // group is stored [C][H][W][lanes]. forward_lanes and backward_lanes are forward and backward
    // over such tensors, for the layers lanes_supported accepts; backward_lanes adds the group's
    // gradients (summed over its lanes). Lanes no sample fills must hold zeros in the input and
    // in the output gradient.
    // `below` (or null) is the layer whose output `in` is. backward_lanes may take on its
    // activation and bias gradients: then din is written as dLoss/d(below's output before its
    // activation), below's bias gradients are added, and it returns true; below's backward_lanes
    // is then called with `folded` true (its dout already the gradient before its activation,
    // its bias gradients added). Otherwise it returns false.
    int lanes = 0;
    bool (*lanes_supported)(const LayerSpec& layer) = nullptr;
    void (*forward_lanes)(const LayerSpec& layer, const float* params, const float* in, float* out) = nullptr;
    bool (*backward_lanes)(const LayerSpec& layer, const float* params, const float* in, const float* out,
                           float* dout, float* din, float* grads, const LayerSpec* below, bool folded) = nullptr;

    // Optional: the engine's moves into and out of groups of `lanes` (engine/lane_groups.h's
    // to_lanes and from_lanes, engine/preprocess.h's images_to_lanes), bit for bit, by vector
    // transposes. images_to_lanes returns false, writing nothing, where it cannot reproduce
    // `pixel` (each byte's input value) bit for bit; the engine then stages the images itself.
    void (*to_lanes)(const float* samples, int n, size_t size, float* group) = nullptr;
    void (*from_lanes)(const float* group, int n, size_t size, float* samples) = nullptr;
    bool (*images_to_lanes)(const uint8_t* const* images, int n, int rows, int cols, const Shape& input,
                            const InputScaling& scaling, const float* pixel, float* group) = nullptr;
};

const HostOps& cpu_ops();

}  // namespace lenet5
