// Runs the lenet5 binary (LENET5_BINARY) with arguments and captures its exit
// status, stdout and stderr, for the tests of the command line's contract.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace lenet5::test {

struct CliResult {
    int status;
    std::string out, err;
};

inline std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// A shell command line, its output captured.
inline CliResult run_shell(const std::string& command) {
    // ctest runs tests in parallel processes: the capture files must be this process's own.
    const std::string base = ::testing::TempDir() + "lenet5_cli_" + std::to_string(::getpid());
    const std::string out = base + "_out.txt", err = base + "_err.txt";
    const std::string cmd = "(" + command + ") >" + out + " 2>" + err + " </dev/null";
    const int raw = std::system(cmd.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
}

inline CliResult run_cli(const std::string& args) { return run_shell(std::string(LENET5_BINARY) + " " + args); }

}  // namespace lenet5::test
