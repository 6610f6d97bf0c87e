// The training loop, written once for every variant.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine.h"
#include "engine_factory.h"

namespace lenet5 {

struct TrainOptions {
    EngineRequest engine;
    int epochs = 10;
    int batch = 64;
    float lr = 0.05f;
    float momentum = 0.9f;
    uint64_t seed = 1;
    int train_limit = 0;  // 0 = all
    int test_limit = 0;
    std::string data_dir;  // resolved by resolve_data_dir
    std::string json_path, save_path, resume_path;
};

struct EpochResult {
    int epoch = 0;
    PhaseTimes times;
    double wall_ms = 0;  // the epoch's training steps, host overhead included
    double eval_ms = 0;  // the test pass, timed apart
    double train_loss = 0, train_accuracy = 0;
    double test_loss = 0, test_accuracy = 0;
};

struct RunInfo {
    std::string variant, device, platform;
    int train_samples = 0, test_samples = 0;
};

struct EvalResult {
    double loss = 0, accuracy = 0;
    int samples = 0;
};

// Evaluates the engine's current parameters on its test set.
EvalResult evaluate(Engine& engine, int test_samples);

// Observers, so the loop does no printing itself.
struct TrainObserver {
    std::function<void(const RunInfo&)> on_start;
    std::function<void(int epoch, int step, int steps)> on_step;  // after each step is queued
    std::function<void(const EpochResult&)> on_epoch;
};

struct TrainResult {
    RunInfo info;
    std::vector<EpochResult> epochs;
};

TrainResult train(const TrainOptions& options, const TrainObserver& observer = {});

}  // namespace lenet5
