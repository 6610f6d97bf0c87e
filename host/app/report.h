// What the user sees: the per-epoch table and the JSON report.
#pragma once
#include <ostream>
#include <string>

#include "train/trainer.h"

namespace lenet5 {

void print_run_header(std::ostream& out, const RunInfo& info, const TrainOptions& options);
void print_table_header(std::ostream& out);
void print_table_row(std::ostream& out, const EpochResult& r);
// --target-accuracy: one line after the table, when it was reached and how long it took, or that it
// was not.
void print_time_to_accuracy(std::ostream& out, const TimeToAccuracy& t);
// --kernel-profile: each kernel's launches and device time per training step, over all epochs.
void print_kernel_profile(std::ostream& out, const std::vector<EpochResult>& epochs);

// `lenet5 eval`: accuracy, loss and the confusion matrix, as text and as JSON.
void print_eval(std::ostream& out, const EvalResult& r);
std::string eval_report_json(const EvalResult& r, const std::string& model, const RunInfo& info);

// `lenet5 models`: each built-in model's layers, parameter count, loss and training settings.
void print_models(std::ostream& out);

// The JSON report of DESIGN.md, as text.
std::string train_report_json(const TrainResult& result, const TrainOptions& options);

}  // namespace lenet5
