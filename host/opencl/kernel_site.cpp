#include "opencl/kernel_site.h"

#include <sstream>

#include "opencl/opencl_kernels.h"

namespace lenet5 {
namespace {

void append(std::string& knobs, const std::string& knob) { knobs += (knobs.empty() ? "" : " ") + knob; }

}  // namespace

KernelSite kernel_site(const cl::Kernel& kernel, const cl::Device& device) {
    return cl_checked([&] {
        KernelSite site;
        site.function = kernel.getInfo<CL_KERNEL_FUNCTION_NAME>();
        while (!site.function.empty() && site.function.back() == '\0') site.function.pop_back();
        const auto program = kernel.getInfo<CL_KERNEL_PROGRAM>();
        std::istringstream options(program.getBuildInfo<CL_PROGRAM_BUILD_OPTIONS>(device));
        for (std::string word; options >> word;)
            if (word.rfind("-D", 0) == 0 && word.size() > 2) append(site.knobs, word.substr(2));
        std::istringstream prefix(host_written_prefix(program.getInfo<CL_PROGRAM_SOURCE>()));
        for (std::string line; std::getline(prefix, line);) {
            std::istringstream words(line);
            std::string directive, name, value, rest;
            words >> directive >> name >> value;
            // Only one-line constants: a macro of code ends its line with a backslash.
            if (directive != "#define" || name.empty() || value == "\\" || (words >> rest)) continue;
            append(site.knobs, value.empty() ? name : name + "=" + value);
        }
        return site;
    });
}

}  // namespace lenet5
