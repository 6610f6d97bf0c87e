// `lenet5 kernels`: the map from `--kernel-profile`'s labels to the code. For each OpenCL variant
// of a model, the kernels a training step launches (measured: a few steps run with every launch
// profiled), the file, line and function of each, and the knobs its program was compiled with.
// `lenet5 kernels --dump DIR` writes the embedded kernel files, the starting point for --kernels DIR.
#pragma once
#include <ostream>
#include <string>

namespace lenet5 {

struct KernelsOptions {
    std::string model = "lenet5";  // as train's --model
    std::string variant;           // gpu, gpu-constant or gpu-local; "": all three
    int device = -1;
    int batch = 0;  // 0: the model's batch, else 64
    std::string dump_dir;
};

int run_kernels(const KernelsOptions& o, std::ostream& out);

}  // namespace lenet5
