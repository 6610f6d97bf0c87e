// The rule every variant is held to (DESIGN.md, "How correctness is shown"): from the same
// parameters on the same batches, its layer outputs, loss, gradients and updated parameters match
// the `cpu` reference's within ||v - ref|| / ||ref|| < 1e-4. The tests and `lenet5 check` share it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "io/mnist.h"
#include "model/network.h"

namespace lenet5 {

constexpr double kReferenceTolerance = 1e-4;

// ||v - ref|| / ||ref|| (or ||v|| when ref is all zeros); infinite when a value is not finite or
// the sizes differ.
double relative_error(const std::vector<float>& v, const std::vector<float>& ref);

// What one training step leaves to compare.
struct StepRecord {
    std::vector<std::vector<float>> outputs;  // per layer, the last layer's before any softmax
    double loss = 0;                          // mean over the step's samples
    std::vector<float> gradients;             // flat layout, before the update
    std::vector<float> params_after;          // after the update
};

// The rates of the compared steps: lr 0.05, momentum 0.9, weight decay 5e-4; under Adam lr 0.001,
// its default (Adam moves a parameter whose gradient is near eps by up to lr times the gradient's
// change over eps: at 0.05 the variants' roundings of gradients near 0 would show).
struct StepRates {
    float lr = 0.05f, momentum = 0.9f, weight_decay = 5e-4f;
};
inline StepRates step_rates(const TrainingRule& rule) { return rule.adam() ? StepRates{0.001f} : StepRates{}; }

// Uploads `data` as both splits, sets init_params(net, seed) and the order shuffled from seed + 1,
// then trains `steps` steps of `batch` samples at `rates`, recording each. `data` must hold
// steps * batch samples.
std::vector<StepRecord> record_steps(Engine& e, const Network& net, const Dataset& data, int batch, int steps,
                                     uint64_t seed, const StepRates& rates = {});

// The same steps as `train` takes them: forward, backward and update with nothing read in between,
// so that the engine's fused kernels and runs of steps do the work. With `read_every_step`, a
// record after each step (its loss and the parameters after it; no layer outputs, no gradients: a
// fused step need not keep them), else one record after the last (the steps' mean loss, the
// parameters).
std::vector<StepRecord> record_training_path(Engine& e, const Network& net, const Dataset& data, int batch, int steps,
                                             uint64_t seed, bool read_every_step, const StepRates& rates = {});

// One number the rule compares: layer (or "network" for the loss), phase (forward, backward,
// update) and what (output, loss, weight gradient, bias gradient, parameters).
struct Comparison {
    std::string layer, phase, what;
    double error = 0;  // relative error; over several steps, the largest
    bool passed(double tolerance = kReferenceTolerance) const { return error < tolerance; }
};

// Every comparison of `got` against `ref` (records of the same steps), in the order the step
// computes them: forward by layer (where the records have layer outputs), the loss, backward from
// the last layer (where they have gradients), the update by layer.
std::vector<Comparison> compare_steps(const Network& net, const std::vector<StepRecord>& got,
                                      const std::vector<StepRecord>& ref);

}  // namespace lenet5
