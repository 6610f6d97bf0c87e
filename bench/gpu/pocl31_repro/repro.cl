// Smaller kernels of step_run's shape, for PoCL 3.1 on an AVX-512 CPU (issue 47), each bare
// (grid_sync's shape) and guarded (with its one-group return); bench/gpu/pocl31_repro/repro.cpp runs
// them. On the H200 machine's Xeon every one came out right: step_run itself is the reproducer.
// Candidates: a loop of steps with barriers, lid 0 writes a flag between two barriers at the end
// of each step, every item reads it after the second (as step.cl's grid_sync).
#define SG 256
#define SYNC() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)

inline bool flag_sync(volatile __global uint* flags, __local int* stop) {
    SYNC();
    if (get_local_id(0) == 0) *stop = flags[1] != 0;
    SYNC();
    return !*stop;
}
inline bool flag_sync_guarded(volatile __global uint* flags, __local int* stop) {
    SYNC();
    if (get_num_groups(0) == 1) return true;
    if (get_local_id(0) == 0) *stop = flags[1] != 0;
    SYNC();
    return !*stop;
}

// c1: per-item sums over steps, a neighbour read through local memory
#define C1(name, SYNCF)                                                                              \
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void name(__global const float* in, int steps, \
        __global float* out, volatile __global uint* flags) {                                       \
    __local float work[SG + 1];                                                                     \
    __local int* stop = (__local int*)(work + SG);                                                 \
    const int lid = get_local_id(0);                                                                \
    float acc = 0.0f;                                                                               \
    for (int k = 0; k < steps; ++k) {                                                               \
        work[lid] = in[k * SG + lid];                                                               \
        SYNC();                                                                                     \
        acc += work[(lid + 1) % SG] * (float)(k + 1);                                               \
        if (!SYNCF(flags, stop)) return;                                                            \
    }                                                                                               \
    out[get_global_id(0)] = acc;                                                                    \
}
C1(c1_bare, flag_sync)
C1(c1_guarded, flag_sync_guarded)

// c2: as step_run: rows of a matrix-vector product in a loop with a barrier, an in-loop per-item
// loop the compiler vectorises, a uniform variable carried from step to step (cur)
#define C2(name, SYNCF)                                                                              \
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void name(__global const float* in, int steps, \
        __global float* out, volatile __global uint* flags, int cur, int rows) {                   \
    __local float work[SG + 1];                                                                     \
    __local int* stop = (__local int*)(work + SG);                                                 \
    const int lid = get_local_id(0), lane = lid % 8;                                                \
    for (int k = 0; k < steps; ++k) {                                                               \
        const int next = cur == 1 ? 2 : 1;                                                          \
        __global const float* x = in + cur * 1024;                                                  \
        for (int r = 0; r < rows; r += SG / 8) {                                                    \
            const int o = r + lid / 8;                                                              \
            float s = 0.0f;                                                                         \
            for (int i = lane * 4; i < 784; i += 32)                                               \
                s += x[i] * x[i + 1] + x[i + 2] * x[i + 3] + (float)o;                              \
            work[lid] = s;                                                                          \
            SYNC();                                                                                 \
            if (lid < SG / 8 && r + lid < rows) {                                                   \
                float sum = 0.0f;                                                                   \
                for (int l = 0; l < 8; ++l) sum += work[lid * 8 + l];                               \
                out[k * 256 + r + lid] = sum;                                                       \
            }                                                                                       \
            SYNC();                                                                                 \
        }                                                                                           \
        if (!SYNCF(flags, stop)) return;                                                            \
        cur = next;                                                                                 \
    }                                                                                               \
}
C2(c2_bare, flag_sync)
C2(c2_guarded, flag_sync_guarded)

// c3: c2 with the rows of the next step guarded as step_run's (k + 1 < steps || prepare) and the
// step's work before them in regions of their own
#define C3(name, SYNCF)                                                                              \
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) void name(__global const float* in, int steps, \
        __global float* out, volatile __global uint* flags, int cur, int rows, int prepare) {      \
    __local float work[SG + 1];                                                                     \
    __local int* stop = (__local int*)(work + SG);                                                 \
    const int lid = get_local_id(0), lane = lid % 8;                                                \
    for (int k = 0; k < steps; ++k) {                                                               \
        const int next = cur == 1 ? 2 : 1;                                                          \
        work[lid] = in[cur * 1024 + lid];                                                           \
        SYNC();                                                                                     \
        const float t = work[(lid + 3) % SG];                                                       \
        SYNC();                                                                                     \
        if (k + 1 < steps || prepare) {                                                             \
            __global const float* x = in + next * 1024;                                             \
            for (int r = 0; r < rows; r += SG / 8) {                                                \
                const int o = r + lid / 8;                                                          \
                float s = 0.0f;                                                                     \
                for (int i = lane * 4; i < 784; i += 32)                                           \
                    s += x[i] * x[i + 1] + x[i + 2] * x[i + 3] + (float)o;                          \
                work[lid] = s;                                                                      \
                SYNC();                                                                             \
                if (lid < SG / 8 && r + lid < rows) {                                               \
                    float sum = t * 0.0f;                                                           \
                    for (int l = 0; l < 8; ++l) sum += work[lid * 8 + l];                           \
                    out[k * 256 + r + lid] = sum;                                                   \
                }                                                                                   \
                SYNC();                                                                             \
            }                                                                                       \
        }                                                                                           \
        if (!SYNCF(flags, stop)) return;                                                            \
        cur = next;                                                                                 \
    }                                                                                               \
}
C3(c3_bare, flag_sync)
C3(c3_guarded, flag_sync_guarded)
