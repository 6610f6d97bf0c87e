// lenet5: the command-line entry point. Every failure ends here as one line
// `lenet5: error: ...` and an exit status (2 usage, 1 anything else).
#include <iostream>

#include "atomic_file.h"
#include "cli.h"
#include "error.h"
#include "progress.h"
#include "report.h"
#ifdef LENET5_HAVE_OPENCL
#include "opencl_backend.h"
#endif

using namespace lenet5;

namespace {

int run_train(const TrainOptions& options) {
    ProgressBar bar;
    TrainObserver observer;
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
    const TrainResult result = train(options, observer);
    if (!options.json_path.empty()) write_file_atomic(options.json_path, train_report_json(result, options));
    return 0;
}

int run(const std::vector<std::string>& args) {
    const Command cmd = parse_command_line(args);
    switch (cmd.kind) {
        case Command::Kind::Help: std::cout << help_text(); return 0;
        case Command::Kind::Version: std::cout << "lenet5 " LENET5_VERSION "\n"; return 0;
        case Command::Kind::Devices:
#ifdef LENET5_HAVE_OPENCL
            print_opencl_devices(std::cout);
            return 0;
#else
            throw Error("this build has no OpenCL support (configure with -DLENET5_OPENCL=ON)");
#endif
        case Command::Kind::Eval: throw Error("eval is not implemented yet in this version");
        case Command::Kind::Train: return run_train(cmd.train);
    }
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const UsageError& e) {
        std::cerr << "lenet5: error: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "lenet5: error: " << e.what() << "\n";
        return 1;
    }
}
