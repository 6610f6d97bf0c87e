// `lenet5 tune --conv`: for each convolution of the model whose output maps read every input map,
// at the tune's batch size, times each algorithm this build has (forward and both backward passes,
// device time): own (the batch-level engine's own kernels), direct and im2col as a training step of
// that engine runs them, clblast alone; prints the times and records the fastest in the convolution
// tuning cache (conv_tuning.h), which train's and OpenCLConv's Auto then use on this device.
#pragma once
#include <ostream>

#include "opencl/tune.h"

namespace lenet5::conv {

// Returns the exit status; throws Error when no algorithm runs a shape or the cache cannot be written.
int run_conv_tune(const TuneOptions& options, std::ostream& out);

}  // namespace lenet5::conv
