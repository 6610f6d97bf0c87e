#include "infer/infer_runner.h"

#include "common/error.h"
#ifdef LENET5_HAVE_OPENCL
#include "opencl/opencl_runtime.h"
#endif

namespace lenet5 {

std::unique_ptr<InferRunner> make_infer_runner(const InferGraph& graph, const InferRequest& request) {
    InferRequest r = request;
    if (r.variant == "auto") {
#ifdef LENET5_HAVE_OPENCL
        bool gpu = false;
        for (const auto& d : opencl_devices()) gpu = gpu || d.is_gpu;
        r.variant = gpu ? "gpu-local" : "omp";
#else
        r.variant = "omp";
#endif
    }
    if (r.variant == "cpu" || r.variant == "avx" || r.variant == "omp") return make_host_runner(graph, r);
    if (r.variant == "gpu" || r.variant == "gpu-constant" || r.variant == "gpu-local") {
#ifdef LENET5_HAVE_OPENCL
        return make_opencl_runner(graph, r);
#else
        throw Error("variant " + r.variant + ": this build has no OpenCL support");
#endif
    }
    throw UsageError("--variant: unknown variant '" + r.variant + "' (cpu, avx, omp, gpu, gpu-constant, gpu-local, auto)");
}

}  // namespace lenet5
