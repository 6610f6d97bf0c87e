// Training across processes: `mpirun -np 2 lenet5 train` against one process with the same
// global batch and against two workers in one process, resuming under mpirun, bf16 and local SGD
// across ranks, and ranks that fail, disagree or die ending the run instead of hanging.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "io/checkpoint.h"
#include "train/mpi_world.h"
#ifdef LENET5_HAVE_SIMD
#include "simd_ops.h"
#endif
#include "test_support.h"

using lenet5::test::relative_error;
using lenet5::test::run_cli;

// mpirun's default binds each of up to 2 ranks to one core: the rank is told when that leaves it
// less than its share of the machine.
TEST(MpiBinding, WarnsWhenARankGetsLessThanItsShareOfTheCores) {
    const std::string w = lenet5::binding_warning(1, 32, 2);
    EXPECT_NE(w.find("bound rank 0 to 1 of this machine's 32 cores"), std::string::npos) << w;
    EXPECT_NE(w.find("--map-by slot:PE=16"), std::string::npos) << w;
    EXPECT_NE(w.find("--bind-to none"), std::string::npos) << w;
    EXPECT_NE(lenet5::binding_warning(15, 32, 2), "");
    EXPECT_EQ(lenet5::binding_warning(16, 32, 2), "");  // its share
    EXPECT_EQ(lenet5::binding_warning(1, 2, 2), "");    // 2 ranks, 2 cores: a core each is the share
    EXPECT_EQ(lenet5::binding_warning(1, 1, 1), "");
}

#ifdef LENET5_HAVE_MPI
namespace {

// mpirun as root needs the two OMPI_ variables; --oversubscribe lets 2 ranks share fewer
// cores. Under the sanitizer build, leak checking is off for the ranks: Open MPI's components
// leak at MPI_Finalize and are unloaded by then, so no suppression can name them.
const std::string kMpirun =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 timeout 120 "
    "mpirun --oversubscribe ";

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

// A shell command with its output captured.
lenet5::test::CliResult run_command(const std::string& command) {
    const std::string base = ::testing::TempDir() + "lenet5_mpi_" + std::to_string(::getpid());
    const std::string cmd = command + " >" + base + ".out 2>" + base + ".err </dev/null";
    const int raw = std::system(cmd.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, lenet5::test::slurp(base + ".out"), lenet5::test::slurp(base + ".err")};
}

// run_cli with a command in front of the binary: runs "<prefix> lenet5 <args>".
lenet5::test::CliResult run_under(const std::string& prefix, const std::string& args) {
    return run_command(prefix + std::string(LENET5_BINARY) + " " + args);
}

// The first epoch's training loss in a --json report.
double train_loss(const std::string& json_path) {
    return nlohmann::json::parse(lenet5::test::slurp(json_path))["epochs"][0]["train_loss"].get<double>();
}

struct ScratchDir {
    std::string path = ::testing::TempDir() + "lenet5_mpi_dir_" + std::to_string(::getpid());
    ScratchDir() { std::filesystem::create_directories(path); }
    ~ScratchDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST(Mpi, TwoRanksTrainAsOneProcessAndResume) {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
    const std::string data = lenet5::test::mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched";
    ScratchDir dir;
    const std::string args = "train --variant cpu --train-limit 1024 --test-limit 300 --epochs 1 --data " + data;
    auto one = run_cli(args + " --save " + dir.path + "/one.ck --json " + dir.path + "/one.json");
    ASSERT_EQ(one.status, 0) << one.err;
    auto two = run_under(kMpirun + "-np 2 ", args + " --save " + dir.path + "/two.ck --json " + dir.path + "/two.json");
    ASSERT_EQ(two.status, 0) << two.err;
    EXPECT_NEAR(train_loss(dir.path + "/two.json"), train_loss(dir.path + "/one.json"),
                1e-3 * train_loss(dir.path + "/one.json"));
    EXPECT_NE(two.out.find("(rank 0 of 2)"), std::string::npos) << two.out;
    EXPECT_EQ(std::count(two.out.begin(), two.out.end(), '\n'), std::count(one.out.begin(), one.out.end(), '\n'))
        << "rank 0 alone prints:\n" << two.out;
    const auto a = lenet5::load_checkpoint(dir.path + "/one.ck"), b = lenet5::load_checkpoint(dir.path + "/two.ck");
    EXPECT_LT(relative_error(b.params, a.params), 1e-5);
    // Every rank loads the checkpoint and trains on.
    auto resumed = run_under(kMpirun + "-np 2 ", args + " --resume " + dir.path + "/two.ck --epochs 2");
    ASSERT_EQ(resumed.status, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("\n    2 "), std::string::npos) << resumed.out;
}

// One reducer: two ranks sum their gradients as two workers of one process do, bit for bit. With
// avx the tail's layers (C5, F6, output) are announced during the backward pass, and their
// exchange progresses while the head's runs.
TEST(Mpi, TwoRanksTrainAsTwoWorkersBitForBit) {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
    const std::string data = lenet5::test::mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched";
#ifdef LENET5_HAVE_SIMD
    const std::string variant = lenet5::simd_ops() ? "avx" : "cpu";
#else
    const std::string variant = "cpu";
#endif
    ScratchDir dir;
    const std::string args = "train --variant " + variant + " --train-limit 640 --test-limit 100 --epochs 1 --data " + data;
    auto workers = run_cli(args + " --workers " + variant + "@1," + variant + "@1 --save " + dir.path + "/workers.ck");
    ASSERT_EQ(workers.status, 0) << workers.err;
    auto ranks = run_under(kMpirun + "-np 2 ", args + " --save " + dir.path + "/ranks.ck");
    ASSERT_EQ(ranks.status, 0) << ranks.err;
    EXPECT_EQ(lenet5::load_checkpoint(dir.path + "/ranks.ck").params,
              lenet5::load_checkpoint(dir.path + "/workers.ck").params);
}

// On one machine the ranks sum through shared memory in rank order, as workers of one process
// add up their gradients: four ranks train bit for bit as four workers (MPI's own allreduce pairs
// them up differently). With LENET5_MPI_SHARED=0 two ranks take MPI_Iallreduce, still bit for bit.
TEST(Mpi, RanksOnOneMachineSumInRankOrderAsWorkersDo) {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
    const std::string data = lenet5::test::mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched";
    ScratchDir dir;
    const std::string args = "train --variant cpu --train-limit 512 --test-limit 100 --epochs 1 --data " + data;
    struct Case {
        int ranks;
        const char* env;
    };
    for (const Case& c : {Case{4, ""}, Case{2, "LENET5_MPI_SHARED=0 "}}) {
        std::string list;
        for (int i = 0; i < c.ranks; ++i) list += std::string(i ? "," : "") + "cpu@1";
        auto workers = run_cli(args + " --workers " + list + " --save " + dir.path + "/workers.ck");
        ASSERT_EQ(workers.status, 0) << workers.err;
        auto ranks = run_under(std::string(c.env) + kMpirun + "-x LENET5_MPI_SHARED -np " + std::to_string(c.ranks) + " ",
                               args + " --save " + dir.path + "/ranks.ck");
        ASSERT_EQ(ranks.status, 0) << c.env << ranks.err;
        EXPECT_EQ(lenet5::load_checkpoint(dir.path + "/ranks.ck").params,
                  lenet5::load_checkpoint(dir.path + "/workers.ck").params)
            << c.ranks << " ranks " << c.env;
    }
}

// --target-accuracy under mpirun: every rank stops at the step two workers of one process stop at,
// the first mid-epoch evaluation at or above the target (a rank that went on alone would wait for
// the others in its next exchange until the timeout), and rank 0 saves where they stopped.
TEST(Mpi, EveryRankStopsAtTheFirstEvaluationAtOrAboveTheTarget) {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
    const std::string data = lenet5::test::mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched";
    ScratchDir dir;
    const std::string args = "train --variant cpu --train-limit 640 --test-limit 100 --batch 32 --epochs 2 "
                             "--eval-every 4 --data " + data;
    auto workers = run_cli(args + " --workers cpu@1,cpu@1 --json " + dir.path + "/workers.json");
    ASSERT_EQ(workers.status, 0) << workers.err;
    // The first evaluation inside an epoch (20 steps) above every earlier one.
    const auto evals = nlohmann::json::parse(lenet5::test::slurp(dir.path + "/workers.json"))["evaluations"];
    double best = 0, target = 0;
    int step = 0;
    for (size_t k = 0; k < evals.size() && !step; ++k) {
        const double accuracy = evals[k]["test_accuracy"].get<double>();
        if (k > 0 && accuracy > best && evals[k]["step"].get<int>() % 20 != 0) {
            step = evals[k]["step"].get<int>();
            target = accuracy - 0.001;  // the same test: accuracies here are whole hundredths
        }
        best = std::max(best, accuracy);
    }
    ASSERT_GT(step, 0) << "no mid-epoch evaluation improves on the ones before it";
    auto ranks = run_under(kMpirun + "-np 2 ", args + " --target-accuracy " + std::to_string(target) + " --json " +
                                                   dir.path + "/ranks.json --save " + dir.path + "/ranks.ck");
    ASSERT_EQ(ranks.status, 0) << ranks.err;
    const auto t = nlohmann::json::parse(lenet5::test::slurp(dir.path + "/ranks.json"))["time_to_accuracy"];
    EXPECT_TRUE(t["reached"].get<bool>());
    EXPECT_EQ(t["step"].get<int>(), step);
    const auto c = lenet5::load_checkpoint(dir.path + "/ranks.ck");
    EXPECT_EQ(c.epoch * 20 + c.step, static_cast<uint32_t>(step));
}

// The options that cut the bytes, across ranks: close to the exact run after an epoch.
TEST(Mpi, Bf16AndLocalSgdTrainAcrossRanks) {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
    const std::string data = lenet5::test::mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched";
    ScratchDir dir;
    const std::string args = "train --variant cpu --train-limit 640 --test-limit 100 --epochs 1 --data " + data;
    auto exact = run_under(kMpirun + "-np 2 ", args + " --json " + dir.path + "/exact.json");
    ASSERT_EQ(exact.status, 0) << exact.err;
    const double loss = train_loss(dir.path + "/exact.json");
    for (const char* option : {"--grad-precision bf16", "--sync-every 4"}) {
        auto r = run_under(kMpirun + "-np 2 ", args + " " + std::string(option) + " --json " + dir.path + "/cut.json");
        ASSERT_EQ(r.status, 0) << option << ": " << r.err;
        EXPECT_NEAR(train_loss(dir.path + "/cut.json"), loss, 0.05 * loss) << option;
    }
}

// Ranks started with different data or models: every rank says so in one line and ends.
TEST(Mpi, RanksThatDisagreeEndWithOneLineEach) {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
    const std::string data = lenet5::test::mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched";
    const std::string args = "train --variant cpu --test-limit 100 --epochs 1 --data " + data;
    struct Case {
        const char* rank1;
        const char* message;
    };
    for (const Case& c : {Case{"--train-limit 256", "the ranks disagree on the number of training images: rank 0 has 512, rank 1 has 256"},
                          Case{"--train-limit 512 --model mlp", "the ranks disagree on the model (network hash)"}}) {
        const auto r = run_under(kMpirun + "-np 1 " + LENET5_BINARY + " " + args + " --train-limit 512 : -np 1 ",
                                 args + " " + c.rank1);
        EXPECT_EQ(r.status, 1) << c.rank1 << ": " << r.err;
        for (const char* rank : {"rank 0: ", "rank 1: "})
            EXPECT_NE(r.err.find(std::string("lenet5: error: ") + rank + c.message), std::string::npos) << r.err;
    }
}

// A rank killed mid-run: mpirun ends the others and says which rank it was, without waiting for a timeout.
TEST(Mpi, ARankThatDiesEndsTheRun) {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
    const std::string data = lenet5::test::mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched";
    const std::string run = std::string(LENET5_BINARY) + " train --variant cpu --train-limit 256 --test-limit 10 --epochs 100000 --data " + data;
    const auto t0 = std::chrono::steady_clock::now();
    // Rank 1 runs under a shell that SIGKILLs it after 2 seconds, in the middle of its exchanges.
    const auto r = run_command(kMpirun + "-np 1 " + run + " : -np 1 sh -c '" + run + " & p=$!; sleep 2; kill -9 $p; wait $p'");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.status, 124) << "timed out: the other rank hung";
    EXPECT_LT(s, 60.0);
    EXPECT_NE(r.err.find("non-zero status"), std::string::npos) << r.err;
}

// One rank bound to one core of several is warned once; unbound, it is not.
TEST(Mpi, ARankBoundToOneCoreOfSeveralIsWarned) {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "one core: nothing to bind away";
    const auto bound = run_under(kMpirun + "-np 1 --bind-to core ", "devices");
    ASSERT_EQ(bound.status, 0) << bound.err;
    EXPECT_NE(bound.err.find("lenet5: warning: mpirun bound rank 0 to 1 of this machine's"), std::string::npos) << bound.err;
    const auto unbound = run_under(kMpirun + "-np 1 --bind-to none ", "devices");
    ASSERT_EQ(unbound.status, 0) << unbound.err;
    EXPECT_EQ(unbound.err.find("warning"), std::string::npos) << unbound.err;
}

TEST(Mpi, AFailingRankEndsTheRunWithItsError) {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
    const std::string good = "train --variant cpu --train-limit 512 --epochs 1";
    // Rank 1 cannot find its data while rank 0 waits for it in the first step.
    const auto r = run_under(kMpirun + "-np 1 " + LENET5_BINARY + " " + good + " : -np 1 ",
                             good + " --data /nonexistent/mnist");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.status, 124) << "timed out: the ranks hung";
    EXPECT_NE(r.err.find("lenet5: error: rank 1: missing MNIST file /nonexistent/mnist"), std::string::npos) << r.err;
}
#endif
