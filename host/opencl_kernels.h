// The OpenCL kernels of cl_kernels/, embedded at build time (cmake/embed_kernels.cmake
// generates the definition in the build directory): common.h followed by the .cl files.
#pragma once
#include <string>

namespace lenet5 {

const std::string& opencl_kernel_source();

}  // namespace lenet5
