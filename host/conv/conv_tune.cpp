#include "conv_tune.h"

#include <iomanip>
#include <set>

#include "conv_timing.h"
#include "conv_tuning.h"
#include "error.h"
#include "model_file.h"

namespace lenet5::conv {
namespace {

constexpr int kRepeats = 5;

// The model's convolutions that OpenCLConv computes (every output map reads every input map).
std::vector<ConvShape> conv_shapes(const Network& net, int batch) {
    std::vector<ConvShape> shapes;
    std::set<std::string> seen;
    for (const LayerSpec& l : net.layers) {
        if (l.kind != LayerKind::Conv || l.connections() != l.in.c * l.out.c) continue;
        const ConvShape s{batch, l.in.c, l.in.h, l.in.w, l.out.c, l.kernel, l.stride, l.pad};
        if (seen.insert(s.describe()).second) shapes.push_back(s);
    }
    return shapes;
}

}  // namespace

int run_conv_tune(const TuneOptions& o, std::ostream& out) {
    const Network net = load_model(o.model).net;
    const OpenCLDevice device = select_opencl_device(o.device);
    const std::string path = o.cache_path.empty() ? default_conv_tuning_path() : o.cache_path;
    if (path.empty())
        throw Error("no place for the convolution tuning cache: set LENET5_CONV_TUNING, XDG_CACHE_HOME or HOME, or pass --cache");
    read_conv_tuning(path);  // a malformed cache fails now, before the timing
    const std::vector<ConvShape> shapes = conv_shapes(net, o.batch);
    if (shapes.empty()) throw Error("model " + net.name + " has no convolution whose maps all read every input map");
    ProfiledQueue profiled(device.device);
    cl::Context& context = profiled.context;
    cl::CommandQueue& queue = profiled.queue;
    OpenCLConv conv(context, device.device, queue);
    out << "lenet5 tune --conv: " << device.name << " [" << device.platform_name << "], driver " << device.driver
        << ", model " << net.name << ", batch " << o.batch << "\n"
        << "  milliseconds of device time for the forward and both backward passes (median of " << kRepeats << ")\n";
    for (const ConvShape& s : shapes) {
        out << s.describe() << ":\n";
        // Filled with 0.5: the time does not depend on the values.
        auto buffer = [&](size_t n) {
            cl::Buffer x(context, CL_MEM_READ_WRITE, n * sizeof(float));
            queue.enqueueFillBuffer(x, 0.5f, 0, n * sizeof(float));
            return x;
        };
        const cl::Buffer in = buffer(s.input_size()), w = buffer(s.weight_size()), b = buffer(size_t(s.out_c)),
                         y = buffer(s.output_size()), dy = buffer(s.output_size()), dx = buffer(s.input_size()),
                         dw = buffer(s.weight_size()), db = buffer(size_t(s.out_c));
        ConvAlgo best = ConvAlgo::Auto;
        double best_ms = 0.0;
        for (ConvAlgo algo : {ConvAlgo::Direct, ConvAlgo::Im2col, ConvAlgo::CLBlast}) {
            if (!algo_built(algo)) continue;
            out << "  " << std::left << std::setw(9) << algo_name(algo) << std::right << std::flush;
            try {
                const double ms = cl_checked([&] {
                    return median_kernel_ms(conv, queue, kRepeats, [&] {
                        conv.forward(algo, s, in, w, b, y, Activation::None);
                        conv.backward_data(algo, s, dy, w, dx);
                        conv.backward_weights(algo, s, in, dy, dw, db);
                    });
                });
                out << std::fixed << std::setprecision(3) << std::setw(10) << ms << "\n";
                if (best == ConvAlgo::Auto || ms < best_ms) {
                    best = algo;
                    best_ms = ms;
                }
            } catch (const Error& e) {
                queue.finish();
                out << "  fails: " << e.what() << "\n";
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
