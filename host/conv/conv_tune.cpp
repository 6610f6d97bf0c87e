#include "conv/conv_tune.h"

#include <iomanip>
#include <numeric>
#include <set>

#include "conv/conv_timing.h"
#include "conv/conv_tuning.h"
#include "common/error.h"
#include "io/model_source.h"
#include "opencl/opencl_batch_engine.h"

namespace lenet5::conv {
namespace {

constexpr int kRepeats = 5;

// The model's convolutions that OpenCLConv computes (every output map reads every input map), with
// the name of the first layer of each shape.
std::vector<std::pair<ConvShape, std::string>> conv_shapes(const Network& net, int batch) {
    std::vector<std::pair<ConvShape, std::string>> shapes;
    std::set<std::string> seen;
    for (const LayerSpec& l : net.layers) {
        if (l.kind != LayerKind::Conv || l.connections() != l.in.c * l.out.c) continue;
        const ConvShape s{batch, l.in.c, l.in.h, l.in.w, l.out.c, l.kernel, l.stride, l.pad};
        if (seen.insert(s.describe()).second) shapes.emplace_back(s, l.name);
    }
    return shapes;
}

// Device milliseconds per training step of each layer (by name: the sum of its launches, forward
// and backward) in the batch-level engine with `algo` for its convolutions, the mean of kRepeats
// steps after one that plans and warms up: what train --conv-algo runs, the engine's own kernels
// included, so that auto is never slower than them.
std::map<std::string, double> engine_layer_ms(const Network& net, const std::shared_ptr<DeviceRuntime>& rt, int batch,
                                              ConvAlgo algo) {
    OpenCLBatchEngine engine(net, MemoryVariant::Local, rt, algo);
    engine.upload(Split::Train, random_dataset(batch, 1));
    std::vector<int32_t> order(static_cast<size_t>(batch));
    std::iota(order.begin(), order.end(), 0);
    engine.set_order(order);
    engine.profile_kernels();
    for (int r = 0; r <= kRepeats; ++r) {
        if (r == 1) engine.take_kernel_times();  // the first step's
        engine.forward(Split::Train, 0, batch);
        engine.backward();
    }
    std::map<std::string, double> ms;
    for (const KernelTime& t : engine.take_kernel_times()) ms[t.name.substr(0, t.name.find(' '))] += t.ms / kRepeats;
    return ms;
}

}  // namespace

int run_conv_tune(const TuneOptions& o, std::ostream& out) {
    const Network net = open_model(o.model).net;
    const auto rt = std::make_shared<DeviceRuntime>(select_opencl_device(o.device));
    const OpenCLDevice& device = rt->device();
    const std::string path = o.cache_path.empty() ? default_conv_tuning_path() : o.cache_path;
    if (path.empty())
        throw Error("no place for the convolution tuning cache: set LENET5_CONV_TUNING, XDG_CACHE_HOME or HOME, or pass --cache");
    read_conv_tuning(path);  // a malformed cache fails now, before the timing
    const auto shapes = conv_shapes(net, o.batch);
    if (shapes.empty()) throw Error("model " + net.name + " has no convolution whose maps all read every input map");
    out << "lenet5 tune --conv: " << device.name << " [" << device.platform_name << "], driver " << device.driver
        << ", model " << net.name << ", batch " << o.batch << "\n"
        << "  milliseconds of device time for the forward and both backward passes (own, direct, im2col, winograd: the\n"
        << "  layer's launches in a training step of the batch-level engine, mean of " << kRepeats
        << "; clblast: alone, median of " << kRepeats << ")\n";
    // The batch-level engine's algorithms, each timed in the engine (own, direct, im2col, winograd) ...
    std::map<ConvAlgo, std::map<std::string, double>> in_engine;
    for (ConvAlgo algo : {ConvAlgo::Own, ConvAlgo::Direct, ConvAlgo::Im2col, ConvAlgo::Winograd}) {
        try {
            in_engine[algo] = engine_layer_ms(net, rt, o.batch, algo);
        } catch (const Error& e) {
            out << "  " << algo_name(algo) << " fails in the batch-level engine: " << e.what() << "\n";
        }
    }
    OpenCLConv conv(rt);
    for (const auto& [s, layer] : shapes) {
        out << s.describe() << ":\n";
        ConvAlgo best = ConvAlgo::Auto;
        double best_ms = 0.0;
        auto report = [&](ConvAlgo algo, double ms) {
            out << "  " << std::left << std::setw(9) << algo_name(algo) << std::right << std::fixed
                << std::setprecision(3) << std::setw(10) << ms << "\n";
            if (best == ConvAlgo::Auto || ms < best_ms) {
                best = algo;
                best_ms = ms;
            }
        };
        for (const auto& [algo, layers] : in_engine)
            if (const auto it = layers.find(layer); it != layers.end()) report(algo, it->second);
        // ... and CLBlast (which the engine cannot plan) alone, for OpenCLConv's other callers.
        if (algo_built(ConvAlgo::CLBlast)) {
            // Filled with 0.5: the time does not depend on the values.
            auto buffer = [&](size_t n) {
                cl::Buffer x = rt->buffer(n * sizeof(float));
                rt->fill(x, 0.5f, n * sizeof(float));
                return x;
            };
            const cl::Buffer in = buffer(s.input_size()), w = buffer(s.weight_size()), b = buffer(size_t(s.out_c)),
                             y = buffer(s.output_size()), dy = buffer(s.output_size()), dx = buffer(s.input_size()),
                             dw = buffer(s.weight_size()), db = buffer(size_t(s.out_c));
            const ConvAlgo algo = ConvAlgo::CLBlast;
            try {
                report(algo, cl_checked([&] {
                    return median_kernel_ms(conv, *rt, kRepeats, [&] {
                        conv.forward(algo, s, in, w, b, y, Activation::None);
                        conv.backward_data(algo, s, dy, w, dx);
                        conv.backward_weights(algo, s, in, dy, dw, db);
                    });
                }));
            } catch (const Error& e) {
                rt->finish();
                out << "  clblast    fails: " << e.what() << "\n";
            }
        }
        if (best == ConvAlgo::Auto) throw Error("no convolution algorithm ran " + s.describe() + " on " + device.name);
        store_conv_tuning(path, {device.platform_name, device.name, device.driver, s.describe(), best, best_ms});
        out << "  fastest: " << algo_name(best) << "\n";
    }
    out << "cached in " << path << "; --conv-algo auto uses it on this device\n";
    return 0;
}

}  // namespace lenet5::conv
