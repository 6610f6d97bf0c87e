// `lenet5 tune`: the autotuner of the OpenCL variants. For one device, model and batch size it
// times a training step with each candidate work-group size per sample, then, at the fastest, each
// setting of the per-sample kernels' knobs (opencl_program.h's sample_knobs, one knob after
// another), prints the times, and caches the fastest group and settings per variant
// (tuning_cache.h), which `lenet5 train` of that model with that batch then uses.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace lenet5 {

struct TuneOptions {
    std::string model = "lenet5";       // a built-in model's name or a model file
    std::vector<std::string> variants;  // empty: gpu, gpu-constant and gpu-local
    int device = -1;                    // as for train: -1 = the first GPU, else device 0
    int batch = 64;
    std::vector<int> groups;  // candidates (powers of two); empty: 32 up to the device's limit, at most 1024
    int steps = 50;           // timed steps per candidate and repeat
    std::string cache_path;   // empty: default_tuning_path() (with conv: default_conv_tuning_path())
    bool conv = false;        // tune the convolution algorithms instead (host/conv/conv_tune.h)
};

// Returns the exit status. Throws Error when no candidate of a variant runs or the cache cannot be
// written.
int run_tune(const TuneOptions& options, std::ostream& out);

}  // namespace lenet5
