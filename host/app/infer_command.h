// `lenet5 infer`: runs an ONNX model (or a checkpoint, as `export` writes it) over images from an .npy file
// (or seeded random ones) on a variant's engine (Engine::infer), writes the outputs as .npy, prints a
// summary line and optionally per-layer times as JSON.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "engine/engine_factory.h"

namespace lenet5 {

struct InferOptions {
    std::string onnx_path, model_path;  // one of them: --onnx FILE or --model CHECKPOINT
    std::string input_path, output_path, json_path;
    int random = 0;      // --random N: N images uniform in [-1, 1) instead of --input
    uint64_t seed = 1;   // --seed of the random images
    int repeats = 1;     // timed passes over all images; above 1, after one untimed pass
    int batch = 1;       // images per Engine::infer call
    EngineRequest engine;  // variant, device, threads, conv_algo
};

// Runs the command; returns the exit status (Error on failure).
int run_infer(const InferOptions& options, std::ostream& out);

}  // namespace lenet5
