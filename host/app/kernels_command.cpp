#include "app/kernels_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "common/rng.h"
#include "engine/engine_factory.h"
#include "io/atomic_file.h"
#include "io/model_source.h"
#include "io/read_whole_file.h"
#include "opencl/opencl_kernels.h"
#include "train/trainer.h"

namespace lenet5 {
namespace {

constexpr int kListedSteps = 8;  // after one untimed step, which may start a fused run (first_forward)

// Writes every embedded file into `dir` (made if missing). A file there that differs from the
// embedded copy is an Error: it may hold someone's edits.
int dump_kernels(const std::string& dir, std::ostream& out) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (!std::filesystem::is_directory(dir))
        throw Error("kernels --dump " + dir + ": cannot make the folder" + (ec ? ": " + ec.message() : ""));
    for (const KernelFile& f : embedded_kernel_files()) {
        const std::string path = (std::filesystem::path(dir) / f.name).string();
        struct stat st {};
        if (::stat(path.c_str(), &st) == 0 && read_whole_file(path, kMaxKernelFileBytes) != f.text)
            throw Error(path + " exists and differs from the embedded copy (edits?); remove it or dump into another folder");
    }
    for (const KernelFile& f : embedded_kernel_files()) {
        const std::filesystem::path path = std::filesystem::path(dir) / f.name;
        std::filesystem::create_directories(path.parent_path());  // layers/
        write_file_atomic(path.string(), f.text);
    }
    out << "lenet5: wrote the " << embedded_kernel_files().size() << " embedded kernel files to " << dir
        << "; use them with --kernels " << dir << "\n";
    return 0;
}

std::vector<KernelTime> launched_kernels(Engine& engine, const Network& net, int batch) {
    const Dataset data = random_dataset(batch * (kListedSteps + 1), 1);
    engine.upload(Split::Train, data);
    engine.set_params(init_params(net, 1));
    Rng rng(2);
    engine.set_order(shuffled_order(data.count, rng));
    engine.profile_kernels();
    for (int step = 0; step <= kListedSteps; ++step) {
        engine.forward(Split::Train, step * batch, batch);
        engine.backward();
        engine.update(0.01f, 0.9f, 0.0f);
        if (step == 0) engine.take_kernel_times();
    }
    return engine.take_kernel_times();
}

// A row per kernel; the knobs once per program (kernels of one program share them).
void print_variant(std::ostream& out, const Engine& engine, const std::vector<KernelTime>& kernels) {
    out << "\n" << engine.variant() << " on " << engine.device() << "\n";
    std::vector<std::string> programs;
    bool per_sample = false;
    char line[256];
    std::snprintf(line, sizeof line, "  %-26s %8s  %-26s %-22s %s\n", "kernel", "per_step", "function", "file", "program");
    out << line;
    for (const KernelTime& k : kernels) {
        std::string where = "(a library's commands)", program = "-";
        if (!k.function.empty()) {
            where = kernel_definition(k.function);
            per_sample |= where.rfind("step.cl:", 0) == 0;
            auto it = std::find(programs.begin(), programs.end(), k.knobs);
            if (it == programs.end()) it = programs.insert(programs.end(), k.knobs);
            program = std::to_string(it - programs.begin() + 1);
        }
        std::snprintf(line, sizeof line, "  %-26s %8.2f  %-26s %-22s %s\n", k.name.c_str(),
                      static_cast<double>(k.launches) / kListedSteps, k.function.c_str(), where.c_str(),
                      program.c_str());
        out << line;
    }
    for (size_t i = 0; i < programs.size(); ++i) out << "  program " << i + 1 << " knobs: " << programs[i] << "\n";
    if (per_sample)
        out << "  (step.cl's kernels run the network as calls to the layer functions of sample_layers.cl,\n"
               "   which host/opencl/opencl_program.cpp writes into the NETWORK_* macros)\n";
}

}  // namespace

int run_kernels(const KernelsOptions& o, std::ostream& out) {
    if (!o.dump_dir.empty()) return dump_kernels(o.dump_dir, out);
    const Model model = open_model(o.model);
    const int batch = o.batch > 0 ? o.batch : model.recipe.batch.value_or(64);
    const std::string folder = kernel_folder();
    out << "lenet5 kernels: model " << model.net.name << ", batch " << batch << ", the launches of a training step (over "
        << kListedSteps << " steps after the first), kernel files " << (folder.empty() ? "embedded" : "from " + folder)
        << "\n";
    const std::vector<std::string> variants =
        o.variant.empty() ? opencl_variants() : std::vector<std::string>{o.variant};
    for (const std::string& variant : variants) {
        EngineRequest request;
        request.variant = variant;
        request.device = o.device;
        request.batch = batch;
        auto engine = make_engine(model.net, request);
        print_variant(out, *engine, launched_kernels(*engine, model.net, batch));
    }
    return 0;
}

}  // namespace lenet5
