// MNIST IDX reader: raw or gzip files through zlib; every problem is an Error naming the file.
#include "io/mnist.h"

#include "common/error.h"
#include "common/rng.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#ifndef LENET5_SOURCE_DIR
#define LENET5_SOURCE_DIR "."
#endif

namespace lenet5 {
namespace fs = std::filesystem;

namespace {

constexpr uint32_t kLabelMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr uint32_t kImageMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kMaxSide = 4096;           // larger image sides mean a corrupt header

std::string hex32(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", v);
    return buf;
}

const char* kind_of(uint32_t magic) { return magic == kLabelMagic ? "an IDX label file" : "an IDX image file"; }

// One open IDX file; zlib's gzread reads gzip and plain files alike (it looks at the content).
class IdxFile {
public:
    explicit IdxFile(const std::string& path) : path_(path) {
        std::error_code ec;
        const fs::file_status st = fs::status(path, ec);
        if (!fs::exists(st)) fail("no such file");
        if (fs::is_directory(st)) fail("is a directory, not an IDX file");
        // A FIFO or device would block in open or never end: refuse before opening.
        if (!fs::is_regular_file(st)) fail("not a regular file (a FIFO, device or socket cannot be an IDX file)");
        errno = 0;
        f_ = gzopen(path.c_str(), "rb");
        if (!f_) fail(std::string("cannot open: ") + (errno ? std::strerror(errno) : "out of memory"));
        gzbuffer(f_, 1u << 16);  // zlib allocates 3x this; more does not read MNIST faster
    }
    ~IdxFile() { gzclose(f_); }
    IdxFile(const IdxFile&) = delete;
    IdxFile& operator=(const IdxFile&) = delete;

    [[noreturn]] void fail(const std::string& msg) const { throw Error(path_ + ": " + msg); }

    // Reads up to n bytes; fewer only where the data ends.
    size_t read(uint8_t* dst, size_t n) {
        size_t got = 0;
        while (got < n) {
            const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - got, size_t{1} << 30));
            const int r = gzread(f_, dst + got, chunk);
            if (r < 0) fail(std::string("corrupt gzip data: ") + gz_message());
            if (r == 0) break;
            got += static_cast<size_t>(r);
        }
        return got;
    }

    // " (gzip stream ends early)" when zlib saw a cut-off stream, else "".
    std::string early_end_note() {
        int code = Z_OK;
        gzerror(f_, &code);
        return code == Z_BUF_ERROR ? " (gzip stream ends early)" : "";
    }

private:
    std::string gz_message() {
        int code = Z_OK;
        std::string msg = gzerror(f_, &code);
        if (code == Z_ERRNO) msg = std::strerror(errno);
        if (msg.rfind(path_ + ": ", 0) == 0) msg.erase(0, path_.size() + 2);  // zlib prefixes the path
        return msg;
    }

    std::string path_;
    gzFile f_ = nullptr;
};

uint32_t be32(const uint8_t* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reads a whole IDX file of unsigned bytes with the given magic: its dimensions and its data,
// which must be exactly as long as the dimensions say.
std::vector<uint8_t> read_idx(const std::string& path, uint32_t magic, std::vector<uint32_t>& dims) {
    IdxFile f(path);
    const size_t ndims = magic & 0xffu;
    uint8_t head[16];
    const size_t head_len = 4 * (1 + ndims);
    const size_t got = f.read(head, head_len);
    if (got == 0) f.fail(std::string("empty file (expected ") + kind_of(magic) + ")");
    if (got >= 4 && be32(head) != magic) {
        const uint32_t m = be32(head);
        std::string hint = (m == kLabelMagic || m == kImageMagic) && m != magic
                               ? std::string("; this is ") + kind_of(m)
                               : std::string();
        f.fail("bad magic " + hex32(m) + " (expected " + hex32(magic) + ", " + kind_of(magic) + ")" + hint);
    }
    if (got < head_len)
        f.fail("truncated header (" + std::to_string(got) + " of " + std::to_string(head_len) + " bytes)");

    dims.resize(ndims);
    size_t total = 1;
    for (size_t i = 0; i < ndims; ++i) {
        dims[i] = be32(head + 4 * (i + 1));
        total *= dims[i];
    }
    if (dims[0] > 0x7fffffffu) f.fail("absurd item count " + std::to_string(dims[0]) + " in the header");
    for (size_t i = 1; i < ndims; ++i)
        if (dims[i] == 0 || dims[i] > kMaxSide)
            f.fail("bad dimensions " + std::to_string(dims[1]) + "x" + std::to_string(dims[2]) + " in the header");

    // Grow as the data arrives, in steps doubling from 64 KiB to 16 MiB, so that a
    // corrupt header cannot make us allocate (and zero) much more than the file holds.
    std::vector<uint8_t> data;
    for (size_t step = size_t{1} << 16; data.size() < total; step = std::min(step * 2, size_t{1} << 24)) {
        const size_t old = data.size(), want = std::min(step, total - old);
        data.resize(old + want);
        const size_t r = f.read(data.data() + old, want);
        if (r < want) {
            const std::string what = ndims == 1 ? std::to_string(dims[0]) + " labels"
                                                : std::to_string(dims[0]) + " images of " + std::to_string(dims[1]) +
                                                      "x" + std::to_string(dims[2]) + " (" + std::to_string(total) +
                                                      " bytes)";
            f.fail("truncated: the header declares " + what + " but only " + std::to_string(old + r) +
                   " bytes follow" + f.early_end_note());
        }
    }
    size_t extra = 0;
    uint8_t sink[4096];
    for (size_t r; (r = f.read(sink, sizeof sink)) > 0;) extra += r;
    if (extra > 0)
        f.fail(std::to_string(extra) + " trailing bytes after the " + std::to_string(total) +
               " data bytes the header declares");
    return data;
}

// dir/name if it exists, else dir/name.gz, else an Error saying how to get the data.
std::string find_file(const std::string& dir, const std::string& name) {
    const fs::path raw = fs::path(dir) / name;
    const fs::path gz = fs::path(dir) / (name + ".gz");
    std::error_code ec;
    if (fs::exists(raw, ec)) return raw.string();
    if (fs::exists(gz, ec)) return gz.string();
    throw Error("missing MNIST file " + raw.string() + " (or " + gz.string() + "); run " LENET5_SOURCE_DIR
                "/data/fetch_mnist.sh to download it, or point --data or LENET5_DATA at a folder that holds it");
}

}  // namespace

std::vector<uint8_t> read_idx_labels(const std::string& path) {
    std::vector<uint32_t> dims;
    return read_idx(path, kLabelMagic, dims);
}

std::vector<uint8_t> read_idx_images(const std::string& path, int& count, int& rows, int& cols) {
    std::vector<uint32_t> dims;
    std::vector<uint8_t> data = read_idx(path, kImageMagic, dims);
    count = static_cast<int>(dims[0]);
    rows = static_cast<int>(dims[1]);
    cols = static_cast<int>(dims[2]);
    return data;
}

Dataset load_mnist(const std::string& dir, Split split, int limit) {
    const std::string prefix = split == Split::Train ? "train" : "t10k";
    const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
    const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");

    Dataset d;
    d.images = read_idx_images(images_path, d.count, d.rows, d.cols);
    if (d.rows != 28 || d.cols != 28)
        throw Error(images_path + ": wrong dimensions " + std::to_string(d.rows) + "x" + std::to_string(d.cols) +
                    " (MNIST images are 28x28)");
    if (d.count == 0) throw Error(images_path + ": holds no images");
    d.labels = read_idx_labels(labels_path);
    if (d.labels.size() != static_cast<size_t>(d.count))
        throw Error("count mismatch: " + images_path + " holds " + std::to_string(d.count) + " images but " +
                    labels_path + " holds " + std::to_string(d.labels.size()) + " labels");
    for (size_t i = 0; i < d.labels.size(); ++i)
        if (d.labels[i] > 9)
            throw Error(labels_path + ": label " + std::to_string(d.labels[i]) + " at index " + std::to_string(i) +
                        " is out of range (MNIST labels are 0..9)");

    if (limit > 0 && limit < d.count) {
        d.count = limit;
        d.images.resize(static_cast<size_t>(limit) * 28 * 28);
        d.labels.resize(static_cast<size_t>(limit));
        d.images.shrink_to_fit();
        d.labels.shrink_to_fit();
    }
    return d;
}

std::string resolve_data_dir(const std::string& flag, const std::string& dataset) {
    if (!flag.empty()) return flag;
    if (dataset == "fashion") return "/usr/share/datasets/fashion-mnist";  // Debian's dataset-fashion-mnist
    if (const char* env = std::getenv("LENET5_DATA"); env && *env) return env;
    std::error_code ec;
    if (fs::is_directory("data/mnist", ec)) return "data/mnist";
    return LENET5_SOURCE_DIR "/data/mnist";
}

Dataset random_dataset(int count, uint64_t seed) {
    Dataset d;
    d.count = count;
    d.rows = d.cols = 28;
    Rng rng(seed);
    d.images.resize(static_cast<size_t>(count) * 28 * 28);
    for (auto& p : d.images) p = static_cast<uint8_t>(rng.below(256));
    d.labels.resize(static_cast<size_t>(count));
    for (auto& l : d.labels) l = static_cast<uint8_t>(rng.below(10));
    return d;
}

}  // namespace lenet5
