// The command line of DESIGN.md: parsing and the help text.
#pragma once
#include <string>
#include <vector>

#include "app/check_command.h"
#include "app/infer_command.h"
#include "app/kernels_command.h"
#include "train/trainer.h"
#include "opencl/tune.h"

namespace lenet5 {

struct EvalOptions {
    EngineRequest engine;
    std::string model_path, data_dir, json_path;
    std::string dataset = "mnist";
    int test_limit = 0;
};

struct ExportOptions {
    std::string model_path, onnx_path;  // the checkpoint, the .onnx file to write
};

struct Command {
    enum class Kind { Train, Eval, Tune, Devices, Models, Help, Version, Export, Infer, Check, Kernels } kind = Kind::Help;
    TrainOptions train;
    EvalOptions eval;
    TuneOptions tune;
    ExportOptions exporting;
    InferOptions infer;
    CheckOptions check;
    KernelsOptions kernels;
    std::string kernels_dir;  // --kernels DIR: the OpenCL kernel files to build from (opencl_kernels.h)
    std::string help_command;  // Help: the command whose options to print; empty: the list of commands
};

// Whether a command builds OpenCL programs, so takes --kernels DIR (convbench parses its own).
bool takes_kernel_folder(Command::Kind kind);

// Throws UsageError (exit 2) for an unknown command or flag, a missing or bad value.
Command parse_command_line(const std::vector<std::string>& args);

// `lenet5 --help`: the commands, one line each, and the global options (at most 40 lines).
std::string help_text();
// `lenet5 COMMAND --help`: the command's own options, in groups; empty for an unknown command.
std::string command_help(const std::string& command);

}  // namespace lenet5
