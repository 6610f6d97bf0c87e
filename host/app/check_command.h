// `lenet5 check`: one variant against the `cpu` reference on a few batches of real training
// images, by the rule the tests hold every variant to (engine/reference_check.h). Prints a row per
// layer and phase with the relative error and pass or FAIL.
#pragma once
#include <ostream>
#include <string>

#include "engine/engine_factory.h"

namespace lenet5 {

struct CheckOptions {
    EngineRequest engine;          // the variant to check (not cpu)
    std::string model = "lenet5";  // as train's --model
    std::string data_dir, json_path;
    int batch = 0;    // 0: the model's batch, else 64
    int batches = 3;  // training steps compared, each on the next batch
};

// Returns 0 when every comparison passes. A mismatch throws Error naming the first failing layer,
// phase and error, after the table (and --json) are written.
int run_check(const CheckOptions& o, std::ostream& out);

}  // namespace lenet5
