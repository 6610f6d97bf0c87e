// The batch-level OpenCL path of the layer kinds that bring their own kernels (layers/layer_type.h's
// cl_file, in cl_kernels/layers/): the program source they need and their launches. The kernels of
// a kind `word` are `word_forward` and `word_backward`, with these arguments, over NDRange
// (round_up(n, WG), count), n the units of a sample (the layer keeps its input's shape):
//   word_forward(x, y, count, n, float4 attr, act, seed, step, first, training)
//   word_backward(x, d, dp, count, n, float4 attr, in_act, seed, step, first)
// x: the layer's input [count][n] (the output of the layer below, after its activation), y: its
// output; d: dLoss/d(its output before its activation); dp: dLoss/d(the layer below's output before
// that layer's activation in_act). attr: LayerSpec::attr (up to 4). seed, step, first, training:
// layers/layer_type.h's Draw, sample s of the batch being position first + s of the epoch's order.
#pragma once
#include <cstdint>
#include <string>

#include "model/network.h"
#include "opencl/device_runtime.h"

namespace lenet5 {

// Whether the layer runs on this path (its kind has kernels of its own here).
bool runs_generic(const LayerSpec& l);

// The kernel files the network's generic layers need ("" when none), to append to a program's source.
std::string generic_layer_sources(const Network& net);

// The launches of layer `layer` (index in the network) over `count` samples. Throws Error for a
// layer the path cannot take (parameters, a change of shape, more than 4 settings).
KernelLaunch generic_forward(const cl::Program& program, const Network& net, size_t layer, const cl::Buffer& x,
                             const cl::Buffer& y, int count, size_t wg, uint64_t seed);
KernelLaunch generic_backward(const cl::Program& program, const Network& net, size_t layer, const cl::Buffer& x,
                              const cl::Buffer& d, const cl::Buffer& dp, int count, size_t wg, uint64_t seed);

// Before each run of the launches above: the training step and the batch's first position
// (`training` false: inference, forward only).
void set_draw(cl::Kernel& forward, uint32_t step, uint32_t first, bool training);
void set_draw_backward(cl::Kernel& backward, uint32_t step, uint32_t first);

}  // namespace lenet5
