#include "conv/convbench.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/atomic_file.h"
#include "conv/conv_reference.h"
#include "common/error.h"
#include "common/rng.h"
#ifdef LENET5_HAVE_OPENCL
#include "conv/conv_timing.h"
#include "opencl/opencl_kernels.h"
#endif

namespace lenet5::conv {
namespace {

constexpr double kTolerance = 1e-4;
constexpr size_t kSamples = 2048, kWeightSamples = 256, kBiasSamples = 32;  // reference elements per check

struct Options {
    std::vector<int> sizes{256, 512, 1024, 2048, 4096}, strides{1, 2, 3}, batches{1, 16};
    int channels = 3, filters = 1, device = -1, repeats = 5;
    std::vector<std::string> groups{"seed", "vgg16"};
    std::vector<ConvAlgo> algos;
    bool backward = true;
    std::string json_path;
    std::string kernels_dir;  // --kernels DIR (opencl_kernels.h)
};

struct Case {
    std::string group;  // "seed" or "vgg16"
    ConvShape shape;
};

// A comma-separated list of whole numbers of at least `lo`.
std::vector<int> parse_ints(const std::string& flag, const std::string& text, int lo) {
    std::vector<int> v;
    std::stringstream items(text);
    for (std::string item; std::getline(items, item, ',');) {
        errno = 0;
        char* end = nullptr;
        const long n = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end || errno == ERANGE || n < lo || n > 1 << 20)
            throw UsageError(flag + ": '" + item + "' is not a whole number from " + std::to_string(lo) + " to " +
                             std::to_string(1 << 20));
        v.push_back(static_cast<int>(n));
    }
    if (v.empty() || text.back() == ',') throw UsageError(flag + ": '" + text + "' has an empty item");
    return v;
}

Options parse(const std::vector<std::string>& args) {
    Options o;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& flag = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
            return args[++i];
        };
        auto one = [&](int lo) { return parse_ints(flag, value(), lo).at(0); };
        if (flag == "--sizes") o.sizes = parse_ints(flag, value(), 1);
        else if (flag == "--strides") o.strides = parse_ints(flag, value(), 1);
        else if (flag == "--batch") o.batches = parse_ints(flag, value(), 1);
        else if (flag == "--channels") o.channels = one(1);
        else if (flag == "--filters") o.filters = one(1);
        else if (flag == "--device") o.device = one(0);
        else if (flag == "--repeats") o.repeats = one(1);
        else if (flag == "--forward-only") o.backward = false;
        else if (flag == "--json") {
            o.json_path = value();
            if (o.json_path.empty()) throw UsageError(flag + " needs a non-empty value");
        } else if (flag == "--cases") {
            o.groups.clear();
            std::stringstream items(value());
            for (std::string g; std::getline(items, g, ',');) {
                if (g != "seed" && g != "vgg16") throw UsageError(flag + ": '" + g + "' is not a case set (seed, vgg16)");
                o.groups.push_back(g);
            }
            if (o.groups.empty()) throw UsageError(flag + " needs a value");
        } else if (flag == "--algos") {
            std::stringstream items(value());
            for (std::string a; std::getline(items, a, ',');) {
                const ConvAlgo algo = parse_algo(a);
                if (algo == ConvAlgo::Auto || algo == ConvAlgo::Own) throw UsageError(flag + ": name the algorithms (direct, im2col, winograd, clblast)");
                o.algos.push_back(algo);
            }
            if (o.algos.empty()) throw UsageError(flag + " needs a value");
        } else if (flag == "--kernels") {
            o.kernels_dir = value();
            if (o.kernels_dir.empty()) throw UsageError(flag + " needs a non-empty value");
        } else throw UsageError("unknown option '" + flag + "' for convbench (try `lenet5 convbench --help`)");
    }
    if (o.algos.empty())
        for (ConvAlgo a : {ConvAlgo::Direct, ConvAlgo::Im2col, ConvAlgo::Winograd, ConvAlgo::CLBlast})
            if (algo_built(a)) o.algos.push_back(a);
    return o;
}

#ifdef LENET5_HAVE_OPENCL
// Seed 002: one N x N image of `channels` maps, 3x3 filters, padding 1, N grown until the filter
// slides exactly to the edge (N - 1 a multiple of the stride). VGG16: its 3x3 layers' shapes.
std::vector<Case> cases(const Options& o) {
    std::vector<Case> all;
    for (const std::string& g : o.groups) {
        if (g == "seed")
            for (int n : o.sizes)
                for (int stride : o.strides) {
                    int size = n;
                    while ((size - 1) % stride) ++size;
                    all.push_back({g, {1, o.channels, size, size, o.filters, 3, stride, 1}});
                }
        else
            for (int batch : o.batches)
                for (auto [ic, oc, hw] : std::vector<std::array<int, 3>>{{3, 64, 224},   {64, 64, 224},   {64, 128, 112},
                                                                          {128, 128, 112}, {128, 256, 56}, {256, 256, 56},
                                                                          {256, 512, 28},  {512, 512, 28}, {512, 512, 14}})
                    all.push_back({g, {batch, ic, hw, hw, oc, 3, 1, 1}});
    }
    return all;
}

std::vector<float> random_values(size_t n, uint64_t seed) {
    Rng rng(seed);
    std::vector<float> v(n);
    for (auto& x : v) x = rng.uniform(-1.0f, 1.0f);
    return v;
}

// The largest relative error of `got` at up to `samples` elements spread over it against
// `reference(i)` (max |got - ref| / max |ref| over those elements).
template <class F>
double sampled_error(const std::vector<float>& got, size_t samples, F reference) {
    const size_t n = got.size(), step = std::max<size_t>(1, n / samples);
    std::vector<float> v, ref;
    for (size_t i = (step * 7) / 13; i < n; i += step) {  // an offset, so that not only row starts are checked
        v.push_back(got[i]);
        ref.push_back(reference(i));
    }
    return max_relative_error(v.data(), ref.data(), v.size());
}

struct Row {
    double forward_ms = 0, copy_ms = 0, backward_ms = 0, error = 0;
    std::string failure;  // an Error's message
};

Row measure(OpenCLConv& conv, DeviceRuntime& rt, ConvAlgo algo, const ConvShape& s, const Options& o) {
    Row row;
    const std::vector<float> in = random_values(s.input_size(), 1), w = random_values(s.weight_size(), 2),
                             b = random_values(size_t(s.out_c), 3), d_out = random_values(s.output_size(), 4);
    auto buffer = [&](size_t n) { return rt.buffer(n * sizeof(float)); };
    const cl::Buffer in_d = buffer(in.size()), w_d = buffer(w.size()), b_d = buffer(b.size()),
                     out_d = buffer(s.output_size()), dout_d = buffer(d_out.size()), din_d = buffer(in.size()),
                     dw_d = buffer(w.size()), db_d = buffer(b.size());
    rt.write(in_d, in.data(), in.size() * sizeof(float), false);
    rt.write(w_d, w.data(), w.size() * sizeof(float), false);
    rt.write(b_d, b.data(), b.size() * sizeof(float), false);
    rt.write(dout_d, d_out.data(), d_out.size() * sizeof(float), false);
    const Activation act = Activation::ReLU;
    std::vector<float> out(s.output_size());
    auto kernel_ms = [&](auto&& run) { return median_kernel_ms(conv, rt, o.repeats, run); };
    row.forward_ms = kernel_ms([&] { conv.forward(algo, s, in_d, w_d, b_d, out_d, act); });
    std::vector<double> copy;
    for (int r = 0; r < o.repeats; ++r) {
        const auto start = std::chrono::steady_clock::now();
        rt.write(in_d, in.data(), in.size() * sizeof(float), false);
        rt.write(w_d, w.data(), w.size() * sizeof(float), false);
        conv.forward(algo, s, in_d, w_d, b_d, out_d, act);
        rt.read(out_d, out.data(), out.size() * sizeof(float));
        copy.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    row.copy_ms = median(copy);
    row.error = sampled_error(out, kSamples, [&](size_t i) { return reference_output(s, in.data(), w.data(), b.data(), act, i); });
    if (!o.backward) return row;
    row.backward_ms = kernel_ms([&] {
        conv.backward_data(algo, s, dout_d, w_d, din_d);
        conv.backward_weights(algo, s, in_d, dout_d, dw_d, db_d);
    });
    std::vector<float> d_in(in.size()), d_w(w.size()), d_b(b.size());
    rt.read(din_d, d_in.data(), d_in.size() * sizeof(float));
    rt.read(dw_d, d_w.data(), d_w.size() * sizeof(float));
    rt.read(db_d, d_b.data(), d_b.size() * sizeof(float));
    row.error = std::max({row.error,
                          sampled_error(d_in, kSamples, [&](size_t i) { return reference_d_in(s, d_out.data(), w.data(), i); }),
                          sampled_error(d_w, kWeightSamples, [&](size_t i) { return reference_d_w(s, in.data(), d_out.data(), i); }),
                          sampled_error(d_b, kBiasSamples, [&](size_t i) { return reference_d_b(s, d_out.data(), int(i)); })});
    return row;
}
#endif

}  // namespace

std::string convbench_help() {
    return "usage: lenet5 convbench [options]\n"
           "\n"
           "The convolution algorithms side by side on one OpenCL device: per case and algorithm the\n"
           "forward's kernel ms, its ms with the host copies (input and weights in, output out), GFLOP/s,\n"
           "the backward passes' kernel ms (data + weights) and the largest relative error against the\n"
           "scalar reference at sampled elements (above 1e-4: FAILED, exit status 1); times are medians\n"
           "of the repeats.\n"
           "\n"
           "cases:\n"
           "  --cases SET,...  seed (the seed's grid, below) and/or vgg16 (its 3x3 layers, 3 to 512 maps,\n"
           "                   224 down to 14) (default: both)\n"
           "  --sizes N,...    seed cases: N x N images (default 256,512,1024,2048,4096; N grows until the\n"
           "                   3x3 filter with padding 1 slides exactly to the edge)\n"
           "  --strides S,...  seed cases' strides (default 1,2,3)\n"
           "  --channels C     seed cases' input maps (default 3)\n"
           "  --filters F      seed cases' output maps (default 1)\n"
           "  --batch B,...    the VGG16 cases' batch sizes (default 1,16)\n"
           "\n"
           "algorithms and device:\n"
           "  --algos A,...    direct, im2col, winograd (3x3 stride-1 layers of a multiple of 4 maps, at\n"
           "                   least 16; direct elsewhere; the weight gradient by im2col), clblast (default:\n"
           "                   those this build has)\n"
           "  --device N       OpenCL device index from `lenet5 devices` (default: first GPU, else first device)\n"
           "  --kernels DIR    build the kernels from DIR's files (common.h and every .cl file, as\n"
           "                   `lenet5 kernels --dump DIR` writes them) instead of the embedded copies\n"
           "                   (default: $LENET5_KERNELS, else the embedded copies)\n"
           "\n"
           "measures and output files:\n"
           "  --repeats N      timed runs per measure (default 5)\n"
           "  --forward-only   skip the backward passes\n"
           "  --json FILE      also write the rows as JSON\n";
}

int run_convbench(const std::vector<std::string>& args, std::ostream& out) {
    if (std::find(args.begin(), args.end(), "--help") != args.end() || std::find(args.begin(), args.end(), "-h") != args.end()) {
        out << convbench_help();
        return 0;
    }
    const Options o = parse(args);
    for (ConvAlgo a : o.algos)
        if (!algo_built(a))
            throw Error("convbench: the clblast algorithm needs CLBlast, and this build has none (apt-get install "
                        "libclblast-dev, then rebuild with LENET5_CLBLAST=ON)");
#ifndef LENET5_HAVE_OPENCL
    (void)out;
    throw Error("this build has no OpenCL support (configure with -DLENET5_OPENCL=ON): nothing to benchmark");
#else
    out << use_requested_kernels(o.kernels_dir);
    const auto rt = std::make_shared<DeviceRuntime>(select_opencl_device(o.device));
    const OpenCLDevice& device = rt->device();
    OpenCLConv conv(rt);
    out << "lenet5 convbench: " << device.name << " [" << device.platform_name << "], " << o.repeats
        << " repeats (medians), ReLU, errors against the scalar reference at sampled elements\n"
        << std::left << std::setw(7) << "case" << std::setw(28) << "shape" << std::setw(9) << "algo" << std::right
        << std::setw(11) << "fwd_ms" << std::setw(11) << "copies_ms" << std::setw(10) << "GFLOP/s" << std::setw(11)
        << "bwd_ms" << std::setw(12) << "max_rel_err" << "\n";
    nlohmann::json rows = nlohmann::json::array();
    bool failed = false;
    for (const Case& c : cases(o)) {
        for (ConvAlgo algo : o.algos) {
            Row row;
            try {
                row = cl_checked([&] { return measure(conv, *rt, algo, c.shape, o); });
            } catch (const Error& e) {
                row.failure = e.what();
                rt->finish();
            }
            const bool ok = row.failure.empty() && row.error < kTolerance;
            failed |= !ok;
            const double gflops = row.forward_ms > 0 ? c.shape.flops() / row.forward_ms * 1e-6 : 0.0;
            out << std::left << std::setw(7) << c.group << std::setw(28) << c.shape.describe() << std::setw(9)
                << algo_name(algo) << std::right << std::fixed;
            if (!row.failure.empty()) {
                out << "  FAILED: " << row.failure << "\n";
            } else {
                out << std::setprecision(3) << std::setw(11) << row.forward_ms << std::setw(11) << row.copy_ms
                    << std::setprecision(1) << std::setw(10) << gflops << std::setprecision(3) << std::setw(11)
                    << row.backward_ms << std::scientific << std::setprecision(2) << std::setw(12) << row.error
                    << std::defaultfloat << (ok ? "" : "  FAILED") << "\n";
            }
            out << std::flush;
            const ConvShape& s = c.shape;
            rows.push_back({{"case", c.group}, {"batch", s.batch}, {"in_c", s.in_c}, {"in_h", s.in_h}, {"in_w", s.in_w},
                            {"out_c", s.out_c}, {"kernel", s.kernel}, {"stride", s.stride}, {"pad", s.pad},
                            {"algo", algo_name(algo)}, {"forward_ms", row.forward_ms}, {"forward_copy_ms", row.copy_ms},
                            {"gflops", gflops}, {"backward_ms", row.backward_ms}, {"max_rel_error", row.error},
                            {"ok", ok}, {"error", row.failure}});
        }
    }
    if (!o.json_path.empty())
        write_file_atomic(o.json_path, nlohmann::json{{"device", device.name},
                                                      {"platform", device.platform_name},
                                                      {"repeats", o.repeats},
                                                      {"rows", rows}}
                                               .dump(1) + "\n");
    return failed ? 1 : 0;
#endif
}

}  // namespace lenet5::conv
