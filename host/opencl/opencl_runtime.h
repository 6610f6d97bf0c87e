// The OpenCL runtime pieces the engine stands on: device enumeration across all
// platforms, OpenCL errors as lenet5::Error, and building a program from source.
#pragma once
#define CL_HPP_TARGET_OPENCL_VERSION 120
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#define CL_HPP_ENABLE_EXCEPTIONS
#include <CL/opencl.hpp>

#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace lenet5 {

struct OpenCLDevice {
    int index = 0;  // flat over the platforms in their order: the index of `lenet5 devices`
    cl::Platform platform;
    cl::Device device;
    std::string platform_name, name, driver;  // driver: CL_DRIVER_VERSION
    bool is_gpu = false;
    // Debian 12's PoCL 3.1 on an AVX-512 CPU with its default work-group method (loopvec), which
    // miscompiles step.cl's step_run in two work-groups: it reads outside its buffers
    // (docs/correctness.md). The engine runs step_run in one group there.
    bool miscompiles_step_run_groups = false;
};

// Every device of every platform; empty when there is no platform (no ICD installed).
std::vector<OpenCLDevice> opencl_devices();

// Device `index` of opencl_devices(); -1 = the first GPU, else device 0 (under mpirun: the
// machine's GPU of the rank's local rank).
// Throws Error when there is no such device.
OpenCLDevice select_opencl_device(int index);

// CL_OUT_OF_RESOURCES etc. for an OpenCL error code.
std::string cl_error_name(cl_int code);

// An OpenCL failure as the one-line Error the program reports: the error's name and the call.
Error cl_failure(const cl::Error& e);

// Runs f, turning an OpenCL exception into Error (cl_failure).
template <class F>
decltype(auto) cl_checked(F&& f) {
    try {
        return std::forward<F>(f)();
    } catch (const cl::Error& e) {
        throw cl_failure(e);
    }
}

// Compiles `source` for `device` with `options`; a failed build throws Error with the build log.
cl::Program build_program(const cl::Context& context, const cl::Device& device, const std::string& source,
                          const std::string& options);

}  // namespace lenet5
