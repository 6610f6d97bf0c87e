// Training across processes: `mpirun -np 2 lenet5 train` against one process with the same
// global batch, resuming under mpirun, and a failing rank ending the run instead of hanging.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "io/checkpoint.h"
#include "cli_runner.h"
#include "test_support.h"

using lenet5::test::relative_error;
using lenet5::test::run_cli;

#ifdef LENET5_HAVE_MPI
namespace {

// mpirun as root needs the two OMPI_ variables; --oversubscribe lets 2 ranks share fewer
// cores. Under the sanitizer build, leak checking is off for the ranks: Open MPI's components
// leak at MPI_Finalize and are unloaded by then, so no suppression can name them.
const std::string kMpirun =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 timeout 120 "
    "mpirun --oversubscribe ";

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

// run_cli with a command in front of the binary: runs "<prefix> lenet5 <args>".
lenet5::test::CliResult run_under(const std::string& prefix, const std::string& args) {
    const std::string base = ::testing::TempDir() + "lenet5_mpi_" + std::to_string(::getpid());
    const std::string cmd = prefix + std::string(LENET5_BINARY) + " " + args + " >" + base + ".out 2>" + base + ".err </dev/null";
    const int raw = std::system(cmd.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, lenet5::test::slurp(base + ".out"), lenet5::test::slurp(base + ".err")};
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
    auto one = run_cli(args + " --save " + dir.path + "/one.ck");
    ASSERT_EQ(one.status, 0) << one.err;
    auto two = run_under(kMpirun + "-np 2 ", args + " --save " + dir.path + "/two.ck");
    ASSERT_EQ(two.status, 0) << two.err;
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
