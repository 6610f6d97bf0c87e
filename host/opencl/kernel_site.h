// What a launched kernel is, for the map from `--kernel-profile`'s labels to the code
// (`lenet5 kernels`): its OpenCL function, and the knobs its program was compiled with.
#pragma once
#include <string>

#include "opencl/opencl_runtime.h"

namespace lenet5 {

struct KernelSite {
    std::string function;
    // NAME=VALUE (or NAME) of each -D build option, then of each one-line #define the host wrote
    // before the kernel files (the per-sample path's shapes), space-separated.
    std::string knobs;
};

KernelSite kernel_site(const cl::Kernel& kernel, const cl::Device& device);

}  // namespace lenet5
