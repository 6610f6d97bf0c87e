// Errors the program reports as one line `lenet5: error: ...`.
#pragma once
#include <cstdio>
#include <stdexcept>
#include <string>

namespace lenet5 {

// `what` with every control character written as \xNN, so that a name taken from a file (an ONNX
// node's, a path's) can never break the message's one line.
inline std::string one_line(const std::string& what) {
    std::string out;
    for (const char c : what) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u != 0x7f) {
            out += c;
        } else {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02x", u);
            out += hex;
        }
    }
    return out;
}

// Any failure at run time (bad file, device problem, ...): exit status 1.
struct Error : std::runtime_error {
    explicit Error(const std::string& what) : std::runtime_error(one_line(what)) {}
};

// A failure that every rank of an mpirun finds at the same point (ranks that disagree on the model
// or the data): each rank reports it and ends with status 1, none ends the others.
struct AgreedError : Error {
    explicit AgreedError(const std::string& what) : Error(what) {}
};

// A bad command line (unknown flag, bad value): exit status 2.
struct UsageError : std::runtime_error {
    explicit UsageError(const std::string& what) : std::runtime_error(one_line(what)) {}
};

}  // namespace lenet5
