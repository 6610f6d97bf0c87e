// Which OpenCL engine a network gets, and its work-group size.
#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "engine/engine_factory.h"
#include "opencl/opencl_backend.h"
#include "opencl/opencl_batch_engine.h"
#include "opencl/opencl_engine.h"
#include "opencl/opencl_program.h"
#include "opencl/tuning_cache.h"

namespace lenet5 {
namespace {

// Whether the per-sample engine runs `net` on `rt`'s device with `memory` at its default work-group
// size: sample_program() accepts the network's form, and what the variant keeps in __local or
// __constant memory (a sample's work area and the pairs' parameters) fits the device.
bool per_sample_fits(const Network& net, MemoryVariant memory, const DeviceRuntime& rt) {
    return cl_checked([&] {
        const int group = static_cast<int>(floor_pow2(std::min<size_t>(256, rt.max_group())));
        const int grad_params = std::min(32, group);
        if (!sample_refusal(net).empty()) return false;
        const DeviceLayout layout(net, rt.align_floats());
        const SampleProgram sample =
            sample_program(net, layout, group, std::min(group, 32), grad_params, group / grad_params);
        const size_t work = std::max(sample.forward_work, sample.backward_work);
        if (memory == MemoryVariant::Local) return (work + sample.run_floats) * sizeof(float) <= rt.local_memory();
        if (memory == MemoryVariant::Constant)
            return sample.run_floats * sizeof(float) <= rt.cl_device().getInfo<CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE>();
        return true;
    });
}

MemoryVariant memory_variant(const std::string& variant) {
    const auto& names = opencl_variants();
    const auto it = std::find(names.begin(), names.end(), variant);
    if (it == names.end()) throw Error("'" + variant + "' is not an OpenCL variant");
    return static_cast<MemoryVariant>(it - names.begin());
}

}  // namespace

std::unique_ptr<Engine> make_opencl_engine(const Network& net, const std::string& variant, int device, int group,
                                           int batch, conv::ConvAlgo conv_algo, bool inference,
                                           const TrainingRule& rule) {
    const MemoryVariant memory = memory_variant(variant);
    auto rt = std::make_shared<DeviceRuntime>(select_opencl_device(device));
    const OpenCLDevice& dev = rt->device();
    // LENET5_OPENCL_PATH=batch|sample forces one path, for experiments and comparisons.
    const char* env = std::getenv("LENET5_OPENCL_PATH");
    const std::string path = env ? env : "";
    if (!path.empty() && path != "batch" && path != "sample")
        throw Error("LENET5_OPENCL_PATH is '" + path + "'; it takes batch or sample");
    // Inference runs on the batch-level engine: the per-sample one fuses each sample's training step.
    if (inference || path == "batch" || (path.empty() && !per_sample_fits(net, memory, *rt)))
        return std::make_unique<OpenCLBatchEngine>(net, memory, std::move(rt), conv_algo, inference, rule);
    std::string origin = group ? "--group" : "default", knobs;
    if (!group && batch > 0) {
        // A broken cache costs the tuning, not the run.
        const std::string cache = default_tuning_path();
        try {
            const TuningKey key{dev.platform_name, dev.name, dev.driver, variant, batch, net.name};
            if (const auto tuned = find_tuning(read_tuning(cache), key)) {
                knob_options(tuned->knobs);  // throws for a knob these kernels do not have
                group = tuned->group;
                knobs = tuned->knobs;
                origin = "tuned";
            }
        } catch (const Error& e) {
            std::cerr << "lenet5: warning: " << e.what() << "; using the default work-group size and knobs\n";
        }
    }
    return std::make_unique<OpenCLEngine>(net, memory, std::move(rt), group, origin, knobs, rule);
}

std::unique_ptr<Engine> make_sample_engine(const Network& net, const std::string& variant, int device, int group,
                                           const std::string& knobs) {
    auto rt = std::make_shared<DeviceRuntime>(select_opencl_device(device));
    return std::make_unique<OpenCLEngine>(net, memory_variant(variant), std::move(rt), group, "tune", knobs);
}

}  // namespace lenet5
