#include "app/check_command.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "common/error.h"
#include "engine/host_engine.h"
#include "engine/reference_check.h"
#include "io/atomic_file.h"
#include "io/mnist.h"
#include "io/model_source.h"
#include "train/trainer.h"
#ifdef LENET5_HAVE_OPENCL
#include "opencl/opencl_engine.h"
#endif

namespace lenet5 {
namespace {

constexpr uint64_t kSeed = 1;

std::string error_text(double error) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2e", error);
    return text;
}

void print_rows(std::ostream& out, const std::vector<Comparison>& rows) {
    char line[160];
    std::snprintf(line, sizeof line, "%-12s %-9s %-16s %10s  %s\n", "layer", "phase", "what", "rel_error", "result");
    out << line;
    for (const Comparison& c : rows) {
        std::snprintf(line, sizeof line, "%-12s %-9s %-16s %10s  %s\n", c.layer.c_str(), c.phase.c_str(), c.what.c_str(),
                      error_text(c.error).c_str(), c.passed() ? "pass" : "FAIL");
        out << line;
    }
}

std::string check_json(const CheckOptions& o, const Engine& engine, const std::string& model, int batch,
                       const std::vector<Comparison>& rows, bool passed) {
    nlohmann::json j;
    j["model"] = model;
    j["variant"] = engine.variant();
    j["device"] = engine.device();
    j["platform"] = engine.platform();
    j["reference"] = "cpu";
    j["batch"] = batch;
    j["batches"] = o.batches;
    j["tolerance"] = kReferenceTolerance;
    j["passed"] = passed;
    j["comparisons"] = nlohmann::json::array();
    for (const Comparison& c : rows)
        j["comparisons"].push_back({{"layer", c.layer}, {"phase", c.phase}, {"what", c.what},
                                    {"relative_error", c.error}, {"passed", c.passed()}});
    return j.dump(2) + "\n";
}

}  // namespace

namespace {

// A way `train` runs the steps, to check beside the layer-by-layer comparison: its name and how
// to set an engine up for it.
struct TrainingPath {
    std::string name;
    std::function<void(Engine&)> configure;
};

// Steps of a training path checked: at least enough that fused steps follow the first (a probe,
// run phase by phase) and, at batch 1, that runs of several steps form.
int training_steps(int batch, int batches) { return std::max(batches, batch == 1 ? 8 : 2); }

// Every way `train` may run this engine's steps: as it is; for batch-1 steps fused with the update,
// a launch a step and runs of steps in one work-group, in two where the device has the compute
// units for them to run at once, and in as many as train uses where that is more (a GPU's).
std::vector<TrainingPath> training_paths(Engine& engine, int batch) {
    std::vector<TrainingPath> paths{{"as train runs it", [](Engine&) {}}};
#ifdef LENET5_HAVE_OPENCL
    auto* opencl = dynamic_cast<OpenCLEngine*>(&engine);
    if (!opencl || batch != 1 || !opencl->fuses_batch_one_steps()) return paths;
    constexpr int kRun = 16;
    const auto runs = [](int steps, int groups) {
        return [=](Engine& e) { dynamic_cast<OpenCLEngine&>(e).set_step_runs(steps, groups); };
    };
    paths = {{"a launch a step (step_update)", runs(0, 0)},
             {"runs of steps in one work-group (step_run)", runs(kRun, 1)}};
    if (opencl->compute_units() >= 2 && opencl->runs_groups())
        paths.push_back({"runs of steps in two work-groups (step_run, grid barrier)", runs(kRun, 2)});
    if (opencl->step_run_groups() > 2)  // a GPU's own: a group per compute unit
        paths.push_back({"runs of steps in " + std::to_string(opencl->step_run_groups()) +
                             " work-groups, as train runs them (step_run, grid barrier)",
                         runs(kRun, opencl->step_run_groups())});
#else
    (void)engine;
    (void)batch;
#endif
    return paths;
}

// The first failing comparison of the first step that has one (later steps inherit its
// parameters), as the error's text; empty if every step passes. `step` numbers got[0].
std::string first_failure(const Network& net, const std::vector<StepRecord>& got, const std::vector<StepRecord>& ref,
                          int step, const std::string& where) {
    for (size_t s = 0; s < got.size() && s < ref.size(); ++s)
        for (const Comparison& c : compare_steps(net, {got[s]}, {ref[s]}))
            if (!c.passed())
                return "layer " + c.layer + " (" + c.phase + ", " + c.what + ": relative error " + error_text(c.error) +
                       " in step " + std::to_string(step + static_cast<int>(s)) + where + ")";
    return "";
}

}  // namespace

int run_check(const CheckOptions& o, std::ostream& out) {
    const Model model = open_model(o.model);
    const Network& net = model.net;
    const int batch = o.batch > 0 ? o.batch : model.recipe.batch.value_or(64);
    const int path_steps = training_steps(batch, o.batches);
    const int samples = batch * std::max(o.batches, path_steps);
    const std::string dir = resolve_data_dir(o.data_dir);
    const Dataset data = load_mnist(dir, Split::Train, samples);
    if (data.count < samples)
        throw Error(dir + ": " + std::to_string(data.count) + " training images, fewer than the " +
                    std::to_string(samples / batch) + " batches of " + std::to_string(batch) + " to check");
    check_classes(net, data, dir);

    EngineRequest request = o.engine;
    request.batch = batch;
    auto engine = make_engine(net, request);
    HostEngine reference(net, "cpu", cpu_ops(), 1, false, request.rule);
    const StepRates rates = step_rates(request.rule);
    out << "lenet5: check of " << engine->variant() << " on " << engine->device() << " [" << engine->platform()
        << "] against cpu: model " << net.name << ", " << optimizer_name(request.rule.optimizer) << ", " << o.batches
        << " batches of " << batch
        << " MNIST training images, each compared (relative error < " << error_text(kReferenceTolerance) << ")\n";
    const auto got = record_steps(*engine, net, data, batch, o.batches, kSeed, rates);
    const auto ref = record_steps(reference, net, data, batch, o.batches, kSeed, rates);
    std::vector<Comparison> rows = compare_steps(net, got, ref);
    print_rows(out, rows);
    std::string failure = first_failure(net, got, ref, 1, "");

    // Then the kernels that train runs, which the layer-by-layer steps above do not (reading a
    // layer's output or the gradients between the phases runs them apart): the steps straight
    // through, read after the last; at batch 1 also read after each step, to name the step (a read
    // ends a run of steps, so both are needed).
    const bool each = batch == 1;
    std::vector<StepRecord> ref_steps;
    if (each) ref_steps = record_training_path(reference, net, data, batch, path_steps, kSeed, true, rates);
    const auto ref_run = record_training_path(reference, net, data, batch, path_steps, kSeed, false, rates);
    for (const TrainingPath& path : training_paths(*engine, batch)) {
        auto path_engine = make_engine(net, request);
        path.configure(*path_engine);
        std::vector<Comparison> path_rows;
        if (each) {
            const auto steps = record_training_path(*path_engine, net, data, batch, path_steps, kSeed, true, rates);
            path_rows = compare_steps(net, steps, ref_steps);
            out << "\ntraining path: " << path.name << ", " << path_steps << " steps, each read after it\n";
            print_rows(out, path_rows);
            if (failure.empty()) failure = first_failure(net, steps, ref_steps, 1, " of the training path: " + path.name);
            path.configure(*path_engine);
        }
        const auto run = record_training_path(*path_engine, net, data, batch, path_steps, kSeed, false, rates);
        const std::vector<Comparison> run_rows = compare_steps(net, run, ref_run);
        out << (each ? "" : "\n") << "training path: " << path.name << ", " << path_steps
            << " steps straight through, read after the last\n";
        print_rows(out, run_rows);
        if (failure.empty())
            failure = first_failure(net, run, ref_run, path_steps,
                                    " of " + std::to_string(path_steps) + " taken straight through, the training path: " +
                                        path.name);
        path_rows.insert(path_rows.end(), run_rows.begin(), run_rows.end());
        for (Comparison& c : path_rows) {
            c.phase = path.name + ": " + c.phase;
            rows.push_back(c);
        }
    }

    size_t failed = 0;
    for (const Comparison& c : rows) failed += !c.passed();
    if (!o.json_path.empty()) write_file_atomic(o.json_path, check_json(o, *engine, net.name, batch, rows, !failed));
    if (failed)
        throw Error(engine->variant() + " differs from cpu in " + failure + "; " + std::to_string(failed) + " of " +
                    std::to_string(rows.size()) + " comparisons failed");
    out << "lenet5: " << engine->variant() << " matches cpu (" << rows.size() << " comparisons)\n";
    return 0;
}

}  // namespace lenet5
