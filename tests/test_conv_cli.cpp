// `lenet5 convbench` and `lenet5 tune --conv` through the command line: a small run on the default
// OpenCL device (PoCL in CI) passes its own check and writes its JSON; bad flags are usage errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

using lenet5::test::run_cli;
using lenet5::test::slurp;

namespace {

TEST(ConvbenchCli, BadFlagsAreUsageErrors) {
    for (const char* args : {"--sizes 0", "--algos fft", "--algos auto", "--cases resnet", "--bogus", "--repeats"}) {
        const auto r = run_cli(std::string("convbench ") + args);
        EXPECT_EQ(r.status, 2) << args;
        EXPECT_EQ(r.err.rfind("lenet5: error: ", 0), 0u) << args << ": " << r.err;
    }
    const auto help = run_cli("convbench --help");
    EXPECT_EQ(help.status, 0);
    EXPECT_NE(help.out.find("--forward-only"), std::string::npos);
    EXPECT_EQ(help.out.rfind("usage: lenet5 convbench", 0), 0u) << help.out;
    EXPECT_NE(run_cli("--help").out.find("\n  convbench "), std::string::npos);
}

#ifdef LENET5_HAVE_OPENCL
TEST(ConvbenchCli, SmallRunChecksItselfAndWritesJson) {
    const std::string json = ::testing::TempDir() + "lenet5_convbench.json";
    std::remove(json.c_str());
    const auto r = run_cli("convbench --device 0 --cases seed --sizes 9 --strides 1,2 --filters 2 --algos im2col "
                           "--repeats 1 --json " + json);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
    const auto j = nlohmann::json::parse(slurp(json));
    ASSERT_EQ(j["rows"].size(), 2u);
    for (const auto& row : j["rows"]) {
        EXPECT_EQ(row["algo"], "im2col");
        EXPECT_TRUE(row["ok"].get<bool>());
        EXPECT_LT(row["max_rel_error"].get<double>(), 1e-4);
        EXPECT_GT(row["forward_ms"].get<double>(), 0.0);
    }
    EXPECT_EQ(j["rows"][1]["stride"], 2);
    EXPECT_EQ(j["rows"][1]["in_h"], 9);  // 9 - 1 is a multiple of 2 already
    std::remove(json.c_str());
}
#endif

}  // namespace
