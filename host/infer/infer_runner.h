// Runs an InferGraph over batches: the host variants (infer_host.cpp: `cpu`, the scalar
// reference, and `omp`, im2col + GEMM on OpenMP threads) and the OpenCL variants
// (infer_opencl.cpp: every op on the device, the weights uploaded once, activations kept there).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "conv/conv_shape.h"
#include "infer/infer_graph.h"

namespace lenet5 {

struct InferRequest {
    std::string variant = "auto";  // cpu, omp, gpu, gpu-constant, gpu-local (auto: gpu-local on a GPU, else omp)
    int device = -1;              // OpenCL device index; -1: the first GPU, else the first device
    int threads = 0;              // omp: 0 = OMP_NUM_THREADS or all cores
    int batch = 1;                // the largest batch run() is given
    conv::ConvAlgo conv_algo = conv::ConvAlgo::Auto;  // OpenCL: the convolution algorithm (host/conv)
};

class InferRunner {
public:
    virtual ~InferRunner() = default;
    virtual std::string variant() const = 0;
    virtual std::string device() const = 0;
    // out[count][output size] from in[count][input size], count <= the request's batch.
    virtual void run(const float* in, int count, float* out) = 0;
    // Milliseconds spent in each of the graph's ops over every run so far (OpenCL: device time
    // from event profiling; host: a steady clock around each op).
    virtual std::vector<double> op_ms() const = 0;
};

// The runner keeps a reference to `graph`, which must outlive it.
// Throws UsageError for an unknown variant, Error for one this build or machine lacks.
std::unique_ptr<InferRunner> make_infer_runner(const InferGraph& graph, const InferRequest& request);

std::unique_ptr<InferRunner> make_host_runner(const InferGraph& graph, const InferRequest& request);
#ifdef LENET5_HAVE_OPENCL
std::unique_ptr<InferRunner> make_opencl_runner(const InferGraph& graph, const InferRequest& request);
#endif

}  // namespace lenet5
