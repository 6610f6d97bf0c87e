// Under an address-space limit (`ulimit -v`, as some clusters set), the program runs or fails with
// one line, and always ends: OpenBLAS's thread pool used to hang every exit there (issue 47).
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"
#include "test_support.h"

namespace {

// lenet5 ARGS under a 200 MB address-space limit, killed after 60 s (so a hang fails, not blocks).
lenet5::test::CliResult run_limited(const std::string& args) {
    return lenet5::test::run_shell("ulimit -v 200000 && exec timeout -s KILL 60 " + std::string(LENET5_BINARY) + " " +
                                   args);
}

}  // namespace

// (Not with AddressSanitizer, which reserves terabytes of address space: no run fits the limit.)
#ifndef LENET5_SANITIZED
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
