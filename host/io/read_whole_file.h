// The whole of a file the user named (an .onnx model, an .npy array) as bytes. Only regular files:
// a FIFO or device would block the read or never end.
#pragma once
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "common/error.h"

namespace lenet5 {

inline std::string read_whole_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw Error(path + ": not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open");
    // One buffer of the file's size, read into once: a 553 MB model is not copied again.
    std::string bytes(static_cast<size_t>(st.st_size), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (in.bad() || static_cast<size_t>(in.gcount()) != bytes.size() || in.peek() != std::char_traits<char>::eof())
        throw Error(path + ": read failed (the file changed while it was read?)");
    return bytes;
}

}  // namespace lenet5
