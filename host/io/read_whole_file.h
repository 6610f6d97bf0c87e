// The whole of a file the user named (an .onnx model, an .npy array, a kernel file) as bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace lenet5 {

// Only regular files: a FIFO or device would block the read or never end, so the file is opened
// without blocking and checked through its descriptor before a byte is read. A file larger than
// max_bytes is refused unread. Throws Error naming the path.
std::string read_whole_file(const std::string& path, size_t max_bytes = SIZE_MAX);

}  // namespace lenet5
