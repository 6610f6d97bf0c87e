#include "engine_factory.h"

#include <algorithm>

#include "error.h"
#include "host_engine.h"

namespace lenet5 {

const std::vector<std::string>& known_variants() {
    static const std::vector<std::string> names{"cpu", "avx", "omp", "gpu", "gpu-constant", "gpu-local"};
    return names;
}

std::vector<std::string> built_variants() { return {"cpu"}; }

static std::string resolve_auto() {
    const auto built = built_variants();
    for (const char* v : {"omp", "cpu"})
        if (std::find(built.begin(), built.end(), v) != built.end()) return v;
    return "cpu";
}

std::unique_ptr<Engine> make_engine(const Network& net, const EngineRequest& request) {
    const std::string variant = request.variant == "auto" ? resolve_auto() : request.variant;
    const auto& known = known_variants();
    if (std::find(known.begin(), known.end(), variant) == known.end())
        throw UsageError("unknown variant '" + variant + "' (choose from auto, cpu, avx, omp, gpu, gpu-constant, gpu-local)");
    if (variant == "cpu") return std::make_unique<HostEngine>(net, "cpu", cpu_ops(), 1);
    throw Error("variant '" + variant + "' is not built into this binary (built: cpu)");
}

}  // namespace lenet5
