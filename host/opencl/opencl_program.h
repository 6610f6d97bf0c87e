// The network as OpenCL source for the per-sample kernels of cl_kernels/step.cl: the host writes
// each layer of network.h as a call to a layer function of cl_kernels/sample_layers.cl, with its
// shapes and offsets as literals, and the convolutions' connection lists as __constant tables.
// The compiler then sees every loop bound, and one kernel runs a sample through the whole network.
//
// The per-sample kernels run networks of this form: convolution + subsampling pairs (each
// convolution, of stride 1 without padding, directly followed by a subsampling), if any, then
// fully connected layers (a convolution whose window covers its whole input and that reads every
// input map counts as one); any activation, and either loss (with the softmax, the last layer has
// no activation). Pooling layers and padded or strided convolutions are the batch-level engine's.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "model/network.h"
#include "opencl/opencl_layout.h"

namespace lenet5 {

struct SampleProgram {
    std::string source;                // #defines and tables, put before the kernel files
    size_t act_floats = 0;             // a sample's activations: its input, then every layer's output
    std::vector<size_t> output_at;     // layer k's output in them
    size_t run_begin = 0, run_floats = 0;         // the pairs' parameters: a span of the device layout
    size_t forward_work = 0, backward_work = 0;  // floats of a work-group's work area per kernel
    size_t gradient_groups = 0;                  // the gradients kernel's work-groups (GRAD_GROUPS)
    // A network that starts fully connected has the batch-1 kernels of step.cl's SPREAD_FIRST:
    // first_forward (the first layer's first_outputs rows, rows_per_group in each group),
    // tail_step and step_update (the tail: the parameters from tail_begin on; tail_work floats of
    // work area per group).
    bool spread = false;
    size_t first_outputs = 0, rows_per_group = 0, tail_begin = 0, tail_work = 0;
};

// The per-sample kernels' knobs (sample_layers.cl's -D defaults), which `lenet5 tune` also times at
// the fastest work-group size: each name with the values tried, the kernels' default first.
struct SampleKnob {
    const char* name;
    std::vector<int> values;
};
const std::vector<SampleKnob>& sample_knobs();

// Knob settings as the tuning cache keeps them ("FWD_RUN=4,FC_LANES=8"; "" for the defaults) as
// build options (" -DFWD_RUN=4 -DFC_LANES=8"). Throws Error for an unknown knob or a value it does
// not take.
std::string knob_options(const std::string& knobs);

// Why the per-sample kernels cannot run `net` (one line), or "" when they can.
std::string sample_refusal(const Network& net);

// group: items per sample's work-group (SG); lanes: items per fully connected output row (LANES);
// the gradients kernel's work-groups: grad_params parameters times grad_lanes lanes (GRAD_PARAMS,
// GRAD_LANES; a fully connected layer's weights go in tiles of grad_lanes outputs by grad_params
// inputs). Throws Error (sample_refusal's) when the network is not of the form above.
SampleProgram sample_program(const Network& net, const DeviceLayout& layout, int group, int lanes, int grad_params,
                             int grad_lanes);

}  // namespace lenet5
