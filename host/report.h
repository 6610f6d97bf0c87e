// What the user sees: the per-epoch table and the JSON report.
#pragma once
#include <ostream>
#include <string>

#include "trainer.h"

namespace lenet5 {

void print_run_header(std::ostream& out, const RunInfo& info, const TrainOptions& options);
void print_table_header(std::ostream& out);
void print_table_row(std::ostream& out, const EpochResult& r);

// The JSON report of DESIGN.md, as text.
std::string train_report_json(const TrainResult& result, const TrainOptions& options);

}  // namespace lenet5
