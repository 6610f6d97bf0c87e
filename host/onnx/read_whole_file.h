// The whole of a file the user named (an .onnx model, an .npy array) as bytes. Only regular files:
// a FIFO or device would block the read or never end.
#pragma once
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "error.h"

namespace lenet5 {

inline std::string read_whole_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw Error(path + ": not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open");
    std::ostringstream s;
    s << in.rdbuf();
    if (in.bad()) throw Error(path + ": read failed");
    return s.str();
}

}  // namespace lenet5
