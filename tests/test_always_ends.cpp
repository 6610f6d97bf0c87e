// The program always ends (issue 47): under an address-space limit (`ulimit -v`, as some clusters
// set) it runs or fails with one line (OpenBLAS's thread pool used to hang every exit there), and a
// second SIGINT or SIGTERM ends it at once, whatever it waits for.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "cli_runner.h"
#include "test_support.h"

// (Not with AddressSanitizer, which reserves terabytes of address space: no run fits the limit.)
#ifndef LENET5_SANITIZED
namespace {

// lenet5 ARGS under a 200 MB address-space limit, killed after 60 s (so a hang fails, not blocks).
lenet5::test::CliResult run_limited(const std::string& args) {
    return lenet5::test::run_shell("ulimit -v 200000 && exec timeout -s KILL 60 " + std::string(LENET5_BINARY) + " " +
                                   args);
}

}  // namespace

TEST(MemoryLimit, VersionEndsAtOnce) {
    const auto r = run_limited("--version");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.rfind("lenet5 ", 0), 0u) << r.out;
}

TEST(MemoryLimit, ASmallTrainingRunEnds) {
    const std::string data = lenet5::test::mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    const auto r = run_limited("train --variant cpu --epochs 1 --train-limit 500 --test-limit 100 --data " + data);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("test_acc"), std::string::npos) << r.out;
}
#endif

// The first SIGTERM waits for the step to end (here a batch of 2,000 images on `cpu`, seconds
// long); the second ends the process at once.
TEST(Signals, ASecondSignalEndsTheProcessAtOnce) {
    const std::string data = lenet5::test::mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    const auto start = std::chrono::steady_clock::now();
    const auto r = lenet5::test::run_shell(std::string(LENET5_BINARY) +
                                           " train --variant cpu --batch 2000 --epochs 5 --train-limit 20000"
                                           " --test-limit 100 --data " + data +
                                           " & p=$!; sleep 2; kill -TERM $p; sleep 0.5; kill -TERM $p; wait $p");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.status, 128 + 15) << r.err;
    EXPECT_LT(seconds, 6.0) << "a step of 2,000 images on cpu takes about 10 s";
    EXPECT_EQ(r.err.find("interrupted"), std::string::npos) << r.err;
}
