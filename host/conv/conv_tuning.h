// The convolution algorithms' tuning cache: `lenet5 tune --conv` measures each algorithm on a
// model's convolution shapes and records the fastest per device; OpenCLConv's Auto reads it.
// A text file beside the work-group cache (tuning_cache.h): conv-tuning.tsv in the same folder,
// or $LENET5_CONV_TUNING. Tab-separated lines, '#' comments:
//   platform <TAB> device <TAB> driver <TAB> shape (ConvShape::describe) <TAB> algo <TAB> ms
#pragma once
#include <map>
#include <string>
#include <vector>

#include "conv/conv_shape.h"

namespace lenet5::conv {

struct ConvTuningEntry {
    std::string platform, device, driver, shape;
    ConvAlgo algo = ConvAlgo::Direct;
    double ms = 0.0;  // what it measured (forward and backward), for the reader
};

// $LENET5_CONV_TUNING, else conv-tuning.tsv in default_tuning_path()'s folder; "" when neither.
std::string default_conv_tuning_path();

// The file's entries; none when it does not exist. Throws Error naming the path and line when a
// line is malformed.
std::vector<ConvTuningEntry> read_conv_tuning(const std::string& path);

// The algorithms the default cache holds for this platform, device and driver, by shape
// (ConvShape::describe), leaving out those this build lacks. A malformed cache: a warning on
// stderr and none.
std::map<std::string, ConvAlgo> tuned_conv_algos(const std::string& platform, const std::string& device,
                                                 const std::string& driver);

// Adds `entry`, replacing the one of the same device, driver and shape; written atomically.
void store_conv_tuning(const std::string& path, const ConvTuningEntry& entry);

}  // namespace lenet5::conv
