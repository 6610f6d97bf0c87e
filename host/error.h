// Errors the program reports as one line `lenet5: error: ...`.
#pragma once
#include <stdexcept>
#include <string>

namespace lenet5 {

// Any failure at run time (bad file, device problem, ...): exit status 1.
struct Error : std::runtime_error {
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A bad command line (unknown flag, bad value): exit status 2.
struct UsageError : std::runtime_error {
    explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace lenet5
