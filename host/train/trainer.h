// The training loop, written once for every variant.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_factory.h"
#include "model/model_file.h"
#include "train/grad_exchange.h"
#include "model/lr_schedule.h"

namespace lenet5 {

constexpr float kAdamLr = 0.001f;  // the learning rate of Adam and AdamW where none is given

// The training settings a run uses: a flag's value, else the model file's `train` line,
// else these defaults (LeNet-5's).
struct TrainSettings {
    int epochs = 10;  // the epoch to train up to (also when resuming)
    int batch = 64;
    float lr = 0.05f;       // the learning rate of the first epoch (onecycle, cosine: the peak)
    float lr_decay = 0.8f;  // step schedule: multiplies the learning rate after every epoch
    Schedule schedule = Schedule::Step;
    float warmup = 0.0f;  // epochs of linear warm-up (lr_schedule.h)
    float momentum = 0.9f;
    float weight_decay = 5e-4f;  // L2 penalty, folded into the momentum update (AdamW: decoupled)
    bool nesterov = false;
    float label_smoothing = 0.0f;  // softmax cross-entropy's (engine.h's TrainingRule)
    Optimizer optimizer = Optimizer::Sgd;  // Adam, AdamW: momentum and nesterov unused
    float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
    uint64_t seed = 1;

    RateSchedule rates() const { return {schedule, lr, lr_decay, warmup}; }
    TrainingRule rule() const { return {nesterov, label_smoothing, seed, optimizer, beta1, beta2, eps}; }
};

struct TrainOptions {
    EngineRequest engine;
    ExchangeOptions exchange;  // several workers or ranks: --grad-precision, --sync-every
    // A built-in model's name, a model file or an ONNX file; empty: LeNet-5, or the checkpoint's
    // model with --resume.
    std::string model;
    bool init_fresh = false;  // an ONNX model starts from seeded weights rather than the file's
    // Unset: the model file's setting, else TrainSettings' default.
    std::optional<int> epochs, batch;
    std::optional<float> lr, lr_decay, momentum, weight_decay, warmup, label_smoothing;
    std::optional<Schedule> schedule;
    bool nesterov = false;  // --nesterov (else the model's setting)
    std::optional<Optimizer> optimizer;
    std::optional<float> beta1, beta2, eps;
    uint64_t seed = 1;
    // --target-accuracy: stop at the first evaluation at or above it (a fraction; 0: train every
    // epoch). --eval-every: also evaluate every this many steps (counted from the first step of
    // epoch 1), not only at each epoch's end (0: at the ends only).
    double target_accuracy = 0;
    int eval_every = 0;
    int train_limit = 0;  // 0 = all
    int test_limit = 0;
    std::string dataset = "mnist";  // mnist or fashion: where --data is not given
    std::string data_dir;  // resolved by resolve_data_dir
    std::string json_path, save_path, resume_path;
    bool kernel_profile = false;  // time every kernel launch (OpenCL variants)
};

struct EpochResult {
    int epoch = 0;
    PhaseTimes times;
    std::vector<KernelTime> kernels;  // the training steps' kernels, with kernel_profile
    std::vector<std::pair<std::string, PhaseTimes>> workers;  // each worker's phases, with --workers
    int steps = 0;                    // training steps run in the epoch
    double wall_ms = 0;  // the epoch's training steps, host overhead included
    double eval_ms = 0;  // the test pass, timed apart
    double train_loss = 0, train_accuracy = 0;
    double test_loss = 0, test_accuracy = 0;
};

// One pass over the test set: at the end of every epoch, and every --eval-every steps.
struct Evaluation {
    int64_t step = 0;  // training steps done, counted from the first step of epoch 1
    double epoch = 0;  // the same in epochs (3.75: three quarters into epoch 4)
    double test_loss = 0, test_accuracy = 0;
    double train_seconds = 0;  // this run's training steps so far (evaluations and checkpoints apart)
    double wall_seconds = 0;   // this run's time so far from its first step, everything included
};

// --target-accuracy's answer: the first evaluation at or above the target, or, when none was, where
// the run ended (its last evaluation) and the best accuracy it saw.
struct TimeToAccuracy {
    double target = 0;
    bool reached = false;
    Evaluation at;
    double best_accuracy = 0;
};

struct RunInfo {
    std::string model;  // the network's name
    TrainSettings settings;
    std::string variant, device, platform;
    int train_samples = 0, test_samples = 0;
    int first_epoch = 1;  // > 1 when resuming
};

struct EvalResult {
    double loss = 0, accuracy = 0;
    int samples = 0;
    std::vector<std::vector<int64_t>> confusion;  // [true digit][predicted digit]
};

// Throws Error unless `net` has an output for every label of `data` (`source` names the data).
void check_classes(const Network& net, const Dataset& data, const std::string& source);

// The settings of a run of `model` with `o`'s flags (flags first, then the model's recipe).
TrainSettings resolve_settings(const TrainOptions& o, const TrainRecipe& recipe);

// Evaluates the engine's current parameters on its test set (`test_set` is what
// was uploaded as Split::Test); the confusion matrix only when asked.
EvalResult evaluate(Engine& engine, const Network& net, const Dataset& test_set, bool confusion);

// Observers, so the loop does no printing itself.
struct TrainObserver {
    std::function<void(const RunInfo&)> on_start;
    std::function<void(int epoch, int step, int steps)> on_step;  // after each step is queued
    std::function<void(const EpochResult&)> on_epoch;
    // Polled after every step: non-zero (a signal number) ends training after that step.
    std::function<int()> stop_requested;
};

struct TrainResult {
    RunInfo info;
    std::vector<EpochResult> epochs;
    std::vector<float> params;  // the final parameters
    int stopped_by = 0;         // the signal that ended training early, else 0
    int stopped_epoch = 0, stopped_step = 0;
    std::vector<Evaluation> evaluations;     // every test pass, in order
    std::optional<TimeToAccuracy> time_to_accuracy;  // with --target-accuracy
};

TrainResult train(const TrainOptions& options, const TrainObserver& observer = {});

}  // namespace lenet5
