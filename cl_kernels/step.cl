// A training step's kernels (compiled after sample_layers.cl): forward_samples and
// backward_samples run one work-group of SG items per sample, through every layer; gradients
// adds the samples' contributions up into each parameter's gradient; update.cl's sgd_momentum
// follows. NETWORK_FORWARD, NETWORK_BACKWARD and NETWORK_GRADIENTS are the network's layers as
// calls, written by the host (host/opencl_program.cpp) from the names declared here.
//
// The batch's sample s is data set row rows[first + s]. Its activations act = acts + s*ACT_FLOATS
// hold the input at 0, then every layer's output; its deltas (same offsets) each layer's delta.

// The group's work area: __local for gpu-local, else this group's slice of the work buffer.
#ifdef MEM_LOCAL
#define WORK_AREA(floats) __local float work[floats]
#define WORK_ARG
#else
#define WORK_AREA(floats) __global float* work = work_buffer + (size_t)get_group_id(0) * (floats)
#define WORK_ARG , __global float* work_buffer
#endif

// The pairs' parameters as the layers read them (pp): gpu-local copies them to __local memory.
#ifdef MEM_LOCAL
#define PAIR_PARAMETERS(run_params)             \
    __local float pp[RUN_FLOATS > 0 ? RUN_FLOATS : 1]; \
    copy_to_work(pp, run_params, RUN_FLOATS)
#else
#define PAIR_PARAMETERS(run_params) WEIGHTS const float* pp = run_params
#endif

// Forward over the batch, one group per sample: every layer's output, the loss and the hit (at
// loss[slot + s], hit[slot + s]) and the output's delta (scale = 1/count).
// NDRange (count * SG), work-group SG.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void forward_samples(
    __global const float* inputs, __global const uchar* labels, __global const int* rows, int first, float scale,
    __global float* acts, __global float* deltas, __global float* loss, __global int* hit, int slot,
    __global const float* params, WEIGHTS const float* run_params WORK_ARG) {
    const int s = (int)get_group_id(0);
    const size_t row = (size_t)rows[first + s];
    __global float* act = acts + (size_t)s * ACT_FLOATS;
    __global float* delta = deltas + (size_t)s * ACT_FLOATS;
    WORK_AREA(FORWARD_WORK);
    PAIR_PARAMETERS(run_params);
    const int label = labels[row];
    loss += slot + s;
    hit += slot + s;
    __global const float* input = inputs + row * INPUT_FLOATS;
    for (int e = (int)get_local_id(0); e < INPUT_FLOATS; e += SG) work[e] = act[e] = input[e];
    SYNC();
    NETWORK_FORWARD
}

// Backward over the batch, one group per sample, from the output's delta that forward_samples
// left: every layer's delta, and each sample's share of the pairs' gradients in its row of
// partials ([count][RUN_FLOATS], zero where no parameter is).
// NDRange (count * SG), work-group SG.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void backward_samples(
    __global const float* acts, __global float* deltas, __global float* partials, __global const float* params,
    WEIGHTS const float* run_params WORK_ARG) {
    const int s = (int)get_group_id(0);
    __global const float* act = acts + (size_t)s * ACT_FLOATS;
    __global float* delta = deltas + (size_t)s * ACT_FLOATS;
    __global float* part = partials + (size_t)s * RUN_FLOATS;
    WORK_AREA(BACKWARD_WORK);
    PAIR_PARAMETERS(run_params);
    NETWORK_BACKWARD
}

// A pair parameter's gradient: the samples' shares, in sample order.
inline float pair_gradient(__global const float* partials, int count, int at) {
    float g = 0.0f;
#define PARTIAL_TERM(s) partials[(size_t)(s) * RUN_FLOATS + at]
    SUM_STRIDED(g, 0, 1, count, PARTIAL_TERM);
#undef PARTIAL_TERM
    return g;
}

// A fully connected weight's gradient, sum over the samples of delta[o] * in[i] (delta_at, in_at:
// the layer's delta and its input in a sample's activations).
inline float fc_weight_gradient(__global const float* acts, __global const float* deltas, int count, int o, int i,
                                int delta_at, int in_at) {
    float g = 0.0f;
#define WEIGHT_GRAD_TERM(s) (deltas[(size_t)(s) * ACT_FLOATS + delta_at + o] * acts[(size_t)(s) * ACT_FLOATS + in_at + i])
    SUM_STRIDED(g, 0, 1, count, WEIGHT_GRAD_TERM);
#undef WEIGHT_GRAD_TERM
    return g;
}

inline float fc_bias_gradient(__global const float* deltas, int count, int o, int delta_at) {
    float g = 0.0f;
#define BIAS_GRAD_TERM(s) deltas[(size_t)(s) * ACT_FLOATS + delta_at + o]
    SUM_STRIDED(g, 0, 1, count, BIAS_GRAD_TERM);
#undef BIAS_GRAD_TERM
    return g;
}

// Every parameter's gradient (zero in the layout's padding), overwritten.
// NDRange (round_up(PARAM_FLOATS, WG)): one item per float of the device layout.
__kernel void gradients(__global const float* acts, __global const float* deltas, __global const float* partials,
                        int count, __global float* grads) {
    const int p = (int)get_global_id(0);
    if (p >= PARAM_FLOATS) return;
    float g = 0.0f;
    NETWORK_GRADIENTS
    grads[p] = g;
}
