// A training step's kernels (compiled after sample_layers.cl): forward_samples and
// backward_samples run one work-group of SG items per sample, through every layer; gradients
// adds the samples' contributions up into each parameter's gradient; update.cl's sgd_momentum
// follows. The NETWORK_ macros are the network's layers as calls, written by the host
// (host/opencl_program.cpp) from the names declared here.
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

#ifdef MEM_LOCAL
// A GRAD_TILE x GRAD_TILE tile of a fully connected layer's weight gradients gW [O][I] (rows from
// o0, columns from i0): each round stages GRAD_TILE samples' deltas and inputs in __local, where
// each is read GRAD_TILE times, instead of once per weight from __global. Item (ly, lx) owns
// gW[o0 + ly][i0 + lx] and adds the samples in order.
inline void fc_weight_tile(__global const float* acts, __global const float* deltas, int count, __global float* gW,
                           int I, int O, int delta_at, int in_at, int tile, __local float* dt, __local float* xt) {
    const int lid = (int)get_local_id(0), ly = lid / GRAD_TILE, lx = lid % GRAD_TILE;
    const int columns = (I + GRAD_TILE - 1) / GRAD_TILE, o0 = tile / columns * GRAD_TILE, i0 = tile % columns * GRAD_TILE;
    float g = 0.0f;
    for (int s0 = 0; s0 < count; s0 += GRAD_TILE) {
        const size_t row = (size_t)(s0 + ly) * ACT_FLOATS;  // item (ly, lx) stages sample s0 + ly
        const bool sample = s0 + ly < count;
        dt[lid] = sample && o0 + lx < O ? deltas[row + delta_at + o0 + lx] : 0.0f;
        xt[lid] = sample && i0 + lx < I ? acts[row + in_at + i0 + lx] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < GRAD_TILE; ++k) g += dt[k * GRAD_TILE + ly] * xt[k * GRAD_TILE + lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (o0 + ly < O && i0 + lx < I) gW[(o0 + ly) * I + i0 + lx] = g;
}
#endif

// Every parameter's gradient (zero in the layout's padding), overwritten.
// NDRange ((WEIGHT_TILES if gpu-local, else 0) * GRAD_TILE^2 + round_up(PARAM_FLOATS, GRAD_TILE^2)),
// work-group GRAD_TILE^2: gpu-local's first WEIGHT_TILES groups compute the fully connected weight
// tiles; after them, one item per float of the device layout.
__kernel void gradients(__global const float* acts, __global const float* deltas, __global const float* partials,
                        int count, __global float* grads) {
#ifdef MEM_LOCAL
    __local float dt[GRAD_TILE * GRAD_TILE], xt[GRAD_TILE * GRAD_TILE];
    const int tile = (int)get_group_id(0);
    if (tile < WEIGHT_TILES) {
        NETWORK_WEIGHT_TILES
        return;
    }
    const int p = (int)get_global_id(0) - WEIGHT_TILES * GRAD_TILE * GRAD_TILE;
    if (p >= PARAM_FLOATS || IN_WEIGHT_TILES(p)) return;
#else
    const int p = (int)get_global_id(0);
    if (p >= PARAM_FLOATS) return;
#endif
    float g = 0.0f;
    NETWORK_GRADIENTS
#ifndef MEM_LOCAL
    NETWORK_WEIGHT_GRADIENTS
#endif
    grads[p] = g;
}
