// Shared by every kernel file; cmake/embed_kernels.cmake puts it first in the
// embedded source. The host (host/opencl_engine.cpp) picks the variant with:
//   -DCONV_K=k, -DPOOL_K=k  every convolution (other than fully connected ones) has k x k windows,
//                     every subsampling k x k: the loops over a window unroll at compile time;
//                     without them the window comes from the layer table
//   -DMEM_CONSTANT  parameters are read through __constant memory, as far as they fit (gpu-constant)
//   -DMEM_LOCAL     a sample's activations and deltas are held in __local memory (gpu-local)
// Neither MEM_ option: every kernel reads and writes __global memory only (gpu).
//
// A training step is four launches (forward.cl, backward.cl, update.cl): one work-group per
// sample runs the whole forward pass, another the whole backward pass, writing the sample's
// weight gradients; one launch sums them over the batch, one applies the update. The three
// variants run the same code; the options only move the per-sample arena and the weights.
//
// Tensors are [samples][channels][height][width], row-major. "delta" is dLoss/d(pre-activation)
// of a layer's output; the code that produces it applies the activation's derivative.
// Every work-item owns the addresses it writes: no atomics, and sums run in a fixed order,
// so a run is deterministic on a given device.

#if defined(MEM_CONSTANT) && defined(MEM_LOCAL)
#error "MEM_CONSTANT and MEM_LOCAL are exclusive"
#endif

// The arena: one sample's network input and every layer's output (forward), then its deltas
// (backward), at the offsets of the layer table. gpu-local: __local (an argument sized by the
// host); otherwise a __global slice [A] per sample.
#ifdef MEM_LOCAL
#define ARENA __local
#define ARENA_FENCE CLK_LOCAL_MEM_FENCE
#else
#define ARENA __global
#define ARENA_FENCE CLK_GLOBAL_MEM_FENCE
#endif

// The parameters (the flat device layout of host/opencl_layout.h). gpu-constant: the first
// const_n floats (whole layers, as many as CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE allows) through
// __constant, the rest through __global. The branch is uniform over a layer.
#ifdef MEM_CONSTANT
#define PARAMS_ARG __global const float *params, __constant const float *cparams, int const_n
#define PARAMS params, cparams, const_n
#define PARAM(i) ((i) < const_n ? cparams[i] : params[i])
#else
#define PARAMS_ARG __global const float* params
#define PARAMS params
#define PARAM(i) params[i]
#endif

// The layer table: LAYER_FIELDS ints per layer, filled by the host (opencl_engine.cpp's
// LayerField, in this order). Offsets into the parameters are in floats of the device layout;
// CONN_* and IN_* are offsets into the int pool of the connection lists.
#define LAYER_FIELDS 20
#define L_KIND 0       // KIND_*
#define L_ACT 1        // ACT_* of this layer's output
#define L_PREV_ACT 2   // ACT_* of its input (the previous layer's output; none for the network input)
#define L_IC 3
#define L_IH 4
#define L_IW 5
#define L_OC 6
#define L_OH 7
#define L_OW 8
#define L_K 9          // conv: KxK window; subsample: KxK pooling window
#define L_W_AT 10      // weights in the parameters
#define L_B_AT 11      // biases in the parameters
#define L_IN_AT 12     // its input in the arena
#define L_OUT_AT 13    // its output in the arena
#define L_CONN_BEGIN 14  // conv: network.h's conn_begin [OC+1]
#define L_CONN_IN 15     // conv: conn_in [nconn]
#define L_CONN_OUT 16    // conv: conn_out [nconn]
#define L_IN_BEGIN 17    // conv: the connections reading input map i: IN_CONN[IN_BEGIN[i] .. IN_BEGIN[i+1])
#define L_IN_CONN 18     // conv: [nconn]
#define L_NCONN 19

// A layer's window edge (L_K): CONV_K or POOL_K where the host fixed it.
#ifdef CONV_K
#define CONV_WINDOW(L) CONV_K
#else
#define CONV_WINDOW(L) (L)[L_K]
#endif
#ifdef POOL_K
#define POOL_WINDOW(L) POOL_K
#else
#define POOL_WINDOW(L) (L)[L_K]
#endif

#define KIND_CONV 0
#define KIND_SUBSAMPLE 1
#define KIND_FC 2  // fully connected, or a conv whose window covers all of every input map

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

inline float activate(int act, float x) { return act == ACT_TANH ? tanh(x) : x; }

// The activation's derivative, from its output y.
inline float activation_grad(int act, float y) { return act == ACT_TANH ? 1.0f - y * y : 1.0f; }

// The per-sample kernels run exactly SAMPLE_GROUP items per work-group.
#define PER_SAMPLE __kernel __attribute__((reqd_work_group_size(SAMPLE_GROUP, 1, 1)))

// The items of the work-group share a loop over e = 0 .. n-1.
#define FOR_GROUP(e, n) for (int e = (int)get_local_id(0); e < (n); e += (int)get_local_size(0))
