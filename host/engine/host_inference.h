// The forward pass of the host variants over a batch, for inference (Engine::infer), layer by
// layer over the whole batch. `cpu` runs every layer through the training code's per-sample
// operations (cpu_ops()), so its outputs are its training forward's bit for bit. `avx` (one
// thread) and `omp` (several) compute the convolutions with a full connection table by
// Winograd F(4x4, 3x3) (winograd_host.h: 3x3 at stride 1 over at least 16 input maps), a GEMM
// per tap (other kernels at stride 1 over that many), row by row (conv_rows_host.h: fewer input
// maps) or im2col + GEMM (other strides); fully connected layers as GEMMs over blocks of units
// and pooling over the maps, each spread over OpenMP threads in blocks; the other layers
// (subsampling, convolutions with a partial table such as LeNet-5's C3) through the engine's
// per-sample operations, the samples spread over the threads. The GEMM is OpenBLAS's, one thread
// per call, when the build has it, else a plain loop.
#pragma once
#include <vector>

#include "host_ops.h"
#include "model/network.h"

namespace lenet5 {

class HostInference {
public:
    // For batches of up to `batch` samples of `net`, which must outlive it; `fast` for avx and
    // omp (else every layer runs through `ops` per sample), on `threads` threads.
    HostInference(const Network& net, const HostOps& ops, bool fast, int threads, int batch);

    int batch() const { return batch_; }

    // Recomputes the filters the fast paths keep (Winograd-transformed, tap-major) from `params`
    // (the flat layout of network.h): needed after every change of the parameters.
    void load(const float* params);

    // outputs [count][last layer's out.size()] from inputs [count][net.input.size()], count <=
    // batch(), with `params` (the ones load() was last given). Adds each layer's milliseconds
    // (a steady clock) to (*layer_ms)[layer] when layer_ms is not null.
    void run(const float* params, const float* inputs, int count, float* outputs, std::vector<double>* layer_ms);

    // How a layer is computed.
    enum class Path { PerSample, Winograd, Shifted, Rows, Im2col, Dense, Pool };
    Path path(size_t layer) const { return path_[layer]; }

private:
    // Work items over (sample, block, block of output maps): the maps are split, into at most
    // max_mblocks, only when the samples' blocks are too few to give every thread one.
    struct Items {
        int blocks, mblocks, mb, items;
        int sample(int item) const { return item / (blocks * mblocks); }
        int block(int item) const { return item / mblocks % blocks; }
        int map0(int item) const { return item % mblocks * mb; }
    };
    Items split(int blocks, int count, int maps, int max_mblocks) const;
    int wino_blocks(int tiles, int count) const;
    float* thread_scratch();
    size_t plan(size_t k);  // path_[k]; returns the floats of scratch per thread it needs

    void step(size_t k, const float* params, const float* x, float* y, int count);
    void per_sample(const LayerSpec& l, const float* params, const float* x, float* y, int count);
    void conv_winograd(size_t k, const float* params, const float* x, float* y, int count);
    void conv_shifted(size_t k, const float* params, const float* x, float* y, int count);
    void conv_by_rows(const LayerSpec& l, const float* params, const float* x, float* y, int count);
    void conv_im2col(const LayerSpec& l, const float* params, const float* x, float* y, int count);
    void dense(const LayerSpec& l, const float* params, const float* x, float* y, int count);
    void pool(const LayerSpec& l, const float* x, float* y, int count);

    const Network& net_;
    const HostOps& ops_;
    int threads_, batch_;
    std::vector<Path> path_;                    // per layer
    std::vector<std::vector<float>> filters_;   // per layer: a Winograd or Shifted conv's weights as it reads them
    std::vector<float> acts_[2];                // the layers' outputs but the last, alternating: [batch][size]
    std::vector<std::vector<float>> scratch_;   // per thread
    std::vector<float> padded_;                 // Shifted: the zero-padded input of the batch
};

}  // namespace lenet5
