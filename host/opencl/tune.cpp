#include "opencl/tune.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <numeric>

#include "conv/conv_tune.h"
#include "engine/engine_factory.h"
#include "io/model_source.h"
#include "opencl/opencl_backend.h"
#include "opencl/opencl_engine.h"
#include "opencl/opencl_program.h"
#include "opencl/opencl_runtime.h"
#include "opencl/tuning_cache.h"

namespace lenet5 {
namespace {

constexpr int kWarmupSteps = 5;
constexpr int kRepeats = 3;
// A knob setting other than the default is kept only when it is at least this much faster than
// the best so far: less is within the timing's noise (on an H100, settings 0.5-1% apart changed
// places between runs).
constexpr double kKnobGain = 0.01;

// Microseconds per training step of `engine` (the median of kRepeats runs of `steps` steps).
double time_step(Engine& engine, const Network& net, int batch, int steps) {
    const int batches = 8;
    engine.upload(Split::Train, random_dataset(batch * batches, 7));  // a step costs the same whatever the pixels
    engine.set_params(init_params(net, 1));
    std::vector<int32_t> order(static_cast<size_t>(batch * batches));
    std::iota(order.begin(), order.end(), 0);
    engine.set_order(order);
    int next = 0;
    auto run_steps = [&](int n) {
        for (int i = 0; i < n; ++i, next = (next + 1) % batches) {
            engine.forward(Split::Train, next * batch, batch);
            engine.backward();
            engine.update(0.01f, 0.9f, 0.0f);
        }
        engine.take_counters();  // waits for the device
    };
    run_steps(kWarmupSteps);
    std::vector<double> us;
    for (int r = 0; r < kRepeats; ++r) {
        const auto start = std::chrono::steady_clock::now();
        run_steps(steps);
        const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
        us.push_back(took.count() / steps);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}

// The per-sample kernels' knobs at `group` items, one knob after another (each keeping the values
// chosen before it): the setting of each that times fastest by kKnobGain, "" where every default
// is. best_us: the time to beat, lowered to the chosen settings' time.
std::string tune_knobs(const Network& net, const std::string& variant, int device, int group, const TuneOptions& o,
                       double& best_us, std::ostream& out) {
    std::vector<std::string> chosen;
    auto joined = [](const std::vector<std::string>& items) {
        std::string s;
        for (const auto& item : items) s += (s.empty() ? "" : ",") + item;
        return s;
    };
    out << "  knobs at " << group << " items (the times above are the kernels' defaults:";
    for (const SampleKnob& k : sample_knobs()) out << " " << k.name << "=" << k.values.front();
    out << "):\n";
    for (const SampleKnob& k : sample_knobs()) {
        std::string best_setting;
        for (size_t i = 1; i < k.values.size(); ++i) {
            const std::string setting = std::string(k.name) + "=" + std::to_string(k.values[i]);
            std::vector<std::string> trial = chosen;
            trial.push_back(setting);
            out << "    " << std::left << std::setw(12) << setting << std::right << std::flush;
            try {
                auto engine = make_sample_engine(net, variant, device, group, joined(trial));
                const double us = time_step(*engine, net, o.batch, o.steps);
                out << std::fixed << std::setprecision(1) << std::setw(9) << us << "\n";
                if (us < best_us * (1.0 - kKnobGain)) {
                    best_us = us;
                    best_setting = setting;
                }
            } catch (const Error& e) {
                out << "   fails: " << e.what() << "\n";
            }
        }
        if (!best_setting.empty()) chosen.push_back(best_setting);
    }
    return joined(chosen);
}

}  // namespace

int run_tune(const TuneOptions& o, std::ostream& out) {
    if (o.conv) return conv::run_conv_tune(o, out);
    const Network net = open_model(o.model).net;
    const OpenCLDevice device = select_opencl_device(o.device);
    std::vector<int> groups = o.groups;
    if (groups.empty()) {
        const size_t limit = std::min<size_t>(1024, device.device.getInfo<CL_DEVICE_MAX_WORK_GROUP_SIZE>());
        for (size_t g = 32; g <= limit; g *= 2) groups.push_back(static_cast<int>(g));
    }
    const std::vector<std::string> variants =
        o.variants.empty() ? opencl_variants() : o.variants;
    const std::string path = o.cache_path.empty() ? default_tuning_path() : o.cache_path;
    if (path.empty()) throw Error("no place for the tuning cache: set LENET5_TUNING, XDG_CACHE_HOME or HOME, or pass --cache");
    read_tuning(path);  // a malformed cache fails now, before the timing
    out << "lenet5 tune: " << device.name << " [" << device.platform_name << "], driver " << device.driver << ", model "
        << net.name << ", batch " << o.batch << "\n"
        << "  microseconds per training step (median of " << kRepeats << " runs of " << o.steps
        << " steps) for each work-group size per sample\n";
    for (const auto& variant : variants) {
        out << variant << ":\n";
        int best = 0;
        double best_us = 0;
        bool per_sample = false;  // the per-sample engine, whose kernels have knobs
        for (int group : groups) {
            out << "  " << std::setw(5) << group << "  " << std::flush;
            try {
                auto engine = make_opencl_engine(net, variant, device.index, group, 0);
                per_sample = per_sample || dynamic_cast<OpenCLEngine*>(engine.get());
                const double us = time_step(*engine, net, o.batch, o.steps);
                out << std::fixed << std::setprecision(1) << std::setw(9) << us << "\n";
                if (!best || us < best_us) {
                    best = group;
                    best_us = us;
                }
            } catch (const Error& e) {
                out << "   fails: " << e.what() << "\n";  // e.g. a group the device cannot run
            }
        }
        if (!best) throw Error(variant + ": no work-group size ran on " + device.name);
        const std::string knobs = per_sample ? tune_knobs(net, variant, device.index, best, o, best_us, out) : "";
        store_tuning(path, {{device.platform_name, device.name, device.driver, variant, o.batch, net.name}, best, best_us,
                            knobs});
        out << "  fastest: " << best << " items per sample" << (knobs.empty() ? "" : ", " + knobs) << " ("
            << std::fixed << std::setprecision(1) << best_us << " us per step)\n";
    }
    out << "cached in " << path << "; `lenet5 train --model " << net.name << " --batch " << o.batch
        << "` on this device uses it\n";
    return 0;
}

}  // namespace lenet5
