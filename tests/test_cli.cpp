// The command line's contract: exit codes, one-line error messages, and the help texts' structure.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "app/cli.h"
#include "cli_runner.h"
#include "common/error.h"
#include "test_support.h"

namespace {

using lenet5::test::slurp;
using Result = lenet5::test::CliResult;
constexpr auto& run = lenet5::test::run_cli;

void expect_usage_error(const std::string& args, const std::string& mentions) {
    const Result r = run(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(r.err.rfind("lenet5: error: ", 0), 0u) << args << ": " << r.err;
    EXPECT_NE(r.err.find(mentions), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}


// Each command and the options its --help defines (a line `  --flag ...`): exactly what it parses.
const std::map<std::string, std::set<std::string>>& command_options() {
    static const std::map<std::string, std::set<std::string>> options{
        {"train",
         {"--model", "--init", "--dataset", "--data", "--train-limit", "--test-limit", "--seed", "--epochs", "--batch",
          "--lr", "--lr-decay", "--momentum", "--weight-decay", "--schedule", "--warmup", "--nesterov",
          "--optimizer", "--beta1", "--beta2", "--eps",
          "--label-smoothing", "--target-accuracy", "--eval-every", "--variant", "--device", "--group", "--threads",
          "--conv-algo", "--workers", "--grad-precision", "--sync-every", "--kernels", "--save", "--resume", "--json",
          "--kernel-profile"}},
        {"eval",
         {"--model", "--dataset", "--data", "--test-limit", "--variant", "--device", "--group", "--threads",
          "--conv-algo", "--kernels", "--json"}},
        {"tune", {"--model", "--variant", "--batch", "--device", "--kernels", "--groups", "--steps", "--cache", "--conv"}},
        {"infer",
         {"--onnx", "--model", "--input", "--random", "--seed", "--batch", "--variant", "--device", "--threads",
          "--conv-algo", "--kernels", "--repeats", "--output", "--json"}},
        {"convbench",
         {"--cases", "--sizes", "--strides", "--channels", "--filters", "--batch", "--algos", "--device", "--kernels",
          "--repeats", "--forward-only", "--json"}},
        {"check",
         {"--variant", "--model", "--batch", "--batches", "--optimizer", "--data", "--device", "--group", "--threads",
          "--conv-algo", "--kernels", "--json"}},
        {"kernels", {"--model", "--variant", "--batch", "--device", "--kernels", "--dump"}},
        {"models", {}},
        {"export", {"--model", "--onnx"}},
        {"devices", {}},
    };
    return options;
}

// The options a help text defines: the flag that starts each `  --flag ...` line.
std::set<std::string> defined_options(const std::string& help) {
    std::set<std::string> flags;
    const std::regex option_line(R"(^  (--[a-z][a-z0-9-]*))");
    std::istringstream lines(help);
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_search(line, m, option_line)) flags.insert(m[1]);
    }
    return flags;
}

// Every `--flag` word a text names, but in a quoted command line (`lenet5 kernels --dump DIR`), which
// points at another command.
std::set<std::string> named_options(const std::string& help) {
    std::set<std::string> flags;
    const std::string text = std::regex_replace(help, std::regex("`[^`]*`"), "");
    const std::regex flag(R"(--[a-z][a-z0-9-]*)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), flag); it != std::sregex_iterator(); ++it)
        flags.insert(it->str());
    return flags;
}

}  // namespace

TEST(Cli, HelpFitsAScreenAndNamesEveryCommand) {
    const Result r = run("--help");
    EXPECT_EQ(r.status, 0);
    EXPECT_LE(std::count(r.out.begin(), r.out.end(), '\n'), 40) << r.out;
    for (const auto& [command, options] : command_options())
        EXPECT_NE(r.out.find("\n  " + command + " "), std::string::npos) << command << " is not listed, one a line";
    EXPECT_NE(r.out.find("lenet5 COMMAND --help"), std::string::npos);
    EXPECT_NE(r.out.find("--version"), std::string::npos);
    // The commands' options are under their own --help, not here.
    for (const char* flag : {"--target-accuracy", "--epochs", "--batch", "--variant", "--dump", "--onnx"})
        EXPECT_EQ(r.out.find(flag), std::string::npos) << flag;
    EXPECT_EQ(run("-h").out, r.out);
    EXPECT_EQ(run("help").out, r.out);
    const Result v = run("--version");
    EXPECT_EQ(v.status, 0);
    EXPECT_EQ(v.out.rfind("lenet5 ", 0), 0u);
}

TEST(Cli, EachCommandsHelpDefinesItsOwnOptionsInGroups) {
    for (const auto& [command, options] : command_options()) {
        const Result r = run(command + " --help");
        ASSERT_EQ(r.status, 0) << command << ": " << r.err;
        EXPECT_EQ(r.out.rfind("usage: lenet5 " + command, 0), 0u) << r.out;
        EXPECT_EQ(defined_options(r.out), options) << command << "'s help:\n" << r.out;
        // Options go in groups: a heading line `name:` before the first of them.
        if (!options.empty()) {
            EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n[a-z][a-z ]*:\n  --)"))) << r.out;
        }
        // No other command's option is named, but in a quoted command line.
        for (const std::string& flag : named_options(r.out)) {
            if (options.count(flag)) continue;
            for (const auto& [other, theirs] : command_options())
                EXPECT_TRUE(other == command || !theirs.count(flag))
                    << command << "'s help names " << flag << ", an option of " << other;
        }
        EXPECT_EQ(run(command + " --device 0 -h").out, r.out) << "-h, after other flags";
        EXPECT_EQ(run("help " + command).out, r.out);
    }
    const std::string train = run("train --help").out, eval = run("eval --help").out;
    EXPECT_NE(train.find("--target-accuracy"), std::string::npos);
    EXPECT_EQ(eval.find("--target-accuracy"), std::string::npos);
    for (const char* group : {"model and data:", "optimisation and schedule:", "time to accuracy:",
                              "devices and workers:", "checkpoints and output files:"})
        EXPECT_NE(train.find(group), std::string::npos) << group;
}

// Every option a command's help defines is one its parser takes (convbench parses its own).
TEST(Cli, EveryOptionAHelpDefinesIsParsed) {
    for (const auto& [command, options] : command_options()) {
        if (command == "convbench") continue;
        for (const std::string& flag : defined_options(lenet5::command_help(command))) {
            try {
                lenet5::parse_command_line({command, flag});  // a flag that takes a value: "needs a value"
            } catch (const lenet5::UsageError& e) {
                EXPECT_EQ(std::string(e.what()).find("unknown option"), std::string::npos) << command << " " << flag;
            }
        }
    }
}

TEST(Cli, CheckHelpSaysWhatItRuns) {
    const std::string help = run("check --help").out;
    for (const char* text : {"layer by layer", "as train runs them", "fused", "networks that start fully connected",
                             "a launch a step", "in one work-group", "in two", "layer, phase, step and path",
                             "first failure"})
        EXPECT_NE(help.find(text), std::string::npos) << text;
}

TEST(Cli, HelpOfAnUnknownCommandIsAUsageError) {
    expect_usage_error("foo --help", "unknown command 'foo'");
    expect_usage_error("help foo", "unknown command 'foo'");
    expect_usage_error("--help foo", "unknown command 'foo'");
    expect_usage_error("train --bogus", "lenet5 train --help");
}

TEST(Cli, BadCommandLinesExitTwoWithOneLine) {
    expect_usage_error("", "no command");
    expect_usage_error("fly", "unknown command 'fly'");
    expect_usage_error("train --bogus", "unknown option '--bogus'");
    expect_usage_error("train --epochs", "--epochs needs a value");
    expect_usage_error("train --epochs zero", "'zero' is not a whole number");
    expect_usage_error("train --epochs 0", "out of range");
    expect_usage_error("train --batch -3", "out of range");
    expect_usage_error("train --batch 12x", "not a whole number");
    expect_usage_error("train --lr abc", "not a number");
    expect_usage_error("train --lr 0", "--lr must be greater than 0");
    expect_usage_error("train --momentum 1", "out of range");
    expect_usage_error("train --variant turbo", "unknown variant 'turbo'");
    expect_usage_error("train --optimizer rmsprop", "'rmsprop' is not sgd, adam or adamw");
    expect_usage_error("train --optimizer adam --momentum 0.9", "--momentum applies to sgd, not --optimizer adam");
    expect_usage_error("train --optimizer adamw --nesterov", "--nesterov applies to sgd, not --optimizer adamw");
    expect_usage_error("train --beta2 0.99", "--beta2 applies to --optimizer adam or adamw, not sgd");
    expect_usage_error("train --optimizer adam --beta1 1", "out of range");
    expect_usage_error("eval", "eval needs --model");
    expect_usage_error("devices --epochs 3", "unknown option");
}

TEST(Cli, MissingDataFolderExitsOneNamingTheFile) {
    const Result r = run("train --variant cpu --data /nonexistent/mnist --epochs 1");
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err.rfind("lenet5: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("/nonexistent/mnist"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("fetch_mnist.sh"), std::string::npos) << r.err;
}

// Adam's header line and JSON name the optimizer and its settings, and its default lr.
TEST(Cli, AdamRunSaysItsOptimizer) {
    const std::string dir = lenet5::test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    const std::string json = ::testing::TempDir() + "lenet5_cli_adam.json";
    std::remove(json.c_str());
    const Result r = run("train --variant cpu --optimizer adam --epochs 1 --train-limit 64 --test-limit 64 --data " +
                         dir + " --json " + json);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("lr 0.001"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("adam (beta1 0.9, beta2 0.999, eps 1e-08)"), std::string::npos) << r.out;
    const std::string report = slurp(json);
    for (const char* key : {"\"optimizer\": \"adam\"", "\"beta1\"", "\"beta2\"", "\"eps\""})
        EXPECT_NE(report.find(key), std::string::npos) << key << " in " << report;
    EXPECT_EQ(report.find("\"momentum\""), std::string::npos) << report;
}

TEST(Cli, TrainPrintsTableAndWritesJson) {
    const std::string dir = lenet5::test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    const std::string json = ::testing::TempDir() + "lenet5_cli_report.json";
    std::remove(json.c_str());
    const Result r = run("train --variant cpu --epochs 2 --train-limit 640 --test-limit 200 --batch 32 --data " +
                         dir + " --json " + json);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("forward_ms"), std::string::npos);
    EXPECT_NE(r.out.find("\n    2 "), std::string::npos) << r.out;  // the second epoch's row
    const std::string report = slurp(json);
    for (const char* key : {"\"variant\": \"cpu\"", "\"batch\": 32", "\"train_samples\": 640", "\"test_samples\": 200",
                            "\"epoch\": 2", "\"forward_ms\"", "\"backward_ms\"", "\"update_ms\"", "\"transfer_ms\"",
                            "\"wall_ms\"", "\"train_loss\"", "\"train_accuracy\"", "\"test_accuracy\"",
                            "\"final_test_accuracy\""})
        EXPECT_NE(report.find(key), std::string::npos) << key << " in " << report;
}

TEST(Cli, KernelProfileListsEveryKernelOrSaysThereAreNone) {
    const std::string dir = lenet5::test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    const std::string common = " --epochs 1 --train-limit 96 --test-limit 50 --batch 32 --kernel-profile --data " + dir;
    const Result host = run("train --variant cpu" + common);
    ASSERT_EQ(host.status, 0) << host.err;
    EXPECT_NE(host.out.find("kernel profile: this variant runs no OpenCL kernels"), std::string::npos) << host.out;
#ifdef LENET5_HAVE_OPENCL
    const Result r = run("train --variant gpu-local" + common);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("kernel profile over 3 training steps"), std::string::npos) << r.out;
    // The epoch's first step is a probe (four launches, each phase apart), the others two fused launches.
    EXPECT_NE(r.out.find("\nbackward_samples                                  0.33"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\nstep_samples                                      0.67"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\nall                                               2.67"), std::string::npos) << r.out;
#endif
}

TEST(Cli, TuneTimesEachGroupAndCachesTheFastest) {
    expect_usage_error("tune --groups 32,48", "--groups: 48 is not a power of two");
    expect_usage_error("tune --variant gpu,omp", "'omp' is not an OpenCL variant");
    expect_usage_error("tune --groups 32,,64", "has an empty item");
#ifdef LENET5_HAVE_OPENCL
    const std::string cache = ::testing::TempDir() + "lenet5_cli_tune_" + std::to_string(::getpid()) + ".tsv";
    std::remove(cache.c_str());
    const Result r = run("tune --variant gpu-local --batch 4 --groups 16,32 --steps 1 --cache " + cache);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("gpu-local:\n     16 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n     32 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("fastest: "), std::string::npos) << r.out;
    // Then each knob's other settings at the fastest group.
    EXPECT_NE(r.out.find("  knobs at "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n    FWD_RUN=4 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n    FC_LANES=32 "), std::string::npos) << r.out;
    const std::string text = slurp(cache);
    EXPECT_NE(text.find("\tgpu-local\t4\t"), std::string::npos) << text;
#endif
}

TEST(Cli, SigintFinishesTheStepSavesAndExits130) {
    const std::string dir = lenet5::test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    const std::string ck = ::testing::TempDir() + "lenet5_cli_sigint.ck";
    std::remove(ck.c_str());
    const std::string err = ::testing::TempDir() + "lenet5_cli_sigint_err.txt";
    // The shell sends SIGINT three seconds into a run far longer than that.
    const std::string cmd = "(" + std::string(LENET5_BINARY) + " train --variant cpu --epochs 50 --train-limit 2000 " +
                            "--test-limit 100 --data " + dir + " --save " + ck + " >/dev/null 2>" + err +
                            " & p=$!; sleep 3; kill -INT $p; wait $p)";
    const int raw = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(raw));
    EXPECT_EQ(WEXITSTATUS(raw), 130);
    const std::string msg = slurp(err);
    EXPECT_NE(msg.find("lenet5: interrupted by SIGINT"), std::string::npos) << msg;
    EXPECT_NE(msg.find("checkpoint saved to " + ck), std::string::npos) << msg;
    // The checkpoint it saved evaluates.
    const Result e = run("eval --variant cpu --model " + ck + " --test-limit 100 --data " + dir);
    EXPECT_EQ(e.status, 0) << e.err;
    EXPECT_NE(e.out.find("confusion"), std::string::npos);
}

TEST(Cli, EvalOfABrokenCheckpointExitsOne) {
    const std::string bad = ::testing::TempDir() + "lenet5_cli_bad.ck";
    {
        std::ofstream f(bad);
        f << "not a checkpoint";
    }
    const Result r = run("eval --model " + bad + " --variant cpu");
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "lenet5: error: " + bad + ": not a lenet5 checkpoint (bad magic)\n");
}

// --target-accuracy and --eval-every: the time to accuracy on its own line after the table and in
// the JSON; a target never met is said so, and the run still exits 0. 1% is met by the first
// evaluation (after 2 of the epoch's 20 steps).
TEST(Cli, TargetAccuracyReportsTheTimeToItOrThatItWasNotReached) {
    const std::string dir = lenet5::test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    const std::string json = ::testing::TempDir() + "lenet5_cli_tta.json";
    const std::string common = "train --variant cpu --epochs 1 --train-limit 640 --test-limit 100 --batch 32 --data " +
                               dir + " --json " + json;
    Result r = run(common + " --target-accuracy 1% --eval-every 2");
    ASSERT_EQ(r.status, 0) << r.err;
    const size_t line = r.out.find("\ntime to 1.00%: ");
    ASSERT_NE(line, std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" at step 2 (epoch 0.10), ", line), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" s wall with the evaluations\n", line), std::string::npos) << r.out;
    EXPECT_LT(r.out.find("\n    1 "), line) << "after the table: " << r.out;
    auto report = nlohmann::json::parse(slurp(json));
    auto t = report["time_to_accuracy"];
    EXPECT_EQ(t["target"].get<double>(), 0.01);
    EXPECT_TRUE(t["reached"].get<bool>());
    EXPECT_EQ(t["step"].get<int>(), 2);
    EXPECT_DOUBLE_EQ(t["epoch"].get<double>(), 0.1);
    EXPECT_GE(t["test_accuracy"].get<double>(), 0.01);
    EXPECT_GT(t["train_seconds"].get<double>(), 0.0);
    EXPECT_GT(t["wall_seconds"].get<double>(), t["train_seconds"].get<double>());
    ASSERT_EQ(report["evaluations"].size(), 1u);
    EXPECT_EQ(report["epochs"][0]["epoch"].get<int>(), 1);

    r = run(common + " --target-accuracy 1.0");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("\ntime to 100.00%: not reached in 20 steps (epoch 1.00; best "), std::string::npos) << r.out;
    report = nlohmann::json::parse(slurp(json));
    EXPECT_FALSE(report["time_to_accuracy"]["reached"].get<bool>());
    EXPECT_EQ(report["time_to_accuracy"]["step"].get<int>(), 20);
    EXPECT_EQ(report.count("evaluations"), 0u);  // only with --eval-every
}

TEST(Cli, BadScheduleAndTargetFlagsExitTwoWithOneLine) {
    expect_usage_error("train --target-accuracy 0", "--target-accuracy: 0 is out of range");
    expect_usage_error("train --target-accuracy 101%", "out of range");
    expect_usage_error("train --target-accuracy 99", "out of range");
    expect_usage_error("train --target-accuracy high", "'high' is not an accuracy (e.g. 0.99 or 99%)");
    expect_usage_error("train --eval-every 0", "out of range");
    expect_usage_error("train --schedule linear", "--schedule: 'linear' is not step, onecycle or cosine");
    expect_usage_error("train --warmup -1", "out of range");
    expect_usage_error("train --label-smoothing 1", "out of range");
    // Rules of several settings or of the model, checked before any data is read.
    expect_usage_error("train --schedule cosine --lr-decay 0.9 --data /nonexistent",
                       "--lr-decay applies to the step schedule, not --schedule cosine");
    expect_usage_error("train --warmup 2 --epochs 2 --data /nonexistent", "is not shorter than the run (2 epochs)");
    expect_usage_error("train --model mlp --label-smoothing 0.1 --data /nonexistent",
                       "--label-smoothing needs a softmax cross-entropy loss; model mlp uses squared");
}
