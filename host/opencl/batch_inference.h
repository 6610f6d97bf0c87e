// Engine::infer of the batch-level OpenCL engine (opencl_batch_engine.h): the forward pass alone
// over float inputs, a launch per layer (or a few), the launch sequence `lenet5 infer`'s OpenCL
// runner ran on ONNX graphs:
//   - convolutions whose maps read every input map: host/conv's OpenCLConv; under the algorithms
//     auto and winograd, shapes it takes by Winograd F(4x4, 3x3) run forward_winograd on filters
//     transformed once per parameter change, the others forward() with the engine's algorithm
//     (auto: what OpenCLConv picks for the shape), bias and activation fused;
//   - convolutions with a connection table (and all of them under the algorithm own) and
//     subsamplings: batch_layers.cl's conv_forward and subsample_forward;
//   - pooling: batch_layers.cl's pool_forward;
//   - fully connected layers: infer.cl's infer_dense, 16 samples per launch (each weight row read
//     once per 16 samples: a GEMV, not a GEMM, at small batches).
// The weights are the engine's views of its parameter buffer, so every launch reads the current
// parameters; only the Winograd filters are copies, transformed again after params_changed().
// The activations alternate between two buffers sized for the largest batch so far; the launches
// of each batch size are planned once. A run writes the inputs once and reads the outputs once.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "conv/opencl_conv.h"
#include "model/network.h"
#include "opencl/device_runtime.h"

namespace lenet5 {

// Whether inference runs convolution `l` on the engine's own conv_forward rather than OpenCLConv:
// one with a connection table, or any under the algorithm own.
inline bool inference_runs_own_conv(const LayerSpec& l, conv::ConvAlgo algo) {
    return l.connections() != l.in.c * l.out.c || algo == conv::ConvAlgo::Own;
}

class BatchInference {
public:
    // A layer's parameters (views of the engine's parameter buffer) and, for a convolution, its
    // connection table as batch_layers.cl takes it (network.h's conn_begin and conn_in).
    struct LayerBuffers {
        cl::Buffer weights, bias, conn_begin, conn_in;
    };

    // program: batch_layers.cl and infer.cl, built for the engine's variant; conv: the engine's,
    // which outlives this; wg: the element-wise kernels' work-group size.
    BatchInference(const Network& net, std::shared_ptr<DeviceRuntime> runtime, cl::Program program,
                   std::vector<LayerBuffers> layers, conv::OpenCLConv& conv, conv::ConvAlgo algo, size_t wg);

    // The parameters changed on the device: the next run transforms the Winograd filters first.
    void params_changed() { filters_stale_ = true; }

    // Engine::infer: waits for the outputs; layer_ms (one entry per layer) gets each layer's device
    // time from its launches' profiling events.
    void run(const float* inputs, int count, float* outputs, std::vector<double>* layer_ms);

private:
    using Plan = std::vector<std::vector<KernelLaunch>>;  // by layer

    void grow(int count);
    Plan plan(int count);
    // Convolution k's transformed filters, made (and their transform planned) on first use.
    const cl::Buffer& winograd_filters(size_t k, const conv::ConvShape& shape);

    const Network& net_;
    std::shared_ptr<DeviceRuntime> rt_;
    cl::Program program_;
    std::vector<LayerBuffers> layers_;
    conv::OpenCLConv& conv_;
    conv::ConvAlgo algo_;
    size_t wg_;

    int capacity_ = 0;                // samples the activation buffers hold
    cl::Buffer acts_[2];              // layer k reads acts_[k % 2] and writes acts_[(k + 1) % 2]
    std::map<int, Plan> plans_;       // by batch size, for buffers of capacity_
    std::vector<cl::Buffer> filters_; // by layer: Winograd's transformed filters, or none
    std::vector<KernelLaunch> transforms_;  // what fills filters_ from the parameters
    bool filters_stale_ = true;
};

}  // namespace lenet5
