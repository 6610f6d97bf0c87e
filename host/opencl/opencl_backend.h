// The OpenCL variants (gpu, gpu-constant, gpu-local), present when the build has
// OpenCL (LENET5_HAVE_OPENCL). Implemented in host/opencl_*.cpp.
#pragma once
#include <memory>
#include <ostream>
#include <string>

#include "conv/conv_shape.h"
#include "engine/engine.h"

namespace lenet5 {

// Builds the engine of `variant` on OpenCL device `device` (the index of
// `lenet5 devices`; -1 = the first GPU of any platform, else device 0), with work-groups of
// `group` items per sample; 0: the group `lenet5 tune` cached for this device, variant and
// `batch` (tuning_cache.h), with its knob settings, else the default.
// Throws Error when there is no such device or it lacks what the variant needs.
// conv_algo: the batch-level engine's convolution algorithm (OpenCLBatchEngine); rule: compiled into
// the kernels (TrainingRule).
std::unique_ptr<Engine> make_opencl_engine(const Network& net, const std::string& variant, int device, int group,
                                           int batch, conv::ConvAlgo conv_algo = conv::ConvAlgo::Auto,
                                           bool inference = false, const TrainingRule& rule = {});

// The per-sample engine of `variant` (`lenet5 tune`'s knob candidates): `group` items per sample, the
// kernels' `knobs` (opencl_program.h's knob_options). Throws Error as above, or when the network
// is not one the per-sample kernels run.
std::unique_ptr<Engine> make_sample_engine(const Network& net, const std::string& variant, int device, int group,
                                           const std::string& knobs);

// True when some platform has a GPU (what `auto` looks for).
bool opencl_gpu_available();

// `lenet5 devices`: one line per device across all platforms.
void print_opencl_devices(std::ostream& out);

}  // namespace lenet5
