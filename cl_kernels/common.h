// Shared by every kernel file; cmake/embed_kernels.cmake puts it first in the embedded
// source, and the host (host/opencl/opencl_program.cpp) puts the network's description before it:
//   SG              items of a sample's work-group (every per-sample kernel runs one group per sample)
//   LANES           items that share one output row of a fully connected layer (forward)
//   MAX_K           the largest convolution window edge
//   INPUT_FLOATS, INPUT_W, INPUT_XW   a sample's input: its floats, its row's width, and its rows'
//                   distance in the work area (odd before a first convolution, see pair_forward)
//   ACT_FLOATS      floats of one sample's activations: its input, then every layer's output
//   RUN_FLOATS      floats of the convolution pairs' parameters (a span of the device layout)
//   PARAM_FLOATS    floats of the device layout (every parameter, with padding)
//   FORWARD_WORK, BACKWARD_WORK   floats of a group's work area in each kernel
//   GRAD_PARAMS, GRAD_LANES   the gradients kernel's work-group: parameters times lanes (step.cl)
//   FLAT_FLOATS, FLAT_GROUPS, GRAD_GROUPS   the gradients kernel's flat parameters (all but the
//                   fully connected weights), their work-groups, and all its work-groups
//   NETWORK_FORWARD, NETWORK_BACKWARD, NETWORK_GRADIENTS, NETWORK_FLAT_PARAM, NETWORK_FC_TILES
//                   the layers, as calls and expressions (step.cl)
// and the variant:
//   -DMEM_CONSTANT  the convolution pairs' parameters are read through __constant memory (gpu-constant)
//   -DMEM_LOCAL     a group's work area and those parameters are in __local memory (gpu-local)
// Neither: every kernel reads and writes __global memory only (gpu).
//
// Tensors are row-major: a sample's [channels][height][width], a batch's [samples][...].
// "delta" is dLoss/d(pre-activation) of a layer's output; the function that produces it applies
// the activation's derivative. Every work-item owns the addresses it writes: no atomics, and
// every sum runs in a fixed order, so a run is deterministic on a given device.

#if defined(MEM_CONSTANT) && defined(MEM_LOCAL)
#error "MEM_CONSTANT and MEM_LOCAL are exclusive"
#endif

// The address space of the convolution pairs' parameters as the kernels receive them.
#ifdef MEM_CONSTANT
#define WEIGHTS __constant
#else
#define WEIGHTS __global
#endif

// A group's work area (the sample's working copies, partial sums) and the pairs' parameters as
// the layer functions read them: gpu-local copies both to __local memory; the other variants use
// a __global slice of the work buffer per group and read the parameters where they are.
#ifdef MEM_LOCAL
#define SCRATCH __local
#define PAIR_PARAMS __local
#else
#define SCRATCH __global
#define PAIR_PARAMS WEIGHTS
#endif

// Every item of the group waits here until the group's writes (__local and __global) are visible.
#define SYNC() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)

// v += TERM(k) for k = start, start + step, ... < end, four terms per round into separate sums
// (added in a fixed order at the end): the loops are latency-bound, and this keeps four loads
// in flight where a plain loop waits for each in turn.
#define SUM_STRIDED(v, start, step, end, TERM)                 \
    do {                                                       \
        float a0_ = 0.0f, a1_ = 0.0f, a2_ = 0.0f, a3_ = 0.0f;  \
        int k_ = (start);                                      \
        for (; k_ + 3 * (step) < (end); k_ += 4 * (step)) {    \
            a0_ += TERM(k_);                                   \
            a1_ += TERM(k_ + (step));                          \
            a2_ += TERM(k_ + 2 * (step));                      \
            a3_ += TERM(k_ + 3 * (step));                      \
        }                                                      \
        for (; k_ < (end); k_ += (step)) a0_ += TERM(k_);      \
        (v) += (a0_ + a1_) + (a2_ + a3_);                      \
    } while (0)

#define ACT_NONE 0
#define ACT_TANH 1
#define ACT_SIGMOID 2
#define ACT_RELU 3

// act is a literal at every call, so each call compiles to its one case.
inline float activate(int act, float x) {
    return act == ACT_TANH      ? tanh(x)
           : act == ACT_SIGMOID ? 1.0f / (1.0f + exp(-x))
           : act == ACT_RELU    ? (x > 0.0f ? x : 0.0f)
                                : x;
}

// The activation's derivative, from its output y.
inline float activation_grad(int act, float y) {
    return act == ACT_TANH      ? 1.0f - y * y
           : act == ACT_SIGMOID ? y * (1.0f - y)
           : act == ACT_RELU    ? (y > 0.0f ? 1.0f : 0.0f)
                                : 1.0f;
}

// The softmax cross-entropy's target of output k for a sample of `label` among n outputs: the
// one-hot label, or with -DLABEL_SMOOTHING=e (the host's TrainingRule::label_smoothing, a float
// literal) (1 - e) on the label plus e/n on every output, as preprocess.h computes it.
inline float softmax_target(int k, int label, int n) {
#ifdef LABEL_SMOOTHING
    const float off = LABEL_SMOOTHING / (float)n;
    return k == label ? (1.0f - LABEL_SMOOTHING) + off : off;
#else
    return k == label ? 1.0f : 0.0f;
#endif
}

// Copies n floats from __global memory to the work area (or to __local parameters), spread over
// the group's items. The caller synchronises before reading them.
inline void copy_to_work(SCRATCH float* dst, __global const float* src, int n) {
    for (int i = (int)get_local_id(0); i < n; i += SG) dst[i] = src[i];
}

// Adds v over the `lanes` items that share each of `taps` sums: item lid = lane * taps + tap.
// The lane-0 item adds the others' values in lane order (two barriers, where a tree took one per
// level: 2% of a LeNet-5 step on an H200), so the order never changes;
// the result is valid in items lid < taps. Every item of the group must call it (red: SG floats
// of the work area).
inline float tap_sum(SCRATCH float* red, float v, int taps, int lanes) {
    const int lid = (int)get_local_id(0);
    red[lid] = v;
    SYNC();
    float sum = 0.0f;
    if (lid < taps) {
        sum = red[lid];
        for (int l = 1; l < lanes; ++l) sum += red[l * taps + lid];
    }
    SYNC();  // red is written again by the next call
    return sum;
}
