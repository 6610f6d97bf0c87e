// The batch-level path (host/opencl_batch_engine.cpp): one launch per layer and pass over the
// whole batch. This file shares the embedded source with the per-sample kernels, so it compiles
// only when the batch engine asks for it (-DLENET5_BATCH). Its options:
//   -DMEM_CONSTANT  small weights (convolutions, subsamplings, fully connected layers that fit)
//                   are read through __constant memory (gpu-constant)
//   -DMEM_LOCAL     the GEMM's tiles and each convolution output map's weights are staged in
//                   __local memory (gpu-local)
//   neither: __global memory only (gpu)
//   GEMM_TM, GEMM_TN, GEMM_TK   the GEMM's tile of C per work-group and its depth per round
//   GEMM_RM, GEMM_RN            the items' register blocks (the group is TN/RN x TM/RM items);
//                               the host builds the file twice, with large and with small tiles
//   CONV_LOCAL_FLOATS           the largest convolution output map's weights (gpu-local)
//
// Tensors are row-major, a batch's [samples][channels][height][width], a layer's output in its
// own buffer. "delta" is dLoss/d(pre-activation); the kernel that writes a layer's delta applies
// its activation's derivative. Every item owns what it writes and every sum runs in a fixed
// order: no atomics, and the same inputs give the same bits.
#ifdef LENET5_BATCH

#define GEMM_TX (GEMM_TN / GEMM_RN)  // items along n
#define GEMM_TY (GEMM_TM / GEMM_RM)  // items along m

#ifdef MEM_CONSTANT
#define SMALL_W __constant
#else
#define SMALL_W __global
#endif

// network.h's Activation, in its order.
#define BA_TANH 0
#define BA_NONE 1
#define BA_SIGMOID 2
#define BA_RELU 3

inline float act_forward(int act, float x) {
    switch (act) {
        case BA_TANH: return tanh(x);
        case BA_SIGMOID: return 1.0f / (1.0f + exp(-x));
        case BA_RELU: return x > 0.0f ? x : 0.0f;
        default: return x;
    }
}

// The delta of a unit whose output is y, from d = dLoss/dy (written like cpu_ops.cpp).
inline float delta_of(int act, float y, float d) {
    switch (act) {
        case BA_TANH: return d * (1.0f - y * y);
        case BA_SIGMOID: return d * (y * (1.0f - y));
        case BA_RELU: return y > 0.0f ? d : 0.0f;
        default: return d;
    }
}

// out[s][e] = inputs[rows[first + s]][e]: the batch's converted inputs, contiguous.
// NDRange (round_up(size, WG), count).
__kernel void gather_inputs(__global const float* inputs, __global const int* rows, int first, int size,
                            __global float* out) {
    const int e = (int)get_global_id(0), s = (int)get_global_id(1);
    if (e >= size) return;
    out[(size_t)s * size + e] = inputs[(size_t)rows[first + s] * size + e];
}

// The loss of each sample's outputs y [count][n] against its label: loss and hit at slot + s,
// and the output layer's delta (scale = 1/count), as preprocess.h computes them.
// squared: 0.5 sum (y - t)^2, else softmax cross-entropy. NDRange (round_up(count, WG)).
__kernel void batch_loss(__global const float* y, __global const uchar* labels, __global const int* rows, int first,
                         int count, int n, int squared, int act, float scale, __global float* delta,
                         __global float* losses, __global int* hits, int slot) {
    const int s = (int)get_global_id(0);
    if (s >= count) return;
    const int label = labels[rows[first + s]];
    __global const float* v = y + (size_t)s * n;
    __global float* d = delta + (size_t)s * n;
    int best = 0;
    for (int k = 1; k < n; ++k)
        if (v[k] > v[best]) best = k;
    float loss = 0.0f;
    if (squared) {
        for (int k = 0; k < n; ++k) {
            const float e = v[k] - (k == label ? 1.0f : 0.0f);
            loss += 0.5f * e * e;
            d[k] = delta_of(act, v[k], scale * e);
        }
    } else {
        const float mx = v[best];
        float sum = 0.0f;
        for (int k = 0; k < n; ++k) sum += exp(v[k] - mx);
        for (int k = 0; k < n; ++k) d[k] = scale * (exp(v[k] - mx) / sum - (k == label ? 1.0f : 0.0f));
        loss = log(sum) - (v[label] - mx);
    }
    losses[slot + s] = loss;
    hits[slot + s] = best == label;
}

// grads[off_w + c] (c < split) or grads[off_b + c - split] = sum over rows r of part[r][c], r in
// order: the batch's per-sample contributions added up. NDRange (round_up(cols, WG)).
__kernel void sum_rows(__global const float* part, int rows, int cols, int split, __global float* grads, int off_w,
                       int off_b) {
    const int c = (int)get_global_id(0);
    if (c >= cols) return;
    float sum = 0.0f;
    for (int r = 0; r < rows; ++r) sum += part[(size_t)r * cols + c];
    grads[c < split ? off_w + c : off_b + c - split] = sum;
}

// SGD with momentum and L2 weight decay over the flat buffer: v = momentum*v + g + weight_decay*p;
// p -= lr*v (the arithmetic of update.cl's sgd_momentum, which needs the per-sample kernels'
// common.h). NDRange (round_up(n, WG)).
__kernel void batch_sgd(__global float* params, __global float* velocity, __global const float* grads, int n, float lr,
                        float momentum, float weight_decay) {
    const int i = (int)get_global_id(0);
    if (i >= n) return;
    const float v = momentum * velocity[i] + (grads[i] + weight_decay * params[i]);
    velocity[i] = v;
    params[i] -= lr * v;
}

// ---- convolution: output map o sums its connections j (conn_begin[o] .. conn_begin[o+1]), each a
// KxK window of input map conn_in[j] with stride S and zero padding P; w[j*K*K ..] its weights.

// NDRange (round_up(OH*OW, WG), count*OC), work-group (WG, 1): one item per output.
__kernel void conv_forward(__global const float* in, __global float* out, SMALL_W const float* w,
                           SMALL_W const float* b, __global const int* conn_begin, __global const int* conn_in, int IC,
                           int IH, int IW, int OC, int OH, int OW, int K, int S, int P, int act) {
    const int p = (int)get_global_id(0), so = (int)get_global_id(1);
    const int s = so / OC, o = so % OC;
    const int j0 = conn_begin[o], j1 = conn_begin[o + 1];
#ifdef MEM_LOCAL
    // The group shares one output map: its weights once into __local memory.
    __local float wl[CONV_LOCAL_FLOATS];
    for (int e = (int)get_local_id(0); e < (j1 - j0) * K * K; e += (int)get_local_size(0)) wl[e] = w[j0 * K * K + e];
    barrier(CLK_LOCAL_MEM_FENCE);
    __local const float* wo = wl;
#else
    SMALL_W const float* wo = w + j0 * K * K;
#endif
    if (p >= OH * OW) return;
    const int y = p / OW, x = p % OW;
    float sum = b[o];
    for (int j = j0; j < j1; ++j) {
        __global const float* src = in + ((size_t)s * IC + conn_in[j]) * IH * IW;
        const int wj = (j - j0) * K * K;
        for (int ky = 0; ky < K; ++ky) {
            const int iy = y * S + ky - P;
            if (iy < 0 || iy >= IH) continue;
            for (int kx = 0; kx < K; ++kx) {
                const int ix = x * S + kx - P;
                if (ix >= 0 && ix < IW) sum += src[iy * IW + ix] * wo[wj + ky * K + kx];
            }
        }
    }
    out[((size_t)s * OC + o) * OH * OW + p] = act_forward(act, sum);
}

// The previous layer's delta: din[s][i][iy][ix] over the connections that read input map i
// (in_conn[in_begin[i] .. in_begin[i+1]], connection ids; conn_out[j] their output maps); in is
// that layer's output, in_act its activation. NDRange (round_up(IH*IW, WG), count*IC).
__kernel void conv_backward_data(__global const float* in, __global const float* d, __global float* din,
                                 SMALL_W const float* w, __global const int* in_begin, __global const int* in_conn,
                                 __global const int* conn_out, int IC, int IH, int IW, int OC, int OH, int OW, int K,
                                 int S, int P, int in_act) {
    const int q = (int)get_global_id(0), si = (int)get_global_id(1);
    if (q >= IH * IW) return;
    const int s = si / IC, i = si % IC, iy = q / IW, ix = q % IW;
    float sum = 0.0f;
    for (int c = in_begin[i]; c < in_begin[i + 1]; ++c) {
        const int j = in_conn[c];
        __global const float* dj = d + ((size_t)s * OC + conn_out[j]) * OH * OW;
        for (int ky = 0; ky < K; ++ky) {
            const int ty = iy + P - ky;  // = y * S
            if (ty < 0 || ty % S || ty / S >= OH) continue;
            for (int kx = 0; kx < K; ++kx) {
                const int tx = ix + P - kx;
                if (tx < 0 || tx % S || tx / S >= OW) continue;
                sum += dj[(ty / S) * OW + tx / S] * w[j * K * K + ky * K + kx];
            }
        }
    }
    const size_t at = (size_t)si * IH * IW + q;
    din[at] = delta_of(in_act, in[at], sum);
}

// A share of the weight and bias gradients: the output rows [c*rows, (c+1)*rows) of sample s
// (share r = s*chunks + c, where chunks = ceil(OH / rows)), part[r][e]: e < weights: weight e
// (connection e / (K*K)), else the bias of map e - weights. Small batches split each sample into
// chunks, so that there are enough items. NDRange (round_up(weights + OC, WG), count*chunks).
__kernel void conv_partials(__global const float* in, __global const float* d, __global float* part,
                            __global const int* conn_out, __global const int* conn_in, int weights, int IC, int IH,
                            int IW, int OC, int OH, int OW, int K, int S, int P, int rows) {
    const int e = (int)get_global_id(0), r = (int)get_global_id(1);
    if (e >= weights + OC) return;
    const int chunks = (OH + rows - 1) / rows, s = r / chunks, y0 = r % chunks * rows, y1 = min(OH, y0 + rows);
    float sum = 0.0f;
    if (e < weights) {
        const int j = e / (K * K), ky = e % (K * K) / K, kx = e % K;
        __global const float* src = in + ((size_t)s * IC + conn_in[j]) * IH * IW;
        __global const float* dj = d + ((size_t)s * OC + conn_out[j]) * OH * OW;
        for (int y = y0; y < y1; ++y) {
            const int iy = y * S + ky - P;
            if (iy < 0 || iy >= IH) continue;
            for (int x = 0; x < OW; ++x) {
                const int ix = x * S + kx - P;
                if (ix >= 0 && ix < IW) sum += dj[y * OW + x] * src[iy * IW + ix];
            }
        }
    } else {
        __global const float* dj = d + ((size_t)s * OC + e - weights) * OH * OW;
        for (int p = y0 * OW; p < y1 * OW; ++p) sum += dj[p];
    }
    part[(size_t)r * (weights + OC) + e] = sum;
}

// ---- trainable subsampling: out[c][y][x] = act(coef[c] * (sum of the KxK window) + b[c]).

// NDRange (round_up(OH*OW, WG), count*C).
__kernel void subsample_forward(__global const float* in, __global float* out, SMALL_W const float* coef,
                                SMALL_W const float* b, int C, int IH, int IW, int OH, int OW, int K, int act) {
    const int p = (int)get_global_id(0), sc = (int)get_global_id(1);
    if (p >= OH * OW) return;
    const int c = sc % C, y = p / OW, x = p % OW;
    __global const float* src = in + (size_t)sc * IH * IW + y * K * IW + x * K;
    float sum = 0.0f;
    for (int ky = 0; ky < K; ++ky)
        for (int kx = 0; kx < K; ++kx) sum += src[ky * IW + kx];
    out[(size_t)sc * OH * OW + p] = act_forward(act, coef[c] * sum + b[c]);
}

// NDRange (round_up(IH*IW, WG), count*C): inputs outside every window get a zero delta.
__kernel void subsample_backward_data(__global const float* in, __global const float* d, __global float* din,
                                      SMALL_W const float* coef, int C, int IH, int IW, int OH, int OW, int K,
                                      int in_act) {
    const int q = (int)get_global_id(0), sc = (int)get_global_id(1);
    if (q >= IH * IW) return;
    const int y = q / IW / K, x = q % IW / K;
    const float g = y < OH && x < OW ? d[(size_t)sc * OH * OW + y * OW + x] * coef[sc % C] : 0.0f;
    const size_t at = (size_t)sc * IH * IW + q;
    din[at] = delta_of(in_act, in[at], g);
}

// part[s][c]: the coefficient's gradient of map c, part[s][C + c] its bias's.
// NDRange (round_up(2*C, WG), count).
__kernel void subsample_partials(__global const float* in, __global const float* d, __global float* part, int C,
                                 int IH, int IW, int OH, int OW, int K) {
    const int e = (int)get_global_id(0), s = (int)get_global_id(1);
    if (e >= 2 * C) return;
    const int c = e % C;
    __global const float* src = in + ((size_t)s * C + c) * IH * IW;
    __global const float* dc = d + ((size_t)s * C + c) * OH * OW;
    float sum = 0.0f;
    for (int y = 0; y < OH; ++y)
        for (int x = 0; x < OW; ++x) {
            float win = 1.0f;  // the bias: the delta alone
            if (e < C) {
                win = 0.0f;
                for (int ky = 0; ky < K; ++ky)
                    for (int kx = 0; kx < K; ++kx) win += src[(y * K + ky) * IW + x * K + kx];
            }
            sum += dc[y * OW + x] * win;
        }
    part[(size_t)s * 2 * C + e] = sum;
}

// ---- max and average pooling over KxK windows with stride S.

// NDRange (round_up(OH*OW, WG), count*C).
__kernel void pool_forward(__global const float* in, __global float* out, int IH, int IW, int OH, int OW, int K,
                           int S, int is_max, int act) {
    const int p = (int)get_global_id(0), sc = (int)get_global_id(1);
    if (p >= OH * OW) return;
    const int y = p / OW, x = p % OW;
    __global const float* src = in + (size_t)sc * IH * IW + y * S * IW + x * S;
    float r = is_max ? src[0] : 0.0f;
    for (int ky = 0; ky < K; ++ky)
        for (int kx = 0; kx < K; ++kx) r = is_max ? fmax(r, src[ky * IW + kx]) : r + src[ky * IW + kx];
    out[(size_t)sc * OH * OW + p] = act_forward(act, is_max ? r : r / (float)(K * K));
}

// Each input gathers from the windows that contain it (max: those whose first largest input it
// is). NDRange (round_up(IH*IW, WG), count*C).
__kernel void pool_backward_data(__global const float* in, __global const float* d, __global float* din, int IH,
                                 int IW, int OH, int OW, int K, int S, int is_max, int in_act) {
    const int q = (int)get_global_id(0), sc = (int)get_global_id(1);
    if (q >= IH * IW) return;
    const int iy = q / IW, ix = q % IW;
    __global const float* src = in + (size_t)sc * IH * IW;
    __global const float* dc = d + (size_t)sc * OH * OW;
    const int y0 = iy < K ? 0 : (iy - K) / S + 1, x0 = ix < K ? 0 : (ix - K) / S + 1;
    float sum = 0.0f;
    for (int y = y0; y <= min(iy / S, OH - 1); ++y)
        for (int x = x0; x <= min(ix / S, OW - 1); ++x) {
            if (is_max) {
                int best = y * S * IW + x * S;
                for (int ky = 0; ky < K; ++ky)
                    for (int kx = 0; kx < K; ++kx)
                        if (src[(y * S + ky) * IW + x * S + kx] > src[best]) best = (y * S + ky) * IW + x * S + kx;
                if (best == q) sum += dc[y * OW + x];
            } else {
                sum += dc[y * OW + x] / (float)(K * K);
            }
        }
    din[(size_t)sc * IH * IW + q] = delta_of(in_act, src[q], sum);
}

// ---- fully connected layers whose weights fit in __constant memory (gpu-constant): items of a
// row of work-items share one weight at a time, which __constant memory broadcasts.
#ifdef MEM_CONSTANT
// out[s][o] = act(sum_i W[o][i] in[s][i] + b[o]). NDRange (round_up(count, WG), O).
__kernel void fc_forward_small(__global const float* in, __global float* out, __constant const float* w,
                               __constant const float* b, int count, int I, int O, int act) {
    const int s = (int)get_global_id(0), o = (int)get_global_id(1);
    if (s >= count) return;
    float sum = b[o];
    for (int i = 0; i < I; ++i) sum += w[o * I + i] * in[(size_t)s * I + i];
    out[(size_t)s * O + o] = act_forward(act, sum);
}

// din[s][i] = delta of sum_o W[o][i] d[s][o]. NDRange (round_up(count, WG), I).
__kernel void fc_backward_data_small(__global const float* in, __global const float* d, __global float* din,
                                     __constant const float* w, int count, int I, int O, int in_act) {
    const int s = (int)get_global_id(0), i = (int)get_global_id(1);
    if (s >= count) return;
    float sum = 0.0f;
    for (int o = 0; o < O; ++o) sum += w[o * I + i] * d[(size_t)s * O + o];
    const size_t at = (size_t)s * I + i;
    din[at] = delta_of(in_act, in[at], sum);
}
#endif

// ---- GEMM: C(m, n) = sum_k A(m, k) B(k, n) over m < M, n < N, with A(m, k) = A[a_off + m*a_m +
// k*a_k] and B(k, n) = B[b_off + k*b_k + n*b_n], then by `mode`, C[c_off + m*c_m + n*c_n] =
#define EPI_STORE 0     // the sum (weight gradients)
#define EPI_BIAS_ACT 1  // act(sum + E[e_off + n]) (a fully connected layer's output; E: the biases)
#define EPI_DELTA 2     // the delta of units with outputs E[e_off + m*c_m + n*c_n] (and activation act)
// The sum over k runs in order 0, 1, ..., so a weight gradient (k = the samples) is deterministic.
// A work-group computes a GEMM_TM x GEMM_TN tile of C, item (tx, ty) the rows ty + i*GEMM_TY and
// columns tx + j*GEMM_TX of it. Split over k (too few tiles to fill the device), work-group z
// sums k in [z*k_len, (z+1)*k_len) into the slice C + z*c_z (mode EPI_STORE), and gemm_reduce
// adds the slices up in order. NDRange (ceil(N/TN)*TX, ceil(M/TM)*TY, splits), work-group (TX, TY, 1).

inline float epilogue(float v, int at, int n, int mode, int act, __global const float* E, int e_off) {
    if (mode == EPI_BIAS_ACT) return act_forward(act, v + E[e_off + n]);
    if (mode == EPI_DELTA) return delta_of(act, E[e_off + at], v);
    return v;
}

__kernel __attribute__((reqd_work_group_size(GEMM_TX, GEMM_TY, 1))) void gemm(
    int M, int N, int K, int k_len, __global const float* A, int a_off, int a_m, int a_k, __global const float* B,
    int b_off, int b_k, int b_n, __global float* C, int c_off, int c_m, int c_n, int c_z, int mode, int act,
    __global const float* E, int e_off) {
    const int tx = (int)get_local_id(0), ty = (int)get_local_id(1), z = (int)get_group_id(2);
    const int tm = (int)get_group_id(1) * GEMM_TM, tn = (int)get_group_id(0) * GEMM_TN;
    a_off += z * k_len * a_k;
    b_off += z * k_len * b_k;
    c_off += z * c_z;
    K = min(k_len, K - z * k_len);
    float acc[GEMM_RM][GEMM_RN];
    for (int i = 0; i < GEMM_RM; ++i)
        for (int j = 0; j < GEMM_RN; ++j) acc[i][j] = 0.0f;
#ifdef MEM_LOCAL
    // Each round stages a TM x TK slice of A and a TK x TN slice of B (zeros outside the matrices),
    // loaded along whichever dimension is contiguous in memory.
    __local float As[GEMM_TK][GEMM_TM + 1];
    __local float Bs[GEMM_TK][GEMM_TN + 1];
    const int lid = ty * GEMM_TX + tx;
    for (int k0 = 0; k0 < K; k0 += GEMM_TK) {
        for (int e = lid; e < GEMM_TM * GEMM_TK; e += GEMM_TX * GEMM_TY) {
            const int mm = a_k == 1 ? e / GEMM_TK : e % GEMM_TM, kk = a_k == 1 ? e % GEMM_TK : e / GEMM_TM;
            const int m = tm + mm, k = k0 + kk;
            As[kk][mm] = m < M && k < K ? A[a_off + m * a_m + k * a_k] : 0.0f;
        }
        for (int e = lid; e < GEMM_TN * GEMM_TK; e += GEMM_TX * GEMM_TY) {
            const int nn = b_k == 1 ? e / GEMM_TK : e % GEMM_TN, kk = b_k == 1 ? e % GEMM_TK : e / GEMM_TN;
            const int n = tn + nn, k = k0 + kk;
            Bs[kk][nn] = n < N && k < K ? B[b_off + k * b_k + n * b_n] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < GEMM_TK; ++kk) {
            float a[GEMM_RM], b[GEMM_RN];
            for (int i = 0; i < GEMM_RM; ++i) a[i] = As[kk][ty + i * GEMM_TY];
            for (int j = 0; j < GEMM_RN; ++j) b[j] = Bs[kk][tx + j * GEMM_TX];
            for (int i = 0; i < GEMM_RM; ++i)
                for (int j = 0; j < GEMM_RN; ++j) acc[i][j] = mad(a[i], b[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#else
    // Straight from __global memory (rows and columns past the edge are clamped, computed and
    // not stored).
    int a_row[GEMM_RM], b_col[GEMM_RN];
    for (int i = 0; i < GEMM_RM; ++i) a_row[i] = a_off + min(tm + ty + i * GEMM_TY, M - 1) * a_m;
    for (int j = 0; j < GEMM_RN; ++j) b_col[j] = b_off + min(tn + tx + j * GEMM_TX, N - 1) * b_n;
    for (int k = 0; k < K; ++k) {
        float a[GEMM_RM], b[GEMM_RN];
        for (int i = 0; i < GEMM_RM; ++i) a[i] = A[a_row[i] + k * a_k];
        for (int j = 0; j < GEMM_RN; ++j) b[j] = B[b_col[j] + k * b_k];
        for (int i = 0; i < GEMM_RM; ++i)
            for (int j = 0; j < GEMM_RN; ++j) acc[i][j] = mad(a[i], b[j], acc[i][j]);
    }
#endif
    for (int i = 0; i < GEMM_RM; ++i) {
        const int m = tm + ty + i * GEMM_TY;
        if (m >= M) break;
        for (int j = 0; j < GEMM_RN; ++j) {
            const int n = tn + tx + j * GEMM_TX;
            if (n >= N) break;
            const int at = m * c_m + n * c_n;
            C[c_off + at] = epilogue(acc[i][j], at, n, mode, act, E, e_off);
        }
    }
}

// C[c_off + m*c_m + n*c_n] = the epilogue of the sum of the split GEMM's slices part[z][m][n], z in
// order. NDRange (round_up(M*N, WG)).
__kernel void gemm_reduce(__global const float* part, int splits, int M, int N, __global float* C, int c_off, int c_m,
                          int c_n, int mode, int act, __global const float* E, int e_off) {
    const int e = (int)get_global_id(0);
    if (e >= M * N) return;
    float sum = 0.0f;
    for (int z = 0; z < splits; ++z) sum += part[(size_t)z * M * N + e];
    const int m = e / N, n = e % N, at = m * c_m + n * c_n;
    C[c_off + at] = epilogue(sum, at, n, mode, act, E, e_off);
}

#endif  // LENET5_BATCH
