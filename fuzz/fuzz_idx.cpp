// libFuzzer target: the IDX loader (raw and gzip) must reject any malformed file
// with an Error, never crash, leak or read out of bounds.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "io/mnist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // The loader reads files (through zlib), so the input goes through one, removed at exit.
    struct TempFile {
        std::string path;
        ~TempFile() { std::remove(path.c_str()); }
    };
    static const char* dir = std::getenv("TMPDIR");
    static const TempFile file{std::string(dir && *dir ? dir : "/tmp") + "/lenet5_fuzz_idx_" + std::to_string(::getpid())};
    const std::string& path = file.path;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    try {
        int count = 0, rows = 0, cols = 0;
        const auto images = lenet5::read_idx_images(path, count, rows, cols);
        if (images.size() != static_cast<size_t>(count) * static_cast<size_t>(rows) * static_cast<size_t>(cols))
            __builtin_trap();  // the loader returned a size its header does not declare
    } catch (const lenet5::Error&) {
    }
    try {
        lenet5::read_idx_labels(path);
    } catch (const lenet5::Error&) {
    }
    return 0;
}
