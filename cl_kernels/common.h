// Shared by every kernel file; cmake/embed_kernels.cmake puts it first in the
// embedded source. The host (host/opencl_engine.cpp) picks the variant with:
//   -DWG=n          work-group size of the 1-D kernels and of the reductions (a power of two)
//   -DTILE=t        tile edge of the matrix kernels of gpu-local (TILE*TILE <= the device's limit)
//   -DMEM_CONSTANT  weights are read through __constant memory (gpu-constant)
//   -DMEM_LOCAL     input tiles and weights are staged in __local memory (gpu-local)
// Neither MEM_ option: every kernel reads and writes __global memory only (gpu).
//
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

// Where the work-group reductions keep their partial sums: __local for gpu-local, else a
// __global buffer with one WG-sized slice per work-group (synchronised by global-memory barriers).
#ifdef MEM_LOCAL
#define SCRATCH __local
#define SCRATCH_FENCE CLK_LOCAL_MEM_FENCE
#define GROUP_SCRATCH(scratch) (scratch)
#else
#define SCRATCH __global
#define SCRATCH_FENCE CLK_GLOBAL_MEM_FENCE
#define GROUP_SCRATCH(scratch) ((scratch) + get_group_id(0) * WG)
#endif

#define ACT_NONE 0
#define ACT_TANH 1

inline float activate(int act, float x) { return act == ACT_TANH ? tanh(x) : x; }

// The activation's derivative, from its output y.
inline float activation_grad(int act, float y) { return act == ACT_TANH ? 1.0f - y * y : 1.0f; }

// Sample s of a batch reads input row rows[first + s]: the first layer gathers from the whole
// data set through the epoch's order; later layers pass the identity (rows = 0, 1, 2, ...).
#define INPUT_ROW(in, rows, first, s, size) ((in) + (size_t)(rows)[(first) + (s)] * (size_t)(size))

// The sum of v over the WG items of a 1-D work-group, as a fixed tree. Every item must call it;
// the result is valid in item 0.
inline float group_sum(SCRATCH float* scratch, float v) {
    const int lid = (int)get_local_id(0);
    scratch[lid] = v;
    for (int stride = WG / 2; stride > 0; stride >>= 1) {
        barrier(SCRATCH_FENCE);
        if (lid < stride) scratch[lid] += scratch[lid + stride];
    }
    return scratch[0];
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
