// Files the program writes appear whole or not at all: written to a temporary
// name beside the target, flushed to disk, then renamed over it.
#pragma once
#include <string>

namespace lenet5 {

// Throws Error naming the path on any failure; the target is then untouched.
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace lenet5
