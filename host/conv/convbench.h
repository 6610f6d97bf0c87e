// `lenet5 convbench`: the convolution algorithms side by side (seed 002's experiment): per case and
// algorithm the forward's kernel time (device time from the first command's start to the last's
// end) and its time with the host copies (input and weights to the device, output back: the seed's
// measure), GFLOP/s, the backward passes' kernel time, and the largest relative error against the
// scalar reference (conv_reference.h) at sampled elements of the output, input gradient and weight
// gradient; above 1e-4 the row says FAILED and the exit status is 1.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace lenet5::conv {

// Parses convbench's flags (args after the command's name) and runs it; returns the exit status.
// Throws UsageError for a bad flag or value, Error when it cannot run (no device, clblast asked for
// in a build without it, an unwritable --json).
int run_convbench(const std::vector<std::string>& args, std::ostream& out);

// convbench's part of `lenet5 --help`.
std::string convbench_help();

}  // namespace lenet5::conv
