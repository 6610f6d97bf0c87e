#include "engine/engine_factory.h"

#include <algorithm>
#include <thread>

#include "common/error.h"
#include "engine/host_engine.h"
#ifdef LENET5_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef LENET5_HAVE_SIMD
#include "simd_ops.h"
#endif
#ifdef LENET5_HAVE_OPENCL
#include "opencl/opencl_backend.h"
#endif

namespace lenet5 {

namespace {

struct Variant {
    const char* name;
    bool opencl, built;
};

#ifdef LENET5_HAVE_SIMD
constexpr bool kSimd = true;
#else
constexpr bool kSimd = false;
#endif
#ifdef LENET5_HAVE_OPENMP
constexpr bool kOpenMP = true;
#else
constexpr bool kOpenMP = false;
#endif
#ifdef LENET5_HAVE_OPENCL
constexpr bool kOpenCL = true;
#else
constexpr bool kOpenCL = false;
#endif

// The one table of variants.
constexpr Variant kVariants[] = {
    {"cpu", false, true},           {"avx", false, kSimd},         {"omp", false, kSimd && kOpenMP},
    {"gpu", true, kOpenCL},         {"gpu-constant", true, kOpenCL}, {"gpu-local", true, kOpenCL},
};

std::vector<std::string> names_of(bool (*keep)(const Variant&)) {
    std::vector<std::string> names;
    for (const Variant& v : kVariants)
        if (keep(v)) names.push_back(v.name);
    return names;
}

}  // namespace

const std::vector<std::string>& known_variants() {
    static const std::vector<std::string> names = names_of([](const Variant&) { return true; });
    return names;
}

std::vector<std::string> built_variants() { return names_of([](const Variant& v) { return v.built; }); }

const std::vector<std::string>& opencl_variants() {
    static const std::vector<std::string> names = names_of([](const Variant& v) { return v.opencl; });
    return names;
}

bool is_opencl_variant(const std::string& variant) {
    const auto& v = opencl_variants();
    return std::find(v.begin(), v.end(), variant) != v.end();
}

std::string listed(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
}

namespace {

bool built(const std::string& variant) {
    const auto v = built_variants();
    return std::find(v.begin(), v.end(), variant) != v.end();
}

// auto: gpu-local on the first GPU of any platform, else omp, else cpu.
std::string resolve_auto() {
#ifdef LENET5_HAVE_OPENCL
    if (opencl_gpu_available()) return "gpu-local";
#endif
#ifdef LENET5_HAVE_SIMD
    if (built("omp") && simd_ops()) return "omp";
#endif
    return "cpu";
}

#ifdef LENET5_HAVE_SIMD
int default_threads() {
#ifdef LENET5_HAVE_OPENMP
    return omp_get_max_threads();  // honours OMP_NUM_THREADS
#else
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
#endif
}
#endif

}  // namespace

std::string resolve_variant(const std::string& variant) { return variant == "auto" ? resolve_auto() : variant; }

bool is_host_variant(const std::string& variant) {
    const auto& v = known_variants();
    return std::find(v.begin(), v.end(), variant) != v.end() && !is_opencl_variant(variant);
}

std::unique_ptr<Engine> make_engine(const Network& net, const EngineRequest& request) {
    const auto& known = known_variants();
    if (request.variant != "auto" && std::find(known.begin(), known.end(), request.variant) == known.end())
        throw UsageError("unknown variant '" + request.variant + "' (choose from auto, " + listed(known) + ")");
    const std::string variant = resolve_variant(request.variant);
    if (!built(variant))
        throw Error("variant '" + variant + "' is not built into this binary (built: " + listed(built_variants()) + ")");
    if (request.rule.label_smoothing != 0.0f && net.loss != Loss::SoftmaxCrossEntropy)
        throw Error("label smoothing needs a softmax cross-entropy loss; model " + net.name + " uses " + loss_name(net.loss));
    if (variant == "cpu") return std::make_unique<HostEngine>(net, "cpu", cpu_ops(), 1, request.inference, request.rule);
#ifdef LENET5_HAVE_SIMD
    if (variant == "avx" || variant == "omp") {
        const HostOps* ops = simd_ops();
        if (!ops) throw Error("variant '" + variant + "' needs a CPU with AVX2 and FMA; this one has neither (use --variant cpu)");
        const int threads = variant == "avx" ? 1 : (request.threads > 0 ? request.threads : default_threads());
        return std::make_unique<HostEngine>(net, variant, *ops, threads, request.inference, request.rule);
    }
#endif
#ifdef LENET5_HAVE_OPENCL
    return make_opencl_engine(net, variant, request.device, request.group, request.batch, request.conv_algo,
                              request.inference, request.rule);
#else
    throw Error("variant '" + variant + "' is not built into this binary");
#endif
}

}  // namespace lenet5
