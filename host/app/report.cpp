#include "app/report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace lenet5 {

void print_run_header(std::ostream& out, const RunInfo& info, const TrainOptions& o) {
    const TrainSettings& s = info.settings;
    out << "lenet5: model " << info.model << ", variant " << info.variant << " on " << info.device << " ["
        << info.platform << "], " << info.train_samples << " training / " << info.test_samples << " test images ("
        << o.dataset << ")\n"
        << "        batch " << s.batch << ", lr " << s.lr;
    if (s.schedule != Schedule::Step) out << " (" << schedule_name(s.schedule) << ")";
    else if (s.lr_decay != 1.0f) out << " (x" << s.lr_decay << " per epoch)";
    if (s.warmup > 0.0f) out << ", warm-up " << s.warmup << (s.warmup == 1.0f ? " epoch" : " epochs");
    if (s.optimizer == Optimizer::Sgd)
        out << ", momentum " << s.momentum << (s.nesterov ? " (Nesterov)" : "");
    else
        out << ", " << optimizer_name(s.optimizer) << " (beta1 " << s.beta1 << ", beta2 " << s.beta2 << ", eps " << s.eps
            << ")";
    out << ", weight decay " << s.weight_decay;
    if (s.label_smoothing > 0.0f) out << ", label smoothing " << s.label_smoothing;
    out << ", seed " << s.seed << "\n";
}

void print_table_header(std::ostream& out) {
    out << "epoch  forward_ms  backward_ms  update_ms    wall_ms  train_loss  test_acc\n";
}

void print_table_row(std::ostream& out, const EpochResult& r) {
    char line[160];
    std::snprintf(line, sizeof line, "%5d  %10.1f  %11.1f  %9.1f  %9.1f  %10.4f  %7.2f%%\n", r.epoch,
                  r.times.forward_ms, r.times.backward_ms, r.times.update_ms, r.wall_ms, r.train_loss,
                  100.0 * r.test_accuracy);
    out << line;
    // --workers: each worker's phases, then the exchange of their gradients (what of it the
    // backward passes did not hide).
    for (const auto& [name, t] : r.workers) {
        std::snprintf(line, sizeof line, "       %10.1f  %11.1f  %9.1f             %s\n", t.forward_ms, t.backward_ms,
                      t.update_ms, name.c_str());
        out << line;
    }
    if (!r.workers.empty()) {
        std::snprintf(line, sizeof line, "       %10s  %11s  %9s  %9.1f  exchanging gradients\n", "", "", "", r.times.reduce_ms);
        out << line;
    }
    out << std::flush;
}

void print_time_to_accuracy(std::ostream& out, const TimeToAccuracy& t) {
    char line[200];
    if (t.reached)
        std::snprintf(line, sizeof line,
                      "time to %.2f%%: %.2f%% at step %lld (epoch %.2f), %.3f s training, %.3f s wall with the evaluations\n",
                      100.0 * t.target, 100.0 * t.at.test_accuracy, static_cast<long long>(t.at.step), t.at.epoch,
                      t.at.train_seconds, t.at.wall_seconds);
    else
        std::snprintf(line, sizeof line,
                      "time to %.2f%%: not reached in %lld steps (epoch %.2f; best %.2f%%), %.3f s training, %.3f s wall\n",
                      100.0 * t.target, static_cast<long long>(t.at.step), t.at.epoch, 100.0 * t.best_accuracy,
                      t.at.train_seconds, t.at.wall_seconds);
    out << line;
}

void print_kernel_profile(std::ostream& out, const std::vector<EpochResult>& epochs) {
    std::vector<KernelTime> total;
    int64_t steps = 0;
    for (const auto& r : epochs) {
        steps += r.steps;
        for (const auto& k : r.kernels) add_kernel_time(total, k.name, k.launches, k.ms);
    }
    if (total.empty()) {
        out << "kernel profile: this variant runs no OpenCL kernels\n";
        return;
    }
    double all_ms = 0;
    int64_t all_launches = 0;
    for (const auto& k : total) {
        all_ms += k.ms;
        all_launches += k.launches;
    }
    const double per_step = steps ? 1.0 / static_cast<double>(steps) : 0.0;
    char line[200];
    out << "kernel profile over " << steps << " training steps (device time of each launch):\n"
        << "kernel                                   launches/step   us/launch   us/step   share\n";
    for (const auto& k : total) {
        std::snprintf(line, sizeof line, "%-40s %13.2f %11.2f %9.2f %6.1f%%\n", k.name.c_str(),
                      static_cast<double>(k.launches) * per_step, 1e3 * k.ms / static_cast<double>(k.launches),
                      1e3 * k.ms * per_step, 100.0 * k.ms / all_ms);
        out << line;
    }
    std::snprintf(line, sizeof line, "%-40s %13.2f %11s %9.2f %6.1f%%\n", "all", static_cast<double>(all_launches) * per_step,
                  "", 1e3 * all_ms * per_step, 100.0);
    out << line;
}

void print_eval(std::ostream& out, const EvalResult& r) {
    char line[160];
    std::snprintf(line, sizeof line, "test samples %d, loss %.4f, accuracy %.2f%%\n", r.samples, r.loss,
                  100.0 * r.accuracy);
    out << line << "confusion (rows: true digit, columns: predicted)\n     ";
    for (size_t k = 0; k < r.confusion.size(); ++k) out << (k < 10 ? "     " : "    ") << k;
    out << "\n";
    for (size_t t = 0; t < r.confusion.size(); ++t) {
        std::snprintf(line, sizeof line, "%5zu", t);
        out << line;
        for (int64_t n : r.confusion[t]) {
            std::snprintf(line, sizeof line, " %5lld", static_cast<long long>(n));
            out << line;
        }
        out << "\n";
    }
}

std::string eval_report_json(const EvalResult& r, const std::string& model, const RunInfo& info) {
    nlohmann::ordered_json j;
    j["model"] = model;
    j["variant"] = info.variant;
    j["device"] = info.device;
    j["platform"] = info.platform;
    j["test_samples"] = r.samples;
    j["test_loss"] = r.loss;
    j["test_accuracy"] = r.accuracy;
    j["confusion"] = r.confusion;
    return j.dump() + "\n";
}

void print_models(std::ostream& out) {
    const TrainOptions no_flags;
    for (const auto& [name, text] : builtin_models()) {
        const Model m = parse_model(text, "models/" + name + ".net");
        const Network& net = m.net;
        const TrainSettings s = resolve_settings(no_flags, m.recipe);
        out << name << ": " << net.param_count << " parameters, " << loss_name(net.loss) << " loss; batch " << s.batch
            << ", lr " << s.lr;
        if (s.schedule == Schedule::Step) out << ", lr-decay " << s.lr_decay;
        else out << ", schedule " << schedule_name(s.schedule);
        if (s.warmup > 0.0f) out << ", warmup " << s.warmup;
        if (s.optimizer == Optimizer::Sgd) out << ", momentum " << s.momentum << (s.nesterov ? " (nesterov)" : "");
        else out << ", optimizer " << optimizer_name(s.optimizer);
        out << ", weight-decay " << s.weight_decay;
        if (s.label_smoothing > 0.0f) out << ", label-smoothing " << s.label_smoothing;
        out << ", " << s.epochs << (s.epochs == 1 ? " epoch\n" : " epochs\n");
        out << "    input " << net.input.c << 'x' << net.input.h << 'x' << net.input.w;
        for (const LayerSpec& l : net.layers)
            out << " -> " << l.name << ' ' << kind_name(l.kind) << ' ' << l.out.c << 'x' << l.out.h << 'x' << l.out.w
                << (l.activation == Activation::None ? "" : std::string(" ") + activation_name(l.activation));
        out << "\n";
    }
}

std::string train_report_json(const TrainResult& result, const TrainOptions& o) {
    nlohmann::ordered_json j;
    const TrainSettings& s = result.info.settings;
    j["model"] = result.info.model;
    j["dataset"] = o.dataset;
    j["variant"] = result.info.variant;
    j["device"] = result.info.device;
    j["platform"] = result.info.platform;
    j["batch"] = s.batch;
    j["lr"] = s.lr;
    j["lr_decay"] = s.lr_decay;
    j["schedule"] = schedule_name(s.schedule);
    j["warmup_epochs"] = s.warmup;
    j["optimizer"] = optimizer_name(s.optimizer);
    if (s.optimizer == Optimizer::Sgd) {
        j["momentum"] = s.momentum;
        j["nesterov"] = s.nesterov;
    } else {
        j["beta1"] = s.beta1;
        j["beta2"] = s.beta2;
        j["eps"] = s.eps;
    }
    j["weight_decay"] = s.weight_decay;
    j["label_smoothing"] = s.label_smoothing;
    j["seed"] = s.seed;
    j["train_samples"] = result.info.train_samples;
    j["test_samples"] = result.info.test_samples;
    j["epochs"] = nlohmann::ordered_json::array();
    for (const auto& r : result.epochs) {
        nlohmann::ordered_json e;
        e["epoch"] = r.epoch;
        e["forward_ms"] = r.times.forward_ms;
        e["backward_ms"] = r.times.backward_ms;
        e["update_ms"] = r.times.update_ms;
        e["transfer_ms"] = r.times.transfer_ms;
        if (!r.workers.empty() || r.times.reduce_ms > 0) e["reduce_ms"] = r.times.reduce_ms;  // workers or ranks
        if (!r.workers.empty()) {
            e["workers"] = nlohmann::ordered_json::array();
            for (const auto& [name, t] : r.workers)
                e["workers"].push_back({{"worker", name}, {"forward_ms", t.forward_ms}, {"backward_ms", t.backward_ms},
                                        {"update_ms", t.update_ms}, {"transfer_ms", t.transfer_ms}});
        }
        e["wall_ms"] = r.wall_ms;
        e["eval_ms"] = r.eval_ms;
        e["train_loss"] = r.train_loss;
        e["train_accuracy"] = r.train_accuracy;
        e["test_loss"] = r.test_loss;
        e["test_accuracy"] = r.test_accuracy;
        if (!r.kernels.empty()) {
            e["kernels"] = nlohmann::ordered_json::array();
            for (const auto& k : r.kernels) e["kernels"].push_back({{"name", k.name}, {"launches", k.launches}, {"ms", k.ms}});
        }
        j["epochs"].push_back(e);
    }
    j["final_test_accuracy"] = result.epochs.empty() ? 0.0 : result.epochs.back().test_accuracy;
    auto put = [](nlohmann::ordered_json& into, const Evaluation& e) {
        into["step"] = e.step;
        into["epoch"] = e.epoch;
        into["test_loss"] = e.test_loss;
        into["test_accuracy"] = e.test_accuracy;
        into["train_seconds"] = e.train_seconds;
        into["wall_seconds"] = e.wall_seconds;
    };
    if (o.eval_every > 0) {
        j["evaluations"] = nlohmann::ordered_json::array();
        for (const Evaluation& e : result.evaluations) {
            nlohmann::ordered_json row;
            put(row, e);
            j["evaluations"].push_back(row);
        }
    }
    if (const auto& t = result.time_to_accuracy) {
        nlohmann::ordered_json tta;
        tta["target"] = t->target;
        tta["reached"] = t->reached;
        put(tta, t->at);  // not reached: where the run ended instead
        tta["best_accuracy"] = t->best_accuracy;
        j["time_to_accuracy"] = tta;
    }
    return j.dump(2) + "\n";
}

}  // namespace lenet5
