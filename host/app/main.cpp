// lenet5: the command-line entry point. Every failure ends here as one line
// `lenet5: error: ...` and an exit status (2 usage, 1 anything else, 128+signal
// when interrupted).
#include <unistd.h>

#include <csignal>
#include <iostream>

#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "app/cli.h"
#include "app/openblas_guard.h"
#include "conv/convbench.h"
#include "common/error.h"
#include "train/mpi_world.h"
#include "app/progress.h"
#include "app/report.h"
#include "opencl/opencl_kernels.h"  // --kernels DIR; without OpenCL only to refuse it
#ifdef LENET5_HAVE_OPENCL
#include "opencl/opencl_backend.h"
#endif
#ifdef LENET5_HAVE_ONNX
#include "io/onnx_export.h"
#endif
#ifdef LENET5_HAVE_SIMD
#include "simd_ops.h"
#endif

using namespace lenet5;

namespace {

volatile std::sig_atomic_t g_signal = 0;

// The first SIGINT/SIGTERM lets the current step finish (the loop then saves and stops); a second
// ends the process at once, whatever it waits for.
extern "C" void on_signal(int sig) {
    if (g_signal) _exit(128 + sig);
    g_signal = sig;
}

void install_signal_handlers() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

// Under mpirun, rank 0 alone prints, saves and writes the JSON; every rank trains.
int run_train(const TrainOptions& options) {
    const bool root = mpi_world().root();
    ProgressBar bar;
    TrainObserver observer;
    if (root) {
        observer.on_start = [&](const RunInfo& info) {
            print_run_header(std::cout, info, options);
            print_table_header(std::cout);
        };
        observer.on_step = [&](int epoch, int step, int steps) {
            bar.update("epoch " + std::to_string(epoch), step, steps);
        };
        observer.on_epoch = [&](const EpochResult& r) {
            bar.clear();
            print_table_row(std::cout, r);
        };
    }
    // Every rank stops after the same step: the signal any rank got.
    observer.stop_requested = [] { return mpi_max(static_cast<int>(g_signal)); };
    const TrainResult result = train(options, observer);
    bar.clear();
    if (!root) return result.stopped_by ? 128 + result.stopped_by : 0;
    if (result.time_to_accuracy && !result.stopped_by) print_time_to_accuracy(std::cout, *result.time_to_accuracy);
    if (options.kernel_profile) print_kernel_profile(std::cout, result.epochs);
    if (!options.json_path.empty()) write_file_atomic(options.json_path, train_report_json(result, options));
    if (result.stopped_by) {
        std::cerr << "lenet5: interrupted by " << (result.stopped_by == SIGINT ? "SIGINT" : "SIGTERM") << " in epoch "
                  << result.stopped_epoch << " after step " << result.stopped_step
                  << (options.save_path.empty() ? "; nothing saved (no --save)" : "; checkpoint saved to " + options.save_path)
                  << "\n";
        return 128 + result.stopped_by;
    }
    return 0;
}

int run_eval(const EvalOptions& o) {
    const Checkpoint c = load_checkpoint(o.model_path);
    const Network net = checkpoint_model(c, o.model_path).net;
    auto engine = make_engine(net, o.engine);
    const std::string dir = resolve_data_dir(o.data_dir, o.dataset);
    const Dataset test_set = load_mnist(dir, Split::Test, o.test_limit);
    check_classes(net, test_set, dir);
    engine->upload(Split::Test, test_set);
    engine->set_params(c.params);
    RunInfo info;
    info.model = net.name;
    info.variant = engine->variant();
    info.device = engine->device();
    info.platform = engine->platform();
    info.test_samples = test_set.count;
    const EvalResult r = evaluate(*engine, net, test_set, true);
    std::cout << "lenet5: " << o.model_path << " (model " << net.name << ", epoch " << c.epoch << ") on " << info.variant << ", " << info.device
              << " [" << info.platform << "]\n";
    print_eval(std::cout, r);
    if (!o.json_path.empty()) write_file_atomic(o.json_path, eval_report_json(r, o.model_path, info));
    return 0;
}

// What this build was configured with (the compile definitions CMake sets), so that
// a bug report says what was built.
std::string build_options() {
    std::string opencl = "no", simd = "no", openmp = "no", mpi = "no", clblast = "no", onnx = "no", openblas = "no";
#ifdef LENET5_HAVE_OPENCL
    opencl = "yes";
#endif
#ifdef LENET5_HAVE_SIMD
    const std::string level = simd_level();
    simd = "avx2 avx512 (this CPU: " + (level.empty() ? "neither" : level) + ")";
#endif
#ifdef LENET5_HAVE_OPENMP
    openmp = "yes";
#endif
#ifdef LENET5_HAVE_MPI
    mpi = "yes";
#endif
#ifdef LENET5_HAVE_CLBLAST
    clblast = "yes";
#endif
#ifdef LENET5_HAVE_ONNX
    onnx = "yes";
#endif
#ifdef LENET5_HAVE_OPENBLAS
    openblas = "yes";
#endif
    return "build: OpenCL " + opencl + ", SIMD " + simd + ", OpenMP " + openmp + ", OpenBLAS " + openblas + ", CLBlast " +
           clblast + ", MPI " + mpi + ", ONNX " + onnx + "\n";
}

// The variant whose engine a command makes, or "" for a command that runs only OpenCL (tune,
// kernels) or several engines (train --workers).
std::string command_variant(const Command& cmd) {
    switch (cmd.kind) {
        case Command::Kind::Train: return cmd.train.engine.workers.empty() ? cmd.train.engine.variant : "";
        case Command::Kind::Eval: return cmd.eval.engine.variant;
        case Command::Kind::Infer: return cmd.infer.engine.variant;
        case Command::Kind::Check: return cmd.check.engine.variant;
        default: return "";
    }
}

// --kernels DIR (else $LENET5_KERNELS, which a host variant ignores): the kernel files the
// command's programs are built from, announced on the run's first line.
void use_kernel_folder_of(const Command& cmd) {
    if (!takes_kernel_folder(cmd.kind) || !cmd.kernels.dump_dir.empty()) return;
    if (requested_kernel_folder(cmd.kernels_dir).empty()) return;
    const std::string variant = resolve_variant(command_variant(cmd));
    if (is_host_variant(variant)) {
        if (cmd.kernels_dir.empty()) return;
        const std::string which = command_variant(cmd) == "auto" ? "auto chose " + variant + ", which" : variant;
        throw UsageError("--kernels: variant " + which +
                         " runs on the host and builds no OpenCL kernels (use gpu, gpu-constant or gpu-local)");
    }
#ifdef LENET5_HAVE_OPENCL
    std::cout << use_requested_kernels(cmd.kernels_dir) << std::flush;
#else
    throw Error("this build has no OpenCL support: --kernels (or LENET5_KERNELS) has nothing to build");
#endif
}

int run(const std::vector<std::string>& args) {
    // convbench parses its own flags (host/conv/convbench.cpp).
    if (!args.empty() && args[0] == "convbench") return conv::run_convbench({args.begin() + 1, args.end()}, std::cout);
    const Command cmd = parse_command_line(args);
    use_kernel_folder_of(cmd);
    switch (cmd.kind) {
        case Command::Kind::Help:
            std::cout << (cmd.help_command.empty() ? help_text() : command_help(cmd.help_command));
            return 0;
        case Command::Kind::Version: {
            std::string variants;
            for (const auto& v : built_variants()) variants += (variants.empty() ? "" : " ") + v;
            std::cout << "lenet5 " LENET5_VERSION "\nvariants: " << variants << "\ndefault: " LENET5_DEFAULT_VARIANT "\n"
                      << build_options();
            return 0;
        }
        case Command::Kind::Models: print_models(std::cout); return 0;
        case Command::Kind::Devices:
#ifdef LENET5_HAVE_OPENCL
            print_opencl_devices(std::cout);
            return 0;
#else
            throw Error("this build has no OpenCL support (configure with -DLENET5_OPENCL=ON)");
#endif
        case Command::Kind::Eval: return run_eval(cmd.eval);
        case Command::Kind::Tune:
#ifdef LENET5_HAVE_OPENCL
            return run_tune(cmd.tune, std::cout);
#else
            throw Error("this build has no OpenCL support (configure with -DLENET5_OPENCL=ON): nothing to tune");
#endif
        case Command::Kind::Export:
#ifdef LENET5_HAVE_ONNX
            std::cout << export_checkpoint(cmd.exporting.model_path, cmd.exporting.onnx_path) << "\n";
            return 0;
#else
            throw Error("this build has no ONNX support (install libonnx-dev and configure with -DLENET5_ONNX=ON): cannot export");
#endif
        case Command::Kind::Infer:
#ifdef LENET5_HAVE_ONNX
            return run_infer(cmd.infer, std::cout);
#else
            throw Error("this build has no ONNX support (install libonnx-dev and libprotobuf-dev, configure with -DLENET5_ONNX=ON)");
#endif
        case Command::Kind::Check: return run_check(cmd.check, std::cout);
        case Command::Kind::Kernels:
#ifdef LENET5_HAVE_OPENCL
            return run_kernels(cmd.kernels, std::cout);
#else
            throw Error("this build has no OpenCL support (configure with -DLENET5_OPENCL=ON): it has no kernels");
#endif
        case Command::Kind::Train:
            install_signal_handlers();  // before the data loads, so an early Ctrl-C is not lost
            return run_train(cmd.train);
    }
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    one_openblas_thread_under_a_memory_limit(argv);
    const MpiSession mpi(&argc, &argv);
    // Under mpirun a failing rank ends them all (mpi_abort), rather than leave the others
    // waiting for it in a collective.
    const std::string rank = mpi_world().size > 1 ? "rank " + std::to_string(mpi_world().rank) + ": " : "";
    try {
        return run(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const UsageError& e) {
        std::cerr << "lenet5: error: " + rank + e.what() + "\n" << std::flush;  // one write: ranks' lines interleave
        mpi_abort(2);
        return 2;
    } catch (const AgreedError& e) {
        std::cerr << "lenet5: error: " + rank + e.what() + "\n" << std::flush;
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "lenet5: error: " + rank + e.what() + "\n" << std::flush;
        mpi_abort(1);
        return 1;
    }
}
