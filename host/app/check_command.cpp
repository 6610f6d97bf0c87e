#include "app/check_command.h"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "common/error.h"
#include "engine/host_engine.h"
#include "engine/reference_check.h"
#include "io/atomic_file.h"
#include "io/mnist.h"
#include "io/model_source.h"
#include "train/trainer.h"

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

int run_check(const CheckOptions& o, std::ostream& out) {
    const Model model = open_model(o.model);
    const Network& net = model.net;
    const int batch = o.batch > 0 ? o.batch : model.recipe.batch.value_or(64);
    const std::string dir = resolve_data_dir(o.data_dir);
    const Dataset data = load_mnist(dir, Split::Train, batch * o.batches);
    if (data.count < batch * o.batches)
        throw Error(dir + ": " + std::to_string(data.count) + " training images, fewer than the " +
                    std::to_string(o.batches) + " batches of " + std::to_string(batch) + " to check");
    check_classes(net, data, dir);

    EngineRequest request = o.engine;
    request.batch = batch;
    auto engine = make_engine(net, request);
    HostEngine reference(net, "cpu", cpu_ops(), 1);
    out << "lenet5: check of " << engine->variant() << " on " << engine->device() << " [" << engine->platform()
        << "] against cpu: model " << net.name << ", " << o.batches << " batches of " << batch
        << " MNIST training images, each compared (relative error < " << error_text(kReferenceTolerance) << ")\n";
    const auto got = record_steps(*engine, net, data, batch, o.batches, kSeed);
    const auto ref = record_steps(reference, net, data, batch, o.batches, kSeed);
    const std::vector<Comparison> rows = compare_steps(net, got, ref);
    print_rows(out, rows);

    size_t failed = 0;
    for (const Comparison& c : rows) failed += !c.passed();
    if (!o.json_path.empty()) write_file_atomic(o.json_path, check_json(o, *engine, net.name, batch, rows, !failed));
    // The first failure in the first step that has one: later steps inherit its parameters.
    for (size_t s = 0; failed && s < got.size(); ++s)
        for (const Comparison& c : compare_steps(net, {got[s]}, {ref[s]}))
            if (!c.passed())
                throw Error(engine->variant() + " differs from cpu in layer " + c.layer + " (" + c.phase + ", " +
                            c.what + ": relative error " + error_text(c.error) + " in step " + std::to_string(s + 1) +
                            "); " + std::to_string(failed) + " of " + std::to_string(rows.size()) +
                            " comparisons failed");
    out << "lenet5: " << engine->variant() << " matches cpu (" << rows.size() << " comparisons)\n";
    return 0;
}

}  // namespace lenet5
