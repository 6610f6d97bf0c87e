// The MNIST loader: small IDX files written by the tests (raw and gzip), every malformed
// case it must reject, resolve_data_dir's precedence, and the real data set when present.
#include "common/error.h"
#include "io/mnist.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using lenet5::Dataset;
using lenet5::Split;
using Bytes = std::vector<uint8_t>;

namespace {

void put_be32(Bytes& b, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<uint8_t>(v >> shift));
}

Bytes idx_images(uint32_t count, uint32_t rows, uint32_t cols, const Bytes& pixels, uint32_t magic = 0x803) {
    Bytes b;
    put_be32(b, magic);
    put_be32(b, count);
    put_be32(b, rows);
    put_be32(b, cols);
    b.insert(b.end(), pixels.begin(), pixels.end());
    return b;
}

Bytes idx_labels(const Bytes& labels, uint32_t magic = 0x801) {
    Bytes b;
    put_be32(b, magic);
    put_be32(b, static_cast<uint32_t>(labels.size()));
    b.insert(b.end(), labels.begin(), labels.end());
    return b;
}

// Deterministic pixels for n images of rows x cols.
Bytes pattern(size_t n, size_t rows = 28, size_t cols = 28) {
    Bytes p(n * rows * cols);
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>((i * 7 + i / 784) % 256);
    return p;
}

void write_raw(const fs::path& path, const Bytes& b) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    ASSERT_TRUE(out.good()) << path;
}

void write_gz(const fs::path& path, const Bytes& b) {
    gzFile f = gzopen(path.string().c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    if (!b.empty()) {
        EXPECT_EQ(gzwrite(f, b.data(), static_cast<unsigned>(b.size())), static_cast<int>(b.size()));
    }
    ASSERT_EQ(gzclose(f), Z_OK);
}

Bytes read_all(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The message of the lenet5::Error that f throws ("" and a failure if it throws none).
std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const lenet5::Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected a lenet5::Error";
    return "";
}

void expect_contains(const std::string& msg, std::initializer_list<std::string> parts) {
    for (const std::string& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
}

const Bytes kLabels = {3, 1, 4, 1, 5};

// A fresh directory per test, removed afterwards.
class MnistFiles : public ::testing::Test {
protected:
    void SetUp() override {
        std::string tmpl = ::testing::TempDir() + "lenet5_mnist_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << tmpl;
        dir = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }

    fs::path images() const { return dir / "train-images-idx3-ubyte"; }
    fs::path labels() const { return dir / "train-labels-idx1-ubyte"; }

    // The good five-image training set, raw or gzip.
    void write_good(bool gz) {
        if (gz) {
            write_gz(images().string() + ".gz", idx_images(5, 28, 28, pattern(5)));
            write_gz(labels().string() + ".gz", idx_labels(kLabels));
        } else {
            write_raw(images(), idx_images(5, 28, 28, pattern(5)));
            write_raw(labels(), idx_labels(kLabels));
        }
    }
    std::string load_error(Split split = Split::Train) {
        return error_of([&] { lenet5::load_mnist(dir.string(), split); });
    }

    fs::path dir;
};

TEST_F(MnistFiles, GoodRawSetLoads) {
    write_good(false);
    const Dataset d = lenet5::load_mnist(dir.string(), Split::Train);
    EXPECT_EQ(d.count, 5);
    EXPECT_EQ(d.rows, 28);
    EXPECT_EQ(d.cols, 28);
    EXPECT_EQ(d.images, pattern(5));
    EXPECT_EQ(d.labels, kLabels);
    EXPECT_EQ(d.image(2)[10], pattern(5)[2 * 784 + 10]);
}

TEST_F(MnistFiles, GzipGivesTheSameBytesAsRaw) {
    write_good(false);
    const Dataset raw = lenet5::load_mnist(dir.string(), Split::Train);
    fs::remove(images());
    fs::remove(labels());
    write_good(true);
    const Dataset gz = lenet5::load_mnist(dir.string(), Split::Train);
    EXPECT_EQ(gz.count, raw.count);
    EXPECT_EQ(gz.rows, raw.rows);
    EXPECT_EQ(gz.cols, raw.cols);
    EXPECT_EQ(gz.images, raw.images);
    EXPECT_EQ(gz.labels, raw.labels);
}

TEST_F(MnistFiles, TestSplitUsesT10kNames) {
    write_gz(dir / "t10k-images-idx3-ubyte.gz", idx_images(2, 28, 28, pattern(2)));
    write_raw(dir / "t10k-labels-idx1-ubyte", idx_labels({7, 0}));
    const Dataset d = lenet5::load_mnist(dir.string(), Split::Test);
    EXPECT_EQ(d.count, 2);
    EXPECT_EQ(d.labels, (Bytes{7, 0}));
    expect_contains(load_error(Split::Train), {"train-images-idx3-ubyte"});
}

TEST_F(MnistFiles, PrefersTheRawFileWhenBothExist) {
    write_good(false);
    write_gz(images().string() + ".gz", idx_images(5, 28, 28, Bytes(5 * 784, 0)));
    write_gz(labels().string() + ".gz", idx_labels({9, 9, 9, 9, 9}));
    const Dataset d = lenet5::load_mnist(dir.string(), Split::Train);
    EXPECT_EQ(d.labels, kLabels);
    EXPECT_EQ(d.images, pattern(5));
}

TEST_F(MnistFiles, LimitKeepsTheFirstSamples) {
    write_good(false);
    const Dataset two = lenet5::load_mnist(dir.string(), Split::Train, 2);
    EXPECT_EQ(two.count, 2);
    EXPECT_EQ(two.images, pattern(2));
    EXPECT_EQ(two.labels, (Bytes{3, 1}));
    EXPECT_EQ(lenet5::load_mnist(dir.string(), Split::Train, 100).count, 5);
    EXPECT_EQ(lenet5::load_mnist(dir.string(), Split::Train, 5).count, 5);
    EXPECT_EQ(lenet5::load_mnist(dir.string(), Split::Train, 0).count, 5);
}

TEST_F(MnistFiles, ReadIdxImagesReturnsTheFilesDimensions) {
    write_gz(dir / "small.gz", idx_images(3, 5, 7, pattern(3, 5, 7)));
    int count = 0, rows = 0, cols = 0;
    const Bytes px = lenet5::read_idx_images((dir / "small.gz").string(), count, rows, cols);
    EXPECT_EQ(count, 3);
    EXPECT_EQ(rows, 5);
    EXPECT_EQ(cols, 7);
    EXPECT_EQ(px, pattern(3, 5, 7));
    write_raw(dir / "labels", idx_labels({0, 1, 2}));
    EXPECT_EQ(lenet5::read_idx_labels((dir / "labels").string()), (Bytes{0, 1, 2}));
}

TEST_F(MnistFiles, BadMagic) {
    write_good(false);
    write_raw(images(), idx_images(5, 28, 28, pattern(5), 0x804));
    expect_contains(load_error(), {images().string(), "bad magic 0x00000804", "expected 0x00000803"});
    // A label file where an image file belongs, and the other way round.
    const std::string msg = error_of([&] { lenet5::read_idx_labels(images().string()); });
    expect_contains(msg, {images().string(), "bad magic", "expected 0x00000801"});
    write_good(false);
    int c = 0, r = 0, k = 0;
    expect_contains(error_of([&] { lenet5::read_idx_images(labels().string(), c, r, k); }),
                    {labels().string(), "bad magic 0x00000801", "label file"});
}

TEST_F(MnistFiles, WrongDimensions) {
    write_good(false);
    write_raw(images(), idx_images(5, 27, 28, pattern(5, 27, 28)));
    expect_contains(load_error(), {images().string(), "wrong dimensions", "27x28"});
}

TEST_F(MnistFiles, ZeroOrAbsurdDimensions) {
    int c = 0, r = 0, k = 0;
    write_raw(images(), idx_images(5, 0, 28, {}));
    expect_contains(error_of([&] { lenet5::read_idx_images(images().string(), c, r, k); }),
                    {images().string(), "bad dimensions"});
    write_raw(images(), idx_images(5, 28, 100000, {}));
    expect_contains(error_of([&] { lenet5::read_idx_images(images().string(), c, r, k); }),
                    {images().string(), "bad dimensions"});
}

TEST_F(MnistFiles, TruncatedImagesFile) {
    write_good(false);
    Bytes b = idx_images(5, 28, 28, pattern(5));
    b.resize(b.size() - 10);
    write_raw(images(), b);
    expect_contains(load_error(), {images().string(), "truncated"});
}

TEST_F(MnistFiles, TruncatedGzipImagesFile) {
    write_good(true);
    // A complete gzip stream of too little data, then a gzip stream cut off in the middle.
    Bytes b = idx_images(5, 28, 28, pattern(5));
    b.resize(b.size() - 1);
    const std::string gz = images().string() + ".gz";
    write_gz(gz, b);
    expect_contains(load_error(), {gz, "truncated"});
    write_gz(gz, idx_images(5, 28, 28, pattern(5)));
    Bytes packed = read_all(gz);
    packed.resize(packed.size() / 2);
    write_raw(gz, packed);
    expect_contains(load_error(), {gz, "truncated"});
}

TEST_F(MnistFiles, TruncatedHeader) {
    write_good(false);
    write_raw(images(), {0, 0, 8, 3, 0, 0});
    expect_contains(load_error(), {images().string(), "truncated header"});
}

TEST_F(MnistFiles, TruncatedLabelsFile) {
    write_good(false);
    Bytes b = idx_labels(kLabels);
    b.pop_back();
    write_raw(labels(), b);
    expect_contains(load_error(), {labels().string(), "truncated"});
}

TEST_F(MnistFiles, TrailingBytes) {
    write_good(false);
    Bytes b = idx_images(5, 28, 28, pattern(5));
    b.insert(b.end(), {1, 2, 3});
    write_raw(images(), b);
    expect_contains(load_error(), {images().string(), "3 trailing bytes"});
    write_good(false);
    Bytes l = idx_labels(kLabels);
    l.push_back(0);
    write_gz(labels().string() + ".gz", l);
    fs::remove(labels());
    expect_contains(load_error(), {labels().string() + ".gz", "1 trailing bytes"});
}

TEST_F(MnistFiles, LabelOutOfRange) {
    write_good(false);
    write_raw(labels(), idx_labels({3, 1, 11, 1, 5}));
    expect_contains(load_error(), {labels().string(), "label 11", "index 2", "out of range"});
}

TEST_F(MnistFiles, CountMismatch) {
    write_good(false);
    write_raw(labels(), idx_labels({3, 1, 4, 1}));
    expect_contains(load_error(), {images().string(), labels().string(), "mismatch", "5 images", "4 labels"});
}

TEST_F(MnistFiles, MissingFileSaysHowToFetch) {
    write_good(false);
    fs::remove(labels());
    expect_contains(load_error(), {labels().string(), labels().string() + ".gz", "fetch_mnist.sh"});
    expect_contains(error_of([&] { lenet5::load_mnist((dir / "nowhere").string(), Split::Test); }),
                    {(dir / "nowhere" / "t10k-images-idx3-ubyte").string(), "fetch_mnist.sh"});
    expect_contains(error_of([&] { lenet5::read_idx_labels((dir / "nope").string()); }),
                    {(dir / "nope").string(), "no such file"});
}

TEST_F(MnistFiles, EmptyFile) {
    write_good(false);
    write_raw(images(), {});
    expect_contains(load_error(), {images().string(), "empty"});
    fs::remove(images());
    fs::remove(labels());
    write_good(true);
    fs::remove(labels());
    write_gz(labels().string() + ".gz", {});
    expect_contains(load_error(), {labels().string() + ".gz", "empty"});
}

TEST_F(MnistFiles, DirectoryInsteadOfFile) {
    write_good(false);
    fs::remove(images());
    fs::create_directory(images());
    expect_contains(load_error(), {images().string(), "directory"});
}

TEST_F(MnistFiles, CorruptGzip) {
    write_good(false);
    const std::string gz = images().string() + ".gz";
    write_gz(gz, idx_images(5, 28, 28, pattern(5)));
    Bytes packed = read_all(gz);
    packed[packed.size() - 6] ^= 0xff;  // the CRC-32 in the trailer
    write_raw(gz, packed);
    fs::remove(images());
    expect_contains(load_error(), {gz, "corrupt gzip data"});
}

// Sets or unsets an environment variable for a scope.
class EnvVar {
public:
    EnvVar(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old, had_ = true;
        if (value) setenv(name, value, 1);
        else unsetenv(name);
    }
    ~EnvVar() {
        if (had_) setenv(name_, old_.c_str(), 1);
        else unsetenv(name_);
    }

private:
    const char* name_;
    std::string old_;
    bool had_ = false;
};

// Runs in another working directory for a scope.
class InDir {
public:
    explicit InDir(const fs::path& d) : old_(fs::current_path()) { fs::current_path(d); }
    ~InDir() { fs::current_path(old_); }

private:
    fs::path old_;
};

TEST_F(MnistFiles, ResolveDataDirPrecedence) {
    {
        EnvVar env("LENET5_DATA", "/from/env");
        EXPECT_EQ(lenet5::resolve_data_dir("/from/flag"), "/from/flag");
        EXPECT_EQ(lenet5::resolve_data_dir(""), "/from/env");
    }
    InDir cwd(dir);
    for (const char* value : {static_cast<const char*>(nullptr), ""}) {
        EnvVar env("LENET5_DATA", value);
        EXPECT_EQ(lenet5::resolve_data_dir(""), LENET5_SOURCE_DIR "/data/mnist");
        fs::create_directories(dir / "data" / "mnist");
        EXPECT_EQ(lenet5::resolve_data_dir(""), "data/mnist");
        EXPECT_EQ(lenet5::resolve_data_dir("x"), "x");
        fs::remove_all(dir / "data");
    }
}

bool has_idx(const fs::path& dir, const std::string& name) {
    return fs::exists(dir / name) || fs::exists(dir / (name + ".gz"));
}

std::array<int, 10> label_counts(const Dataset& d) {
    std::array<int, 10> n{};
    for (uint8_t l : d.labels) ++n[l];
    return n;
}

TEST(MnistReal, CountsAndLabelHistogram) {
    const fs::path dir = lenet5::resolve_data_dir("");
    for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                             "t10k-labels-idx1-ubyte"})
        if (!has_idx(dir, name)) {
            if (std::getenv("LENET5_REQUIRE_MNIST")) FAIL() << "MNIST is required here, not found in " << dir;
            GTEST_SKIP() << "real MNIST not found in " << dir << " (run data/fetch_mnist.sh to fetch it)";
        }

    const Dataset train = lenet5::load_mnist(dir.string(), Split::Train);
    EXPECT_EQ(train.count, 60000);
    EXPECT_EQ(train.rows, 28);
    EXPECT_EQ(train.cols, 28);
    EXPECT_EQ(train.images.size(), 60000u * 784u);
    EXPECT_EQ(label_counts(train), (std::array<int, 10>{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949}));

    const Dataset test = lenet5::load_mnist(dir.string(), Split::Test);
    EXPECT_EQ(test.count, 10000);
    EXPECT_EQ(test.images.size(), 10000u * 784u);
    EXPECT_EQ(label_counts(test), (std::array<int, 10>{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}));
    EXPECT_EQ(lenet5::load_mnist(dir.string(), Split::Test, 1000).count, 1000);
}

}  // namespace
