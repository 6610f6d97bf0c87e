// Variant names -> engines. Which variants exist depends on the build (CMake options).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "conv/conv_shape.h"
#include "engine/engine.h"

namespace lenet5 {

struct EngineRequest {
    std::string variant = "auto";  // cpu, avx, omp, gpu, gpu-constant, gpu-local, or auto
    int device = -1;               // OpenCL device index from `lenet5 devices`; -1 = the first GPU, else the first device
    int threads = 0;               // omp: 0 = OMP_NUM_THREADS or all cores
    int group = 0;                 // OpenCL: items per sample's work-group, a power of two; 0 = tuned or default
    int batch = 0;                 // OpenCL: the training batch, whose tuned group (lenet5 tune) applies; 0 = none
    std::string workers;           // train --workers SPEC (train/training_engine.h); make_engine ignores it
    conv::ConvAlgo conv_algo = conv::ConvAlgo::Auto;  // OpenCL batch-level path: its convolutions' algorithm
    bool inference = false;  // an engine for Engine::infer() alone (no training buffers); OpenCL: the batch-level one
    TrainingRule rule;       // Nesterov momentum, label smoothing (train --nesterov, --label-smoothing)
};

// Every variant name the program knows, built or not, in one table (the commands' checks, `--version`).
const std::vector<std::string>& known_variants();
// The variants compiled into this build.
std::vector<std::string> built_variants();
// The variants that run on an OpenCL device, in opencl_engine_base.h's MemoryVariant order.
const std::vector<std::string>& opencl_variants();
bool is_opencl_variant(const std::string& variant);
// "a, b, c", for messages.
std::string listed(const std::vector<std::string>& names);

// `variant` with `auto` resolved (gpu-local on the first GPU of any platform, else omp, else cpu).
std::string resolve_variant(const std::string& variant);
// cpu, avx and omp: the variants that run on the host and build no OpenCL kernels.
bool is_host_variant(const std::string& variant);

// Resolves `auto` (gpu-local on the first GPU of any platform, else omp, else cpu) and builds
// the engine. Throws UsageError for an unknown name and Error for a variant this build or
// machine lacks, or for label smoothing on a network without a softmax cross-entropy loss.
std::unique_ptr<Engine> make_engine(const Network& net, const EngineRequest& request);

}  // namespace lenet5
