// Which OpenCL engine a network gets, and its work-group size.
#include <iostream>

#include "opencl_backend.h"
#include "opencl_engine.h"
#include "tuning_cache.h"

namespace lenet5 {

std::unique_ptr<Engine> make_opencl_engine(const Network& net, const std::string& variant, int device, int group,
                                           int batch) {
    MemoryVariant memory;
    if (variant == "gpu") memory = MemoryVariant::Global;
    else if (variant == "gpu-constant") memory = MemoryVariant::Constant;
    else if (variant == "gpu-local") memory = MemoryVariant::Local;
    else throw Error("'" + variant + "' is not an OpenCL variant");
    const OpenCLDevice dev = select_opencl_device(device);
    std::string origin = group ? "--group" : "default";
    if (!group && batch > 0) {
        // A broken cache costs the tuning, not the run.
        const std::string path = default_tuning_path();
        try {
            const TuningKey key{dev.platform_name, dev.name, dev.driver, variant, batch};
            if (const auto tuned = find_tuned_group(read_tuning(path), key)) {
                group = *tuned;
                origin = "tuned";
            }
        } catch (const Error& e) {
            std::cerr << "lenet5: warning: " << e.what() << "; using the default work-group size\n";
        }
    }
    return std::make_unique<OpenCLEngine>(net, memory, dev, group, origin);
}

}  // namespace lenet5
