// MNIST in IDX format, raw or gzip-compressed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lenet5 {

// Images as the file stores them (bytes, row-major) and their labels.
struct Dataset {
    int count = 0;
    int rows = 0, cols = 0;
    std::vector<uint8_t> images;  // count * rows * cols
    std::vector<uint8_t> labels;  // count, each 0..9

    const uint8_t* image(int i) const { return images.data() + static_cast<size_t>(i) * rows * cols; }
};

enum class Split { Train, Test };

// Reads one IDX file (magic 0x00000801 labels or 0x00000803 images), raw or gzip
// (detected from the content, not the name). Throws Error naming the file on any problem.
std::vector<uint8_t> read_idx_labels(const std::string& path);
std::vector<uint8_t> read_idx_images(const std::string& path, int& count, int& rows, int& cols);

// Loads train-images-idx3-ubyte + train-labels-idx1-ubyte (or t10k-*) from dir,
// each either as named or with ".gz". Checks 28x28, labels 0..9 and that the counts agree.
// limit > 0 keeps only the first `limit` samples.
Dataset load_mnist(const std::string& dir, Split split, int limit = 0);

// `count` random 28x28 images with random labels, from a seed: for tests and for timing
// (`lenet5 tune`), where the pixels do not matter.
Dataset random_dataset(int count, uint64_t seed);

// The data folder: `flag` if not empty; else for dataset "fashion" Debian's
// /usr/share/datasets/fashion-mnist; else $LENET5_DATA, else the project's data/mnist.
std::string resolve_data_dir(const std::string& flag, const std::string& dataset = "mnist");

}  // namespace lenet5
