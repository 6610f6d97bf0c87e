// A training step's kernels (compiled after sample_layers.cl): forward_samples and
// backward_samples run one work-group of SG items per sample, through every layer; gradients
// adds the samples' contributions up into each parameter's gradient; update.cl's sgd_momentum
// follows. At batch 1 a training step is two launches instead: step_samples (forward and backward)
// and gradients_sgd (gradients and update), except a step whose phases the engine times apart (a
// probe: forward_samples, backward_samples, gradients_one, sgd_momentum, with the same results).
// The fused kernels (gradients_update, gradients_sgd, step_update, step_run) apply update_rule.h's
// SGD only: under Adam the engine runs the step phase by phase, then update.cl's adam_update.
// The NETWORK_ macros are the network's layers as calls,
// written by the host (host/opencl/opencl_program.cpp) from the names declared here.
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

// The gradients kernel's lane sums: __local for gpu-local, else this group's slice of sums_buffer.
#ifdef MEM_LOCAL
#define SUMS_AREA __local float sums[GRAD_PARAMS * GRAD_LANES * GRAD_LANES]
#define SUMS_ARG
#else
#define SUMS_AREA __global float* sums = sums_buffer + (size_t)get_group_id(0) * GRAD_PARAMS * GRAD_LANES * GRAD_LANES
#define SUMS_ARG , __global float* sums_buffer
#endif

// The pairs' parameters as the layers read them (pp): gpu-local copies them to __local memory.
#ifdef MEM_LOCAL
#define PAIR_PARAMETERS(run_params)             \
    __local float pp[RUN_FLOATS > 0 ? RUN_FLOATS : 1]; \
    copy_to_work(pp, run_params, RUN_FLOATS)
#else
#define PAIR_PARAMETERS(run_params) WEIGHTS const float* pp = run_params
#endif

// Sample s's forward, up to its first layer: the names NETWORK_FORWARD uses, its input copied in
// (to the work area in rows of INPUT_W values, INPUT_XW floats apart).
#define FORWARD_PROLOGUE(work_floats)                                                   \
    const int s = (int)get_group_id(0);                                                 \
    const size_t row = (size_t)rows[first + s];                                         \
    __global float* act = acts + (size_t)s * ACT_FLOATS;                                \
    __global float* delta = deltas + (size_t)s * ACT_FLOATS;                            \
    WORK_AREA(work_floats);                                                             \
    PAIR_PARAMETERS(run_params);                                                        \
    const int label = labels[row];                                                      \
    loss += slot + s;                                                                   \
    hit += slot + s;                                                                    \
    __global const float* input = inputs + row * INPUT_FLOATS;                          \
    for (int e = (int)get_local_id(0); e < INPUT_FLOATS; e += SG)                       \
        work[e / INPUT_W * INPUT_XW + e % INPUT_W] = act[e] = input[e];                 \
    SYNC()

// Forward over the batch, one group per sample: every layer's output, the loss and the hit (at
// loss[slot + s], hit[slot + s]) and the output's delta (scale = 1/count).
// NDRange (count * SG), work-group SG.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void forward_samples(
    __global const float* inputs, __global const uchar* labels, __global const int* rows, int first, float scale,
    __global float* acts, __global float* deltas, __global float* loss, __global int* hit, int slot,
    __global const float* params, WEIGHTS const float* run_params WORK_ARG) {
    FORWARD_PROLOGUE(FORWARD_WORK);
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

// A training step's forward and backward in one launch (the engine's batch-1 step, where a launch
// costs more than a sample's work): forward_samples's arguments, then backward_samples's partials.
// The work area is shared: the backward only starts after the whole forward (and its loss).
// NDRange (count * SG), work-group SG.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void step_samples(
    __global const float* inputs, __global const uchar* labels, __global const int* rows, int first, float scale,
    __global float* acts, __global float* deltas, __global float* loss, __global int* hit, int slot,
    __global const float* params, WEIGHTS const float* run_params, __global float* partials WORK_ARG) {
    FORWARD_PROLOGUE(FORWARD_WORK > BACKWARD_WORK ? FORWARD_WORK : BACKWARD_WORK);
    __global float* part = partials + (size_t)s * RUN_FLOATS;
    NETWORK_FORWARD
    SYNC();
    NETWORK_BACKWARD
}

// A parameter's gradient is a sum over the batch's samples. Each of GRAD_LANES items sums every
// GRAD_LANES-th sample from `lane` (so no item waits on a long chain of loads), then the gradients
// kernel adds the lanes in order.

// A pair parameter: the samples' shares.
inline float pair_gradient(__global const float* partials, int count, int at, int lane) {
    float g = 0.0f;
#define PARTIAL_TERM(s) partials[(size_t)(s) * RUN_FLOATS + at]
    SUM_STRIDED(g, lane, GRAD_LANES, count, PARTIAL_TERM);
#undef PARTIAL_TERM
    return g;
}

// A fully connected weight: delta[o] * in[i] (delta_at, in_at: the layer's delta and its input in
// a sample's activations).
inline float fc_weight_gradient(__global const float* acts, __global const float* deltas, int count, int o, int i,
                                int delta_at, int in_at, int lane) {
    float g = 0.0f;
#define WEIGHT_GRAD_TERM(s) (deltas[(size_t)(s) * ACT_FLOATS + delta_at + o] * acts[(size_t)(s) * ACT_FLOATS + in_at + i])
    SUM_STRIDED(g, lane, GRAD_LANES, count, WEIGHT_GRAD_TERM);
#undef WEIGHT_GRAD_TERM
    return g;
}

inline float fc_bias_gradient(__global const float* deltas, int count, int o, int delta_at, int lane) {
    float g = 0.0f;
#define BIAS_GRAD_TERM(s) deltas[(size_t)(s) * ACT_FLOATS + delta_at + o]
    SUM_STRIDED(g, lane, GRAD_LANES, count, BIAS_GRAD_TERM);
#undef BIAS_GRAD_TERM
    return g;
}

// The gradients kernel's work-groups (GRAD_PARAMS * GRAD_LANES items) come in two kinds. The
// first FLAT_GROUPS take GRAD_PARAMS parameters each of the flat ranges (every parameter but the
// fully connected layers' weights: the pairs' span, the biases, the padding; NETWORK_FLAT_PARAM
// maps the j-th to its place in the layout), through NETWORK_GRADIENTS. The others take a tile of
// a fully connected layer's weights each (NETWORK_FC_TILES): GRAD_LANES outputs by GRAD_PARAMS
// inputs (as many weights as items), so that an item reads a sample's input once for GRAD_LANES
// weights, where one item a weight read it once per weight (C5's inputs, 49 MB a step at batch 256 on LeNet-5).
// Either way a gradient is the same sum in the same order: each lane's SUM_STRIDED, then the
// lanes added in lane order.

// A parameter's place in the layout and its gradient over the batch, as an item of the gradients
// kernel computes it; p is -1 for an item that only adds a part.
typedef struct {
    int p;
    float g;
} ParamGradient;

// Flat parameter p's gradient over the batch, for the lane-0 item: item lid of a group is lane
// lid / GRAD_PARAMS of flat parameter group * GRAD_PARAMS + lid % GRAD_PARAMS (neighbouring items,
// neighbouring parameters); the lanes' sums meet in `sums` and lane 0 adds them in order.
inline ParamGradient flat_gradient(__global const float* acts, __global const float* deltas,
                                   __global const float* partials, int count, SCRATCH float* sums) {
    const int lid = (int)get_local_id(0), q = lid % GRAD_PARAMS, lane = lid / GRAD_PARAMS;
    const int j = (int)get_group_id(0) * GRAD_PARAMS + q, p = NETWORK_FLAT_PARAM(j);
    float g = 0.0f;
    NETWORK_GRADIENTS
    sums[lid] = g;
    SYNC();
    ParamGradient out = {-1, 0.0f};
    if (lane > 0 || j >= FLAT_FLOATS) return out;
    out.p = p;
    out.g = sums[q];  // lane 0's own sum, read back like the others' (PoCL lost it kept in g across the barrier)
    for (int l = 1; l < GRAD_LANES; ++l) out.g += sums[l * GRAD_PARAMS + q];
    return out;
}

// Tile `tile` of a fully connected layer's weight gradients (O outputs, I inputs; delta_at, in_at:
// its delta and its input in a sample's activations; w_at: its weights in the layout), tiles
// ordered by rows, then by inputs: item (lane, q) sums its lane's samples for input i0 + q and
// each of the rows o0 .. o0 + GRAD_LANES - 1 (each sum as fc_weight_gradient's SUM_STRIDED adds
// it), the sums meet in `sums` ([GRAD_LANES rows][GRAD_LANES lanes][GRAD_PARAMS]), and item
// (r, q) then adds row o0 + r's lanes in lane order: fc_weight_gradient's result, bit for bit. p is
// -1 for an item with no weight (past the layer's edges).
inline ParamGradient fc_weight_tile(__global const float* acts, __global const float* deltas, int count, int O,
                                    int I, int delta_at, int in_at, int w_at, int tile, SCRATCH float* sums) {
    const int lid = (int)get_local_id(0), q = lid % GRAD_PARAMS, lane = lid / GRAD_PARAMS;
    const int tiles_across = (I + GRAD_PARAMS - 1) / GRAD_PARAMS;
    const int o0 = tile / tiles_across * GRAD_LANES, i = tile % tiles_across * GRAD_PARAMS + q;
    // Items and rows past the layer's edges read its last input and output, and write nothing.
    __global const float* x = acts + in_at + min(i, I - 1);
    int row[GRAD_LANES];
    float a[GRAD_LANES][4];
    for (int r = 0; r < GRAD_LANES; ++r) {
        row[r] = delta_at + min(o0 + r, O - 1);
        a[r][0] = a[r][1] = a[r][2] = a[r][3] = 0.0f;
    }
#define TILE_INPUT(s) x[(size_t)(s) * ACT_FLOATS]
#define TILE_DELTA(s, r) deltas[(size_t)(s) * ACT_FLOATS + row[r]]
    int s = lane;
    for (; s + 3 * GRAD_LANES < count; s += 4 * GRAD_LANES) {
        const float x0 = TILE_INPUT(s), x1 = TILE_INPUT(s + GRAD_LANES), x2 = TILE_INPUT(s + 2 * GRAD_LANES),
                    x3 = TILE_INPUT(s + 3 * GRAD_LANES);
        for (int r = 0; r < GRAD_LANES; ++r) {
            a[r][0] += TILE_DELTA(s, r) * x0;
            a[r][1] += TILE_DELTA(s + GRAD_LANES, r) * x1;
            a[r][2] += TILE_DELTA(s + 2 * GRAD_LANES, r) * x2;
            a[r][3] += TILE_DELTA(s + 3 * GRAD_LANES, r) * x3;
        }
    }
    for (; s < count; s += GRAD_LANES) {
        const float x0 = TILE_INPUT(s);
        for (int r = 0; r < GRAD_LANES; ++r) a[r][0] += TILE_DELTA(s, r) * x0;
    }
#undef TILE_INPUT
#undef TILE_DELTA
    for (int r = 0; r < GRAD_LANES; ++r)
        sums[(r * GRAD_LANES + lane) * GRAD_PARAMS + q] = 0.0f + ((a[r][0] + a[r][1]) + (a[r][2] + a[r][3]));
    SYNC();
    ParamGradient out = {-1, 0.0f};
    const int r = lane;  // the row this item adds up
    if (o0 + r >= O || i >= I) return out;
    out.p = w_at + (o0 + r) * I + i;
    out.g = sums[r * GRAD_LANES * GRAD_PARAMS + q];
    for (int l = 1; l < GRAD_LANES; ++l) out.g += sums[(r * GRAD_LANES + l) * GRAD_PARAMS + q];
    return out;
}

// The parameter this item computes the batch's gradient of, if any: a flat group's or a tile's.
// Every item of the group must call it.
inline ParamGradient batch_gradient(__global const float* acts, __global const float* deltas,
                                    __global const float* partials, int count, SCRATCH float* sums) {
    int tile = (int)get_group_id(0) - FLAT_GROUPS;  // NETWORK_FC_TILES counts it down layer by layer
    if (tile < 0) return flat_gradient(acts, deltas, partials, count, sums);
    NETWORK_FC_TILES
    const ParamGradient none = {-1, 0.0f};
    return none;  // (no tile is past the last)
}

// Every parameter's gradient (zero in the layout's padding), overwritten.
// NDRange (GRAD_GROUPS * GRAD_PARAMS * GRAD_LANES), work-group GRAD_PARAMS * GRAD_LANES.
__kernel __attribute__((reqd_work_group_size(GRAD_PARAMS * GRAD_LANES, 1, 1))) void gradients(
    __global const float* acts, __global const float* deltas, __global const float* partials, int count,
    __global float* grads SUMS_ARG) {
    SUMS_AREA;
    const ParamGradient pg = batch_gradient(acts, deltas, partials, count, sums);
    if (pg.p >= 0) grads[pg.p] = pg.g;
}

// The gradients kernel, then the update from the gradient in a register (sgd_momentum's
// arithmetic): a batch's gradients and update in one launch, with the same results.
// NDRange and work-group as gradients.
__kernel __attribute__((reqd_work_group_size(GRAD_PARAMS * GRAD_LANES, 1, 1))) void gradients_update(
    __global const float* acts, __global const float* deltas, __global const float* partials, int count,
    __global float* grads, __global float* params, __global float* velocity, float lr, float momentum,
    float weight_decay SUMS_ARG) {
    SUMS_AREA;
    const ParamGradient pg = batch_gradient(acts, deltas, partials, count, sums);
    if (pg.p < 0) return;
    grads[pg.p] = pg.g;
    sgd_step(params, velocity, pg.p, pg.g, lr, momentum, weight_decay);
}

// Batch 1: a parameter's gradient is its one sample's term, so one item per parameter computes it.
inline float one_sample_gradient(__global const float* acts, __global const float* deltas,
                                 __global const float* partials, int p) {
    const int count = 1, lane = 0;
    float g = 0.0f;
    NETWORK_GRADIENTS
    return g;
}

// Batch 1: every parameter's gradient, one item each: what the gradients kernel computes there,
// without its lanes. NDRange (round_up(PARAM_FLOATS, WG)).
__kernel void gradients_one(__global const float* acts, __global const float* deltas, __global const float* partials,
                            __global float* grads) {
    const int p = (int)get_global_id(0);
    if (p < PARAM_FLOATS) grads[p] = one_sample_gradient(acts, deltas, partials, p);
}

// Batch 1: gradients_one, then the update from the gradient in a register (sgd_momentum's
// arithmetic): the gradient and sgd_momentum in one launch, with the same results.
// NDRange (round_up(PARAM_FLOATS, WG)): one item per parameter.
__kernel void gradients_sgd(__global const float* acts, __global const float* deltas, __global const float* partials,
                            __global float* grads, __global float* params, __global float* velocity, float lr,
                            float momentum, float weight_decay) {
    const int p = (int)get_global_id(0);
    if (p >= PARAM_FLOATS) return;
    const float g = one_sample_gradient(acts, deltas, partials, p);
    grads[p] = g;
    sgd_step(params, velocity, p, g, lr, momentum, weight_decay);
}

#ifdef SPREAD_FIRST
// Batch 1 of a network that starts fully connected (the host defines SPREAD_FIRST and the names
// below): the first layer's weights are most of the work, so its rows are spread over many
// work-groups (first_forward), and the small layers after it (the tail) run either in one group
// (tail_step, before gradients_sgd) or, fused with the gradients and the update, redundantly in
// every group of step_update (a launch a step) or step_run (a run of steps in one launch). The
// results are gradients_sgd's, the same in every group. A step whose phases the engine times apart
// (a probe) runs first_forward, tail_forward, then backward_samples, step_gradients and sgd_momentum.
//   FIRST_OUT, FIRST_AT   the first layer's outputs, and where they are in a sample's activations
//   TAIL_BEGIN, TAIL_FLOATS   the tail's parameters: the device layout from TAIL_BEGIN on
//   FIRST_W, FIRST_B, FIRST_IN   the first layer's weights [FIRST_OUT][FIRST_IN] and biases in it
//   TAIL_WORK             floats of a group's work area in tail_step, step_update and step_run
//   NETWORK_FIRST_ROWS(x, params, part, acts, row0, rows), NETWORK_TAIL_FORWARD,
//   NETWORK_STEP_GRADIENTS   calls, as the NETWORK_ macros

// The first layer's rows [row0, row0 + rows) of the sample whose input is x, from `params`, into
// the sample's activations `acts`, SG / LANES rows at a time. part: SG floats of the work area.
inline void first_rows_forward(__global const float* x, __global const float* params, SCRATCH float* part,
                               __global float* acts, int row0, int rows) {
    for (int r = 0; r < rows; r += SG / LANES) {
        NETWORK_FIRST_ROWS(x, params, part, acts, row0 + r, min(SG / LANES, rows - r));
        SYNC();  // part is reused
    }
}

// The first layer of the training sample rows[first] (into acts, a batch of one), its input
// copied to acts as forward_samples does, and the tail's parameters copied to `snapshot` (same
// offsets) for step_update. NDRange (ceil(FIRST_OUT / (SG / LANES)) * SG), work-group SG.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void first_forward(
    __global const float* inputs, __global const int* rows, int first, __global float* acts,
    __global const float* params, __global float* snapshot WORK_ARG) {
    const int id = (int)get_global_id(0), n = (int)get_global_size(0);
    __global const float* input = inputs + (size_t)rows[first] * INPUT_FLOATS;
    WORK_AREA(SG);
    for (int e = id; e < INPUT_FLOATS; e += n) acts[e] = input[e];
    for (int e = TAIL_BEGIN + id; e < PARAM_FLOATS; e += n) snapshot[e] = params[e];
    first_rows_forward(input, params, work, acts, (int)get_group_id(0) * (SG / LANES), SG / LANES);
}

// The tail's forward from the first layer's outputs in first_out (written by other groups in
// step_run, so read through a volatile pointer: never from a stale cache), into the work area and,
// where `copy`, into act too: the other layers, the loss and the output's delta. No item may write
// where another group of the launch reads: where act is first_out (group 0 of a step_update whose
// first layer first_forward computed), `copy` is false. (step_run copies unconditionally: any test
// in its loop costs NVIDIA's compiler 7% of the MLP's epoch; its host never starts a run of
// several groups from slot 0.)
#define TAIL_FORWARD(first_out, copy)                                               \
    for (int e = (int)get_local_id(0); e < FIRST_OUT; e += SG) {                   \
        const float v = ((volatile __global const float*)(first_out))[FIRST_AT + e]; \
        work[e] = v;                                                                \
        if (copy) act[FIRST_AT + e] = v;                                            \
    }                                                                               \
    SYNC();                                                                         \
    NETWORK_TAIL_FORWARD

// The tail of a batch-1 step: its forward and every delta (NETWORK_BACKWARD), as step_samples
// computes them.
#define TAIL_STEP(first_out, copy) \
    TAIL_FORWARD(first_out, copy)   \
    SYNC();                         \
    NETWORK_BACKWARD

// tail_step's and tail_forward's names for their arguments, as the tail uses them.
#define TAIL_PROLOGUE                           \
    const int label = labels[rows[first]];      \
    __global float* act = acts;                 \
    __global float* delta = deltas;             \
    loss += slot;                               \
    hit += slot;                                \
    WORK_AREA(TAIL_WORK)

// The tail in one group, into the sample's activations and deltas, its loss and hit at slot.
// Then gradients_sgd (or gradients) as after step_samples. NDRange (SG), work-group SG.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void tail_step(
    __global const uchar* labels, __global const int* rows, int first, float scale, __global float* acts,
    __global float* deltas, __global float* loss, __global int* hit, int slot, __global const float* params WORK_ARG) {
    TAIL_PROLOGUE;
    TAIL_STEP(acts, 0)  // act is acts
}

// The tail's forward alone, for a step whose phases the engine times apart (a probe): then
// backward_samples computes the deltas, as tail_step would. tail_step's arguments.
// NDRange (SG), work-group SG.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void tail_forward(
    __global const uchar* labels, __global const int* rows, int first, float scale, __global float* acts,
    __global float* deltas, __global float* loss, __global int* hit, int slot, __global const float* params WORK_ARG) {
    TAIL_PROLOGUE;
    TAIL_FORWARD(acts, 0)  // act is acts
}

// Parameter p's gradient in a batch-1 step, from the sample's input (first_in) and the group's
// activations and deltas (act, delta), as gradients_one computes it.
inline float step_gradient(int p, __global const float* first_in, __global const float* act,
                           __global const float* delta) {
    float g = 0.0f;
    NETWORK_STEP_GRADIENTS
    return g;
}

// The gradients and the update of the first layer's rows [row0, row0 + rows) (their weights and biases).
inline void first_rows_sgd(int row0, int rows, __global const float* first_in, __global const float* act,
                           __global const float* delta, __global float* grads, __global float* values,
                           __global float* velocity, float lr, float momentum, float weight_decay) {
    for (int e = (int)get_local_id(0); e < rows * (FIRST_IN + 1); e += SG) {
        const int r = row0 + e / (FIRST_IN + 1), i = e % (FIRST_IN + 1);
        const int p = i < FIRST_IN ? FIRST_W + r * FIRST_IN + i : FIRST_B + r;
        const float g = step_gradient(p, first_in, act, delta);
        grads[p] = g;
        sgd_step(values, velocity, p, g, lr, momentum, weight_decay);
    }
}

// The first layer's rows spread over every group of step_update and step_run: as many a group.
#define OWN_FIRST_ROWS                                                                         \
    const int rows_per_group = (FIRST_OUT + (int)get_num_groups(0) - 1) / (int)get_num_groups(0); \
    const int row0 = (int)get_group_id(0) * rows_per_group;                                     \
    const int own_rows_here = clamp(FIRST_OUT - row0, 0, rows_per_group)

// A probe's gradients (gradients_one's, bit for bit), computed as step_update computes them, without
// the update: the first layer's by rows spread over the groups, the tail's every
// get_global_size(0)-th, from the sample's activations and deltas (after backward_samples). So the
// probe's backward costs what the fused step's does (gradients_one, an item per parameter, ran 22x
// slower than this under PoCL's default work-group method on an AVX-512 CPU, and skewed the split
// of the fused steps' time). NDRange (step_update's groups * SG), work-group SG.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void step_gradients(
    __global const float* acts, __global const float* deltas, __global float* grads) {
    OWN_FIRST_ROWS;
    for (int e = (int)get_local_id(0); e < own_rows_here * (FIRST_IN + 1); e += SG) {
        const int r = row0 + e / (FIRST_IN + 1), i = e % (FIRST_IN + 1);
        const int p = i < FIRST_IN ? FIRST_W + r * FIRST_IN + i : FIRST_B + r;
        grads[p] = step_gradient(p, acts, acts, deltas);
    }
    for (int p = TAIL_BEGIN + (int)get_global_id(0); p < PARAM_FLOATS; p += (int)get_global_size(0))
        grads[p] = step_gradient(p, acts, acts, deltas);
}

// tail_step and gradients_sgd in one launch, and the next training sample's first_forward when
// there is one. The step's input and first-layer outputs are in slot `cur` of three: 0 (acts, and
// `snapshot`: what first_forward wrote), 1 and 2 (acts_a/snap_a, acts_b/snap_b); snap_*: the tail's
// parameters as the step's forward saw them, since this launch updates them. Every group computes
// the tail into its own rows of `own_rows` ([groups][2 * ACT_FLOATS + 2]: activations, deltas,
// loss and hit), group 0 into the sample's (acts, deltas, slot), so that every group has every
// delta. Then the gradients and the update of each parameter: the first layer's by rows, spread
// over the groups (a group's own, which it reads below); the tail's every get_global_size(0)-th
// from the item's global id, copied to slot nxt's snapshot too. Then each group computes its
// first-layer rows (from its own updated weights) for the training sample rows[next] into slot
// nxt, as first_forward would after this launch (nxt -1: no next sample; the same into the slot
// that is not cur, unused). NDRange (groups * SG), groups >= first_forward's; work-group SG.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void step_update(
    __global const uchar* labels, __global const int* rows, int first, float scale, __global float* acts,
    __global float* deltas, __global float* loss, __global int* hit, int slot, __global float* snapshot,
    __global float* own_rows, __global float* grads, __global float* values, __global float* velocity, float lr,
    float momentum, float weight_decay, __global const float* inputs, int next, __global float* acts_a,
    __global float* snap_a, __global float* acts_b, __global float* snap_b, int cur, int nxt WORK_ARG) {
    const int group = (int)get_group_id(0), label = labels[rows[first]], lid = (int)get_local_id(0);
    __global float* const sample_acts = acts;
    acts = cur == 0 ? acts : cur == 1 ? acts_a : acts_b;  // the step's input and first-layer outputs
    __global const float* first_in = acts;
    __global const float* params = cur == 0 ? snapshot : cur == 1 ? snap_a : snap_b;
    const int into = nxt > 0 ? nxt : cur == 1 ? 2 : 1;
    __global float* next_acts = into == 1 ? acts_a : acts_b;
    __global float* next_snap = into == 1 ? snap_a : snap_b;
    __global float* own = own_rows + (size_t)group * (2 * ACT_FLOATS + 2);
    __global float* act = group ? own : sample_acts;
    __global float* delta = group ? own + ACT_FLOATS : deltas;
    if (group) {
        loss = own + 2 * ACT_FLOATS;
        hit = (__global int*)(own + 2 * ACT_FLOATS + 1);
    } else {
        loss += slot;
        hit += slot;
        if (cur != 0)  // the sample's input where the slot holds it
            for (int e = lid; e < INPUT_FLOATS; e += SG) sample_acts[e] = acts[e];
    }
    WORK_AREA(TAIL_WORK > SG ? TAIL_WORK : SG);  // fc_rows_forward's SG lane sums too
    TAIL_STEP(acts, act != acts)
    OWN_FIRST_ROWS;  // at most first_forward's SG / LANES a group
    first_rows_sgd(row0, own_rows_here, first_in, act, delta, grads, values, velocity, lr, momentum, weight_decay);
    for (int p = TAIL_BEGIN + (int)get_global_id(0); p < PARAM_FLOATS; p += (int)get_global_size(0)) {
        const float g = step_gradient(p, first_in, act, delta);
        grads[p] = g;
        sgd_step(values, velocity, p, g, lr, momentum, weight_decay);
        next_snap[p] = values[p];
    }
    // (Without a next sample too, into the slot that is not this step's: no return before a barrier.)
    SYNC();  // this group's rows updated
    __global const float* next_input = inputs + (size_t)rows[next] * INPUT_FLOATS;
    for (int e = (int)get_global_id(0); e < INPUT_FLOATS; e += (int)get_global_size(0)) next_acts[e] = next_input[e];
    first_rows_forward(next_input, values, work, next_acts, row0, own_rows_here);
}

// A grid-wide barrier: returns once every group of the launch has called it (so they must all be
// running at once), false in every item of each group once any group's wait gave up. sync[0]
// counts arrivals, its top bit flipping once a round (CUDA's cooperative groups' scheme): group 0
// adds 0x80000000 - (groups - 1), every other group 1, so a round adds 0x80000000 and the low bits
// come back to where they were, whatever the group count. A group waits at most spin_limit reads
// of it, then sets sync[1], which the others see within 1024 reads. The fences order this group's
// writes before its arrival and the others' writes before what it reads after: reads of data other
// groups wrote must still bypass this group's cache (volatile), as TAIL_FORWARD's do. stop: one
// int of the work area, to give every item the leader's answer.
inline bool grid_sync(volatile __global uint* sync, uint spin_limit, SCRATCH int* stop) {
    SYNC();  // the group's writes of this step are done
    // One group waits for no other: the group's barrier is the grid's. (Needed besides: without
    // this return, Debian 12's PoCL 3.1 miscompiles step_run on an AVX-512 CPU with its default
    // work-group method, loopvec, in one group and in two: tests/test_kernel_lab.cpp reproduces it.)
    if (get_num_groups(0) == 1) return true;
    if (get_local_id(0) == 0) {
        const uint groups = (uint)get_num_groups(0);
        mem_fence(CLK_GLOBAL_MEM_FENCE);
        const uint old = atomic_add(&sync[0], get_group_id(0) == 0 ? 0x80000000u - (groups - 1) : 1u);
        for (uint spins = 1; ((old ^ sync[0]) & 0x80000000u) == 0; ++spins) {
            if (spins == spin_limit) atomic_xchg(&sync[1], 1u);
            if (spins % 1024 == 0 && sync[1]) break;
        }
        mem_fence(CLK_GLOBAL_MEM_FENCE);
        *stop = sync[1] != 0;
    }
    SYNC();
    return !*stop;
}

// grid_sync tried before the engine relies on it: `rounds` grid barriers in a row, in as many
// groups as step_run is to use. OpenCL promises no forward progress across work-groups, so where
// a wait gives up (sync[1] set) the groups did not all run at once, and the engine runs step_run in
// one group instead, where grid_sync waits for no other group. NDRange (groups * SG), work-group SG.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void grid_probe(volatile __global uint* sync, uint spin_limit,
                                                                        int rounds WORK_ARG) {
    WORK_AREA(1);
    SCRATCH int* stop = (SCRATCH int*)work;
    for (int r = 0; r < rounds; ++r)
        if (!grid_sync(sync, spin_limit, stop)) return;
}

// `steps` consecutive batch-1 training steps in one launch, of the training samples
// rows[first .. first + steps): step_update's work for each, with a grid-wide barrier (grid_sync)
// between one step and the next instead of a launch, so every group must be running at once (the
// engine launches at most one per compute unit, and more than one only where grid_probe showed
// that they meet at the barrier: a GPU's compute units; on a CPU through PoCL, one group). Step k's
// first-layer outputs are in slot cur_k
// (cur_0 = cur: 0 acts, 1 acts_a, 2 acts_b; then 1 after 0 or 2, 2 after 1), each group's rows
// written by that group at the end of step k - 1 and read by every group after the barrier. The
// tail's parameters and momentum live in each group's own copy for the launch (tails: TAIL_BEGIN
// unused floats, then [groups][2][TAIL_FLOATS]): every group computes the same tail and the same
// update of it, so none reads another's, and no snapshot is needed; group 0 writes them back after
// the last barrier, when no group reads the originals any more. The first layer's rows are
// spread over the groups as in step_update. Step k's loss and hit go to slot + k (group 0's; the
// others' to their rows of own_rows, as in step_update); acts and deltas end with the last step's
// tail. With `prepare`, the last step also computes the first layer of the training sample
// rows[first + steps] (and copies its input) into the slot after its own, as step_update does.
// sync: grid_sync's counter and error flag, spin_limit its bound.
// NDRange (groups * SG), work-group SG.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void step_run(
    __global const uchar* labels, __global const int* rows, int first, int steps, int prepare, float scale,
    __global float* acts, __global float* deltas, __global float* losses, __global int* hits, int slot,
    __global float* own_rows, __global float* tails, __global float* grads, __global float* values,
    __global float* velocity, float lr, float momentum, float weight_decay, __global const float* inputs,
    __global float* acts_a, __global float* acts_b, int cur, volatile __global uint* sync, uint spin_limit WORK_ARG) {
    const int group = (int)get_group_id(0), lid = (int)get_local_id(0);
    __global float* own = own_rows + (size_t)group * (2 * ACT_FLOATS + 2);
    __global float* act = group ? own : acts;
    __global float* delta = group ? own + ACT_FLOATS : deltas;
    // This group's tail parameters (params[p] for p >= TAIL_BEGIN, as the tail's calls read them) and momentum.
    __global float* params = tails + (size_t)group * 2 * TAIL_FLOATS;
    __global float* tail_velocity = params + TAIL_FLOATS;
    for (int p = TAIL_BEGIN + lid; p < PARAM_FLOATS; p += SG) {
        params[p] = values[p];
        tail_velocity[p] = velocity[p];
    }
    WORK_AREA((TAIL_WORK > SG ? TAIL_WORK : SG) + 1);  // and grid_sync's int after the rest
    SCRATCH int* stop = (SCRATCH int*)(work + (TAIL_WORK > SG ? TAIL_WORK : SG));
    OWN_FIRST_ROWS;
    SYNC();  // the tail's copy made
    for (int k = 0; k < steps; ++k) {
        const int row = rows[first + k], label = labels[row], next = cur == 1 ? 2 : 1;
        __global const float* first_in = inputs + (size_t)row * INPUT_FLOATS;
        __global float* loss = group ? own + 2 * ACT_FLOATS : losses + slot + k;
        __global int* hit = group ? (__global int*)(own + 2 * ACT_FLOATS + 1) : hits + slot + k;
        TAIL_STEP(cur == 0 ? acts : cur == 1 ? acts_a : acts_b, 1)
        SYNC();  // every item has read the tail's parameters
        first_rows_sgd(row0, own_rows_here, first_in, act, delta, grads, values, velocity, lr, momentum,
                       weight_decay);
        for (int p = TAIL_BEGIN + lid; p < PARAM_FLOATS; p += SG) {
            const float g = step_gradient(p, first_in, act, delta);
            if (group == 0) grads[p] = g;
            sgd_step(params, tail_velocity, p, g, lr, momentum, weight_decay);
        }
        SYNC();  // this group's rows updated
        if (k + 1 < steps || prepare) {
            __global const float* next_input = inputs + (size_t)rows[first + k + 1] * INPUT_FLOATS;
            __global float* next_acts = next == 1 ? acts_a : acts_b;
            if (k + 1 == steps)
                for (int e = (int)get_global_id(0); e < INPUT_FLOATS; e += (int)get_global_size(0))
                    next_acts[e] = next_input[e];
            first_rows_forward(next_input, values, work, next_acts, row0, own_rows_here);
        }
        if (!grid_sync(sync, spin_limit, stop)) return;
        cur = next;
    }
    if (group == 0)
        for (int p = TAIL_BEGIN + lid; p < PARAM_FLOATS; p += SG) {
            values[p] = params[p];
            velocity[p] = tail_velocity[p];
        }
}
#endif
