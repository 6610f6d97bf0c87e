// The OpenCL kernels of cl_kernels/, embedded at build time (cmake/embed_kernels.cmake
// generates the definition in the build directory): common.h followed by the .cl files.
#pragma once
#include <string>

#include "common/error.h"

namespace lenet5 {

const std::string& opencl_kernel_source();

// One file of the embedded source: cmake/embed_kernels.cmake puts each after a line
// #line 1 "name". The batch-level engines compile their own files, not the per-sample kernels,
// which need the network's #defines.
inline std::string opencl_kernel_file(const std::string& name) {
    const std::string& all = opencl_kernel_source();
    const std::string marker = "#line 1 \"" + name + "\"\n";
    const size_t begin = all.find(marker);
    if (begin == std::string::npos) throw Error("the embedded OpenCL source lacks " + name);
    const size_t end = all.find("#line 1 \"", begin + marker.size());
    return all.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

}  // namespace lenet5
