#include "opencl/generic_layers.h"

#include <set>

#include "common/error.h"
#include "model/layers/layer_type.h"
#include "opencl/opencl_kernels.h"

namespace lenet5 {
namespace {

// The arguments set_draw sets: forward's seed, step, first, training and backward's seed, step, first.
constexpr cl_uint kForwardStep = 7, kBackwardStep = 8;

cl_float4 attributes(const LayerSpec& l) {
    if (l.attr.size() > 4) throw Error("layer " + l.name + ": the generic OpenCL kernels take up to 4 settings");
    cl_float4 a{};
    for (size_t i = 0; i < l.attr.size(); ++i) a.s[i] = l.attr[i];
    return a;
}

const LayerSpec& checked(const Network& net, size_t k) {
    const LayerSpec& l = net.layers.at(k);
    if (l.weight_count + l.bias_count > 0 || l.in.size() != l.out.size())
        throw Error(std::string("layer ") + l.name + " (" + kind_name(l.kind) +
                    "): the generic OpenCL kernels take layers without parameters that keep their input's shape");
    return l;
}

std::string kernel_name(const LayerSpec& l, const char* pass) { return std::string(kind_name(l.kind)) + pass; }

cl::NDRange items(const LayerSpec& l, int count, size_t wg) {
    return cl::NDRange(round_up(static_cast<size_t>(l.out.size()), wg), static_cast<size_t>(count));
}

}  // namespace

bool runs_generic(const LayerSpec& l) { return layer_type(l.kind).cl_file != nullptr; }

std::string generic_layer_sources(const Network& net) {
    std::set<std::string> files;
    for (const LayerSpec& l : net.layers)
        if (runs_generic(l)) files.insert(layer_type(l.kind).cl_file);
    if (files.empty()) return "";
    std::string source = opencl_kernel_file("layers/draw.h");
    for (const std::string& f : files) source += opencl_kernel_file(f);
    return source;
}

KernelLaunch generic_forward(const cl::Program& program, const Network& net, size_t k, const cl::Buffer& x,
                             const cl::Buffer& y, int count, size_t wg, uint64_t seed) {
    const LayerSpec& l = checked(net, k);
    const std::string name = kernel_name(l, "_forward");
    return {DeviceRuntime::kernel(program, name.c_str(), x, y, count, l.out.size(), attributes(l),
                                  static_cast<int>(l.activation), layer_draw_seed(seed, k), cl_uint{0}, cl_uint{0}, 0),
            items(l, count, wg), cl::NDRange(wg, 1), l.name + " " + name};
}

KernelLaunch generic_backward(const cl::Program& program, const Network& net, size_t k, const cl::Buffer& x,
                              const cl::Buffer& d, const cl::Buffer& dp, int count, size_t wg, uint64_t seed) {
    const LayerSpec& l = checked(net, k);
    const int in_act = k ? static_cast<int>(net.layers[k - 1].activation) : static_cast<int>(Activation::None);
    const std::string name = kernel_name(l, "_backward");
    return {DeviceRuntime::kernel(program, name.c_str(), x, d, dp, count, l.out.size(), attributes(l), in_act,
                                  layer_draw_seed(seed, k), cl_uint{0}, cl_uint{0}),
            items(l, count, wg), cl::NDRange(wg, 1), l.name + " " + name};
}

void set_draw(cl::Kernel& forward, uint32_t step, uint32_t first, bool training) {
    forward.setArg(kForwardStep, step);
    forward.setArg(kForwardStep + 1, first);
    forward.setArg(kForwardStep + 2, static_cast<int>(training));
}

void set_draw_backward(cl::Kernel& backward, uint32_t step, uint32_t first) {
    backward.setArg(kBackwardStep, step);
    backward.setArg(kBackwardStep + 1, first);
}

}  // namespace lenet5
