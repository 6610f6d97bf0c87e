// Shared by every kernel file; cmake/embed_kernels.cmake puts it first in the
// embedded source. The host (host/opencl_engine.cpp) picks the variant with:
//   -DREDUCE=r      work-group size of the weight-gradient reductions
//   -DTILE=t        tile edge of the matrix kernels of gpu-local (TILE*TILE <= the device's limit)
//   -DCONV_K=k      every convolution (as run by the conv kernels) has k x k windows: their loops
//                   over the window unroll at compile time; without it K comes from the argument
//   -DMEM_CONSTANT  weights are read through __constant memory (gpu-constant)
//   -DMEM_LOCAL     input tiles and weights are staged in __local memory (gpu-local)
// Neither MEM_ option: every kernel reads and writes __global memory only (gpu).
//
// WG in the NDRange comments is the host's work-group size for element-wise kernels.
// Tensors are [samples][channels][height][width], row-major. "delta" is dLoss/d(pre-activation)
// of a layer's output; the kernel that produces it applies the activation's derivative.
// Every work-item owns the addresses it writes: no atomics, and sums run in a fixed order,
// so a run is deterministic on a given device.

#if defined(MEM_CONSTANT) && defined(MEM_LOCAL)
#error "MEM_CONSTANT and MEM_LOCAL are exclusive"
#endif

// The address space of weight and bias arguments.
#ifdef MEM_CONSTANT
#define WEIGHTS __constant
#else
#define WEIGHTS __global
#endif

// Where a work-group keeps what its items share (partial sums, staged values): __local for
// gpu-local, else a __global buffer with one slice of `floats` per work-group (synchronised by
// global-memory barriers).
#ifdef MEM_LOCAL
#define SCRATCH __local
#define SCRATCH_FENCE CLK_LOCAL_MEM_FENCE
#define GROUP_SCRATCH(scratch, floats) (scratch)
#else
#define SCRATCH __global
#define SCRATCH_FENCE CLK_GLOBAL_MEM_FENCE
#define GROUP_SCRATCH(scratch, floats) ((scratch) + (size_t)get_group_id(0) * (floats))
#endif

// The window edge inside the conv kernels: CONV_K when the host fixed it, else their argument.
#ifdef CONV_K
#define CONV_WINDOW(k_arg) CONV_K
#else
#define CONV_WINDOW(k_arg) (k_arg)
#endif

// gpu-local's matrix kernels sum DEPTH terms per round of __local tiles: each item loads
// DEPTH/TILE values per round, so the loads overlap instead of waiting one by one.
#define DEPTH (4 * TILE)

// v += TERM(k) for k = start, start + step, ... < end, four terms per round into separate sums
// (added in a fixed order at the end): the kernels are latency-bound, and this keeps four loads
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

inline float activate(int act, float x) { return act == ACT_TANH ? tanh(x) : x; }

// The activation's derivative, from its output y.
inline float activation_grad(int act, float y) { return act == ACT_TANH ? 1.0f - y * y : 1.0f; }

// The weight-gradient reductions give each item a tap (a parameter) and a lane: item
// lid = lane * taps + tap. tap_sum adds v over the lanes of each tap, as a fixed tree; the result
// is valid in items lid < taps. Every item of the group must call it (scratch: REDUCE floats).
inline float tap_sum(SCRATCH float* scratch, float v, int taps, int lanes) {
    const int lid = (int)get_local_id(0), lane = lid / taps;
    scratch[lid] = v;
    int width = 1;
    while (width < lanes) width <<= 1;
    for (int stride = width / 2; stride > 0; stride >>= 1) {
        barrier(SCRATCH_FENCE);
        if (lane < stride && lane + stride < lanes) scratch[lid] += scratch[lid + stride * taps];
    }
    return scratch[lid];
}

#ifdef MEM_LOCAL
// The extra kernel argument of the kernels that stage data in __local memory (sized by the host).
#define LOCAL_TILE_ARG , __local float* tile

// Copies n floats into __local memory, spread over the items of dimension 0 of the group.
inline void copy_to_local(__local float* dst, __global const float* src, int n) {
    for (int i = (int)get_local_id(0); i < n; i += (int)get_local_size(0)) dst[i] = src[i];
}
#else
#define LOCAL_TILE_ARG
#endif
