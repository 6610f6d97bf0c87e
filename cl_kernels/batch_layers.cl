// The batch-level path (host/opencl/opencl_batch_engine.cpp): one launch per layer and pass over the
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
//
// Where 16 (or 8) bytes are known to be aligned, the kernels load float4 (float2) through a cast
// pointer, not vload4: NVIDIA's compiler may only assume a float's alignment for vload4 and
// splits it into four loads (measured on an H100: the batch-16 CNN's fully connected forward
// took 37 us with vload4, 28 with the casts). __local arrays read so are declared aligned(16).
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

// The softmax cross-entropy's target of output k for a sample of `label` among n outputs: the
// one-hot label, or with -DLABEL_SMOOTHING=e (1 - e) on the label plus e/n on every output (common.h's
// softmax_target, which this program is built without).
inline float target_of(int k, int label, int n) {
#ifdef LABEL_SMOOTHING
    const float off = LABEL_SMOOTHING / (float)n;
    return k == label ? (1.0f - LABEL_SMOOTHING) + off : off;
#else
    return k == label ? 1.0f : 0.0f;
#endif
}

// The loss of one sample's outputs v [n] against its label: its loss and hit, and the output
// layer's delta d [n] (scale = 1/count), as preprocess.h computes them.
// squared: 0.5 sum (y - t)^2, else softmax cross-entropy (its delta against target_of, its loss
// against the label itself).
inline void sample_loss(__global const float* v, int label, int n, int squared, int act, float scale,
                        __global float* d, __global float* loss_at, __global int* hit_at) {
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
        for (int k = 0; k < n; ++k) d[k] = scale * (exp(v[k] - mx) / sum - target_of(k, label, n));
        loss = log(sum) - (v[label] - mx);
    }
    *loss_at = loss;
    *hit_at = best == label;
}

// The loss of each sample's outputs y [count][n]: loss and hit at slot + s, delta [count][n].
// NDRange (round_up(count, WG)).
__kernel void batch_loss(__global const float* y, __global const uchar* labels, __global const int* rows, int first,
                         int count, int n, int squared, int act, float scale, __global float* delta,
                         __global float* losses, __global int* hits, int slot) {
    const int s = (int)get_global_id(0);
    if (s >= count) return;
    sample_loss(y + (size_t)s * n, labels[rows[first + s]], n, squared, act, scale, delta + (size_t)s * n,
                losses + slot + s, hits + slot + s);
}

// ---- a small output layer at a small batch (gpu-local): the last layer, fully connected with at
// few outputs (the host decides), whose GEMMs would be mostly launches. head_forward: its forward and
// the loss in one launch, a group of 256 items per sample. The arguments up to `slot` are
// batch_loss's (y: the layer's outputs); X [count][I] its inputs, W [n][I], bias [n].
// Eight outputs per round, one per 32 items (strided over i, then the 32 sums in order).
// NDRange (256 * count), work-group 256.
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void head_forward(
    __global float* y, __global const uchar* labels, __global const int* rows, int first, int count, int n,
    int squared, int act, float scale, __global float* delta, __global float* losses, __global int* hits, int slot,
    __global const float* X, __global const float* W, __global const float* bias, int I) {
    __local float sums[256];
    const int s = (int)get_group_id(0), lid = (int)get_local_id(0), w = lid / 32, lane = lid % 32;
    __global const float* x = X + (size_t)s * I;
    __global float* v = y + (size_t)s * n;
    for (int o0 = 0; o0 < n; o0 += 8) {
        const int o = o0 + w;
        float acc = 0.0f;
        if (o < n)
            for (int i = lane; i < I; i += 32) acc = mad(x[i], W[(size_t)o * I + i], acc);
        sums[lid] = acc;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < 8 && o0 + lid < n) {
            float t = 0.0f;
            for (int l = 0; l < 32; ++l) t += sums[lid * 32 + l];
            v[o0 + lid] = act_forward(act, t + bias[o0 + lid]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    barrier(CLK_GLOBAL_MEM_FENCE);  // the outputs above, for item 0
    if (lid == 0)
        sample_loss(v, labels[rows[first + s]], n, squared, act, scale, delta + (size_t)s * n, losses + slot + s,
                    hits + slot + s);
}

// head_backward: the same layer's gradients and the delta below it in one launch, items (i, r):
// rows r < O: dW[r][i] = the sum over the samples in order of D[s][r] X[s][i], into grads at
// w_off (items i < O of row 0 also db[i], the sum of D[s][i], at b_off); rows O + s, unless the
// layer is the first (has_dp 0): Dp[s][i] = the delta of input unit i (activation in_act, output
// X[s][i]) from the sum over o in order of D[s][o] W[o][i].
// NDRange (round_up(max(I, O), 64), O + count), work-group (64, 1).
__kernel void head_backward(__global const float* X, __global const float* D, __global const float* W,
                            __global float* grads, int w_off, int b_off, int count, int I, int O,
                            __global float* Dp, int in_act, int has_dp) {
    const int i = (int)get_global_id(0), r = (int)get_global_id(1);
    if (r == 0 && i < O) {
        float b = 0.0f;
        for (int s = 0; s < count; ++s) b += D[s * O + i];
        grads[b_off + i] = b;
    }
    if (i >= I) return;
    if (r < O) {
        float g = 0.0f;
        for (int s = 0; s < count; ++s) g = mad(D[s * O + r], X[(size_t)s * I + i], g);
        grads[w_off + r * I + i] = g;
        return;
    }
    if (!has_dp) return;
    const int s = r - O;
    float t = 0.0f;
    for (int o = 0; o < O; ++o) t = mad(D[s * O + o], W[(size_t)o * I + i], t);
    Dp[(size_t)s * I + i] = delta_of(in_act, X[(size_t)s * I + i], t);
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

// update_rule.h's sgd_step on parameter e of the buffer without its skip_n parameters from skip (a
// layer that fc_sgd or fc_sgd_data updates). The SGD kernels here are SGD only: under Adam the engine
// runs update.cl's adam_update.
inline void sgd_skipping(__global float* params, __global float* velocity, __global const float* grads, int e,
                         int skip, int skip_n, float lr, float momentum, float weight_decay) {
    const int i = e >= skip ? e + skip_n : e;
    sgd_step(params, velocity, i, grads[i], lr, momentum, weight_decay);
}

__kernel void batch_sgd(__global float* params, __global float* velocity, __global const float* grads, int n, float lr,
                        float momentum, float weight_decay, int skip, int skip_n) {
    const int e = (int)get_global_id(0);
    if (e < n - skip_n) sgd_skipping(params, velocity, grads, e, skip, skip_n, lr, momentum, weight_decay);
}

// The same update for a fully connected layer's weights W [O][I] at w_off, their gradient computed
// on the way rather than read: dW[o][i] = the sum over the samples s, in order, of D[s][o] X[s][i].
// At a small batch the weight-gradient GEMM would only write dW out for batch_sgd to read back.
// Item (q, g) takes the 8 x 4 weights o = 8g .. 8g+7, i = 4q .. 4q+3, loading X and D as float4
// (I and O multiples of 4, w_off too). The items of the rows g >= ceil(O/8) do batch_sgd's work
// instead, on the other parameters (grads [n], skipping these weights), in one launch with it.
// The rates are arguments 4-6, as batch_sgd's. NDRange (round_up(I/4, WG), ceil(O/8) + rest_rows).
__kernel void fc_sgd(__global float* params, __global float* velocity, __global const float* D,
                     __global const float* X, float lr, float momentum, float weight_decay, int w_off, int count,
                     int I, int O, __global const float* grads, int n) {
    const int rows = (O + 7) / 8;
    if ((int)get_global_id(1) >= rows) {  // batch_sgd's part
        const int stride = (int)get_global_size(0) * ((int)get_global_size(1) - rows);
        for (int e = (int)get_global_id(0) + ((int)get_global_id(1) - rows) * (int)get_global_size(0); e < n - I * O;
             e += stride)
            sgd_skipping(params, velocity, grads, e, w_off, I * O, lr, momentum, weight_decay);
        return;
    }
    const int i = 4 * (int)get_global_id(0), o0 = 8 * (int)get_global_id(1);
    if (i >= I) return;
    const int o4 = min(o0 + 4, O - 4);  // the second four (only stored when o0 + 4 < O)
    float4 g[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) g[j] = (float4)(0.0f);
    for (int s = 0; s < count; ++s) {
        const float4 x = *(__global const float4*)(X + s * I + i), d0 = *(__global const float4*)(D + s * O + o0),
                     d1 = *(__global const float4*)(D + s * O + o4);
        const float d[8] = {d0.s0, d0.s1, d0.s2, d0.s3, d1.s0, d1.s1, d1.s2, d1.s3};
#pragma unroll
        for (int j = 0; j < 8; ++j) g[j] = mad((float4)(d[j]), x, g[j]);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        if (o0 + j >= O) break;
        __global float* p = params + w_off + (o0 + j) * I + i;
        __global float* v = velocity + w_off + (o0 + j) * I + i;
        float4 w = *(__global float4*)p, vel = *(__global float4*)v;
        SGD_STEP(float4, w, vel, g[j], lr, momentum, weight_decay);
        *(__global float4*)v = vel;
        *(__global float4*)p = w;
    }
}

// fc_sgd's update that also computes the delta below the layer (batches of at most FD_SAMPLES): its
// data gradient reads the same weights, before they change, so W is read once for both. Group
// (b, c) takes the columns i = 64b .. 64b+63 (two per item, lane l: 64b + 2l) of the rows
// o = c*FD_ROWS .. c*FD_ROWS + FD_ROWS-1 (warp w of 8: rows w, w+8, ...). The update is fc_sgd's,
// the gradient summed over the samples in the same order; part[c][s][i] (slices of count x I)
// gets the sum over the group's rows of D[s][o] W[o][i], each warp's in order and then the warps'
// in order; gemm_reduce adds the slices up and applies the activation's derivative. I even, w_off
// too. The groups c of column block 0 also update the biases of their rows (at b_off), their
// gradients summed over the samples in order. The other parameters are batch_sgd's, after the
// layers below have their gradients.
// NDRange (ceil(I/64)*256, ceil(O/FD_ROWS)), work-group (256, 1).
#define FD_SAMPLES 16
#define FD_ROWS 128
#define FD_WARPS 8
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void fc_sgd_data(
    __global float* params, __global float* velocity, __global const float* D, __global const float* X, float lr,
    float momentum, float weight_decay, int w_off, int b_off, int count, int I, int O, __global float* part) {
    __local float Ds[FD_ROWS * FD_SAMPLES] __attribute__((aligned(16)));  // [row][s]: D's rows of this group
    __local float2 sums[FD_WARPS * FD_SAMPLES * 32];  // [warp][s][lane]: each warp's part
    const int lid = (int)get_local_id(0), lane = lid % 32, warp = lid / 32, c = (int)get_group_id(1);
    const int i = (int)get_group_id(0) * 64 + 2 * lane, o0 = c * FD_ROWS, rows = min(FD_ROWS, O - o0);
    for (int e = lid; e < FD_ROWS * FD_SAMPLES; e += 256) {
        const int r = e % FD_ROWS, s = e / FD_ROWS;
        Ds[r * FD_SAMPLES + s] = r < rows && s < count ? D[s * O + o0 + r] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_group_id(0) == 0 && lid < rows) {
        float b = 0.0f;
        for (int s = 0; s < count; ++s) b += Ds[lid * FD_SAMPLES + s];
        sgd_step(params, velocity, b_off + o0 + lid, b, lr, momentum, weight_decay);
    }
    const int live = i < I;
    float2 x[FD_SAMPLES], dx[FD_SAMPLES];
#pragma unroll
    for (int s = 0; s < FD_SAMPLES; ++s) {
        x[s] = live && s < count ? vload2(0, X + s * I + i) : (float2)(0.0f);
        dx[s] = (float2)(0.0f);
    }
    for (int r = warp; r < (live ? rows : 0); r += FD_WARPS) {
        __global float* p = params + w_off + (o0 + r) * I + i;
        __global float* v = velocity + w_off + (o0 + r) * I + i;
        const float2 w = *(__global float2*)p, vel0 = *(__global float2*)v;
        float2 g = (float2)(0.0f);
#pragma unroll
        for (int s4 = 0; s4 < FD_SAMPLES; s4 += 4) {
            const float4 d = *(__local const float4*)(Ds + r * FD_SAMPLES + s4);
            g = mad((float2)(d.s0), x[s4], g);
            g = mad((float2)(d.s1), x[s4 + 1], g);
            g = mad((float2)(d.s2), x[s4 + 2], g);
            g = mad((float2)(d.s3), x[s4 + 3], g);
            dx[s4] = mad((float2)(d.s0), w, dx[s4]);
            dx[s4 + 1] = mad((float2)(d.s1), w, dx[s4 + 1]);
            dx[s4 + 2] = mad((float2)(d.s2), w, dx[s4 + 2]);
            dx[s4 + 3] = mad((float2)(d.s3), w, dx[s4 + 3]);
        }
        float2 w1 = w, vel = vel0;
        SGD_STEP(float2, w1, vel, g, lr, momentum, weight_decay);
        *(__global float2*)v = vel;
        *(__global float2*)p = w1;
    }
#pragma unroll
    for (int s = 0; s < FD_SAMPLES; ++s) sums[(warp * FD_SAMPLES + s) * 32 + lane] = dx[s];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = lid; e < FD_SAMPLES * 32; e += 256) {
        const int s = e / 32, l = e % 32, col = (int)get_group_id(0) * 64 + 2 * l;
        float2 t = sums[s * 32 + l];
        for (int w = 1; w < FD_WARPS; ++w) t += sums[(w * FD_SAMPLES + s) * 32 + l];
        if (s < count && col < I) vstore2(t, 0, part + ((size_t)c * count + s) * I + col);
    }
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
    float r;
    if (K == 2 && S == 2 && IW % 2 == 0) {  // the window's rows as float2 (aligned: src and IW are even)
        const float2 a = *(__global const float2*)src, b = *(__global const float2*)(src + IW);
        r = is_max ? fmax(fmax(a.s0, a.s1), fmax(b.s0, b.s1)) : ((a.s0 + a.s1) + b.s0) + b.s1;
    } else {
        r = is_max ? src[0] : 0.0f;
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx) r = is_max ? fmax(r, src[ky * IW + kx]) : r + src[ky * IW + kx];
    }
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
#define EPI_BIAS_ACT_M 3  // act(sum + E[e_off + m]) (EPI_BIAS_ACT with the operands swapped: C^T = B^T A^T)
// The sum over k runs in order 0, 1, ..., so a weight gradient (k = the samples) is deterministic.
// A work-group computes a GEMM_TM x GEMM_TN tile of C, item (tx, ty) the rows ty + i*GEMM_TY and
// columns tx + j*GEMM_TX of it. Split over k (too few tiles to fill the device), work-group z
// sums k in [z*k_len, (z+1)*k_len) into the slice C + z*c_z (mode EPI_STORE), and gemm_reduce
// adds the slices up in order. NDRange (ceil(N/TN)*TX, ceil(M/TM)*TY, splits), work-group (TX, TY, 1).

inline float epilogue(float v, int at, int m, int n, int mode, int act, __global const float* E, int e_off) {
    if (mode == EPI_BIAS_ACT) return act_forward(act, v + E[e_off + n]);
    if (mode == EPI_BIAS_ACT_M) return act_forward(act, v + E[e_off + m]);
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
            C[c_off + at] = epilogue(acc[i][j], at, m, n, mode, act, E, e_off);
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
    C[c_off + at] = epilogue(sum, at, m, n, mode, act, E, e_off);
}


// ---- the fast GEMM (gpu-local, the large tiles only): 128x128 tiles of C, 16 deep per round,
// 256 items of 8x8 (rows ty*4 + {0..3} and 64 + ty*4 + {0..3}, columns likewise with tx), the
// slices of A and B double-buffered in __local memory (one barrier per round) and loaded from
// __global as float4 along whichever dimension is contiguous (A: k or m, B: k or n; the kernel's
// name says which: gemm_fast_<A><B>). a_vec/b_vec: the host found that operand's float4 loads
// aligned (contiguous stride 1, the other stride, its offset and the contiguous extent multiples
// of 4); otherwise scalar loads. The same arguments, the same split over k and the same order of
// the sum over k as gemm.
#if defined(MEM_LOCAL) && GEMM_TM == 128 && GEMM_TN == 128 && GEMM_TK == 16 && GEMM_RM == 8 && GEMM_RN == 8
#define FT_LD 132  // a __local row: 128 + 4 (float4-aligned; transposed stores meet fewer bank conflicts)

// Element (r, k) .. of an operand X(r, k) = X[off + r*xr + k*xk]: the four along the contiguous
// dimension from (r, k), zeros outside R x K.
inline float4 ft_load(__global const float* X, int off, int xr, int xk, int R, int K, int r, int k, int rcontig,
                      int vec) {
    if (vec) return r < R && k < K ? *(__global const float4*)(X + off + r * xr + k * xk) : (float4)(0.0f);
    float4 v;
    if (rcontig) {
        v.s0 = r < R && k < K ? X[off + r * xr + k * xk] : 0.0f;
        v.s1 = r + 1 < R && k < K ? X[off + (r + 1) * xr + k * xk] : 0.0f;
        v.s2 = r + 2 < R && k < K ? X[off + (r + 2) * xr + k * xk] : 0.0f;
        v.s3 = r + 3 < R && k < K ? X[off + (r + 3) * xr + k * xk] : 0.0f;
    } else {
        v.s0 = r < R && k < K ? X[off + r * xr + k * xk] : 0.0f;
        v.s1 = r < R && k + 1 < K ? X[off + r * xr + (k + 1) * xk] : 0.0f;
        v.s2 = r < R && k + 2 < K ? X[off + r * xr + (k + 2) * xk] : 0.0f;
        v.s3 = r < R && k + 3 < K ? X[off + r * xr + (k + 3) * xk] : 0.0f;
    }
    return v;
}

// Item lid's two float4 of the 128 x 16 slice at (r0, k0): k-contiguous: rows lid/4 and 64 + lid/4,
// k0 + 4*(lid%4); r-contiguous: k0 + lid/32 and k0 + 8 + lid/32, rows r0 + 4*(lid%32).
inline void ft_fetch(float4* v, __global const float* X, int off, int xr, int xk, int R, int K, int r0, int k0,
                     int rcontig, int vec, int lid) {
    if (rcontig) {
        v[0] = ft_load(X, off, xr, xk, R, K, r0 + 4 * (lid % 32), k0 + lid / 32, 1, vec);
        v[1] = ft_load(X, off, xr, xk, R, K, r0 + 4 * (lid % 32), k0 + 8 + lid / 32, 1, vec);
    } else {
        v[0] = ft_load(X, off, xr, xk, R, K, r0 + lid / 4, k0 + 4 * (lid % 4), 0, vec);
        v[1] = ft_load(X, off, xr, xk, R, K, r0 + 64 + lid / 4, k0 + 4 * (lid % 4), 0, vec);
    }
}

// ... into Xs[k][r] (16 x FT_LD).
inline void ft_stash(const float4* v, __local float* Xs, int rcontig, int lid) {
    if (rcontig) {
        *(__local float4*)(Xs + (lid / 32) * FT_LD + 4 * (lid % 32)) = v[0];
        *(__local float4*)(Xs + (8 + lid / 32) * FT_LD + 4 * (lid % 32)) = v[1];
    } else {
        for (int h = 0; h < 2; ++h) {
            __local float* at = Xs + 4 * (lid % 4) * FT_LD + h * 64 + lid / 4;
            at[0] = v[h].s0;
            at[FT_LD] = v[h].s1;
            at[2 * FT_LD] = v[h].s2;
            at[3 * FT_LD] = v[h].s3;
        }
    }
}

inline void gemm_fast_body(int M, int N, int K, int k_len, __global const float* A, int a_off, int a_m, int a_k,
                           __global const float* B, int b_off, int b_k, int b_n, __global float* C, int c_off, int c_m,
                           int c_n, int c_z, int mode, int act, __global const float* E, int e_off, int a_vec,
                           int b_vec, const int a_mcontig, const int b_ncontig, __local float* As,
                           __local float* Bs) {
    const int lid = (int)get_local_id(0), tx = lid % 16, ty = lid / 16, z = (int)get_group_id(2);
    const int tm = (int)get_group_id(1) * 128, tn = (int)get_group_id(0) * 128;
    a_off += z * k_len * a_k;
    b_off += z * k_len * b_k;
    c_off += z * c_z;
    K = min(k_len, K - z * k_len);
    float acc[8][8];
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    float4 ra[2], rb[2];
    ft_fetch(ra, A, a_off, a_m, a_k, M, K, tm, 0, a_mcontig, a_vec, lid);
    ft_fetch(rb, B, b_off, b_n, b_k, N, K, tn, 0, b_ncontig, b_vec, lid);
    ft_stash(ra, As, a_mcontig, lid);
    ft_stash(rb, Bs, b_ncontig, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    int cur = 0;
    for (int k0 = 0; k0 < K; k0 += 16) {
        const int more = k0 + 16 < K;
        if (more) {
            ft_fetch(ra, A, a_off, a_m, a_k, M, K, tm, k0 + 16, a_mcontig, a_vec, lid);
            ft_fetch(rb, B, b_off, b_n, b_k, N, K, tn, k0 + 16, b_ncontig, b_vec, lid);
        }
        __local const float* as = As + cur * 16 * FT_LD;
        __local const float* bs = Bs + cur * 16 * FT_LD;
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            __local const float4* a4 = (__local const float4*)(as + kk * FT_LD);
            __local const float4* b4 = (__local const float4*)(bs + kk * FT_LD);
            const float4 a0 = a4[ty], a1 = a4[16 + ty], b0 = b4[tx], b1 = b4[16 + tx];
            const float a[8] = {a0.s0, a0.s1, a0.s2, a0.s3, a1.s0, a1.s1, a1.s2, a1.s3};
            const float b[8] = {b0.s0, b0.s1, b0.s2, b0.s3, b1.s0, b1.s1, b1.s2, b1.s3};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = mad(a[i], b[j], acc[i][j]);
        }
        if (more) {
            ft_stash(ra, As + (cur ^ 1) * 16 * FT_LD, a_mcontig, lid);
            ft_stash(rb, Bs + (cur ^ 1) * 16 * FT_LD, b_ncontig, lid);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        cur ^= 1;
    }
    // C along n in float4 where its rows allow (each item's 4 neighbouring columns, lanes side by side).
    const int c_vec = c_n == 1 && c_off % 4 == 0 && c_m % 4 == 0 && N % 4 == 0;
    for (int i = 0; i < 8; ++i) {
        const int m = tm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        if (m >= M) continue;
        if (c_vec) {
            for (int h = 0; h < 2; ++h) {
                const int n = tn + h * 64 + tx * 4, at = m * c_m + n;
                if (n >= N) continue;
                float4 v;
                v.s0 = epilogue(acc[i][4 * h], at, m, n, mode, act, E, e_off);
                v.s1 = epilogue(acc[i][4 * h + 1], at + 1, m, n + 1, mode, act, E, e_off);
                v.s2 = epilogue(acc[i][4 * h + 2], at + 2, m, n + 2, mode, act, E, e_off);
                v.s3 = epilogue(acc[i][4 * h + 3], at + 3, m, n + 3, mode, act, E, e_off);
                *(__global float4*)(C + c_off + at) = v;
            }
            continue;
        }
        for (int j = 0; j < 8; ++j) {
            const int n = tn + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
            if (n >= N) continue;
            const int at = m * c_m + n * c_n;
            C[c_off + at] = epilogue(acc[i][j], at, m, n, mode, act, E, e_off);
        }
    }
}

#define GEMM_FAST(NAME, A_M, B_N)                                                                                  \
    __kernel __attribute__((reqd_work_group_size(256, 1, 1))) void NAME(                                           \
        int M, int N, int K, int k_len, __global const float* A, int a_off, int a_m, int a_k,                      \
        __global const float* B, int b_off, int b_k, int b_n, __global float* C, int c_off, int c_m, int c_n,      \
        int c_z, int mode, int act, __global const float* E, int e_off, int a_vec, int b_vec) {                    \
        __local float As[2 * 16 * FT_LD] __attribute__((aligned(16)));                                             \
        __local float Bs[2 * 16 * FT_LD] __attribute__((aligned(16)));                                             \
        gemm_fast_body(M, N, K, k_len, A, a_off, a_m, a_k, B, b_off, b_k, b_n, C, c_off, c_m, c_n, c_z, mode, act, \
                       E, e_off, a_vec, b_vec, A_M, B_N, As, Bs);                                                  \
    }
GEMM_FAST(gemm_fast_kk, 0, 0)  // A(m, k) and B(k, n) contiguous along k: a layer's forward
GEMM_FAST(gemm_fast_kn, 0, 1)  // A along k, B along n: the previous layer's delta
GEMM_FAST(gemm_fast_mn, 1, 1)  // A along m, B along n: the weight gradient
GEMM_FAST(gemm_fast_mk, 1, 0)
#endif

// ---- a convolution with one input map, stride 1 and CONV_FK x CONV_FK kernels (the first layer
// of the CNN and LeNet-5): each item computes 4 neighbouring outputs of a row for a group of
// output maps, its (CONV_FK) x (CONV_FK + 3) input window in registers. gpu-local stages the
// sample's zero-padded input plane (CONV_PLANE floats at most) and the group's weights in
// __local memory; gpu and gpu-constant read the input from __global (and the weights from
// SMALL_W). Output map o's weights are w[o*FK*FK ..], its connection the only input map.
#ifdef CONV_FK
#define FK CONV_FK
#define FX (CONV_FK + 3)

// The window of padded-plane rows y .. y+FK-1, columns x0 .. x0+FX-1 (plane coordinates: input
// (iy, ix) is plane (iy + P, ix + P)).
#ifdef MEM_LOCAL
#define CONV_STAGE_PLANE(plane, src, IH, IW, P, LW)                                           \
    for (int e = (int)get_local_id(0); e < ((IH) + 2 * (P)) * (LW); e += (int)get_local_size(0)) { \
        const int py = e / (LW), px = e % (LW), iy = py - (P), ix = px - (P);                 \
        plane[e] = iy >= 0 && iy < (IH) && ix >= 0 && ix < (IW) ? src[iy * (IW) + ix] : 0.0f;  \
    }
#define CONV_WIN(v, plane, src, IH, IW, P, LW, y, x0)                                            \
    for (int ky = 0; ky < FK; ++ky)                                                              \
        for (int kx = 0; kx < FX; ++kx) v[ky][kx] = plane[((y) + ky) * (LW) + (x0) + kx];
#else
#define CONV_WIN(v, plane, src, IH, IW, P, LW, y, x0)                                            \
    for (int ky = 0; ky < FK; ++ky)                                                              \
        for (int kx = 0; kx < FX; ++kx) {                                                        \
            const int iy = (y) + ky - (P), ix = (x0) + kx - (P);                                 \
            v[ky][kx] = iy >= 0 && iy < (IH) && ix >= 0 && ix < (IW) ? src[iy * (IW) + ix] : 0.0f; \
        }
#endif

// Sample s's input map: in[s], or, for the network's first layer, the data set's row
// rows[first + s] (gather_inputs's work, left to these kernels).
#define CONV_SOURCE(in, rows, first, s, IH, IW) ((in) + (size_t)((rows) ? (rows)[(first) + (s)] : (s)) * (IH) * (IW))

// NDRange (round_up(OH * ceil(OW/4), G), count * groups), work-group (G, 1): group g of sample s
// computes maps [g*maps, min(OC, (g+1)*maps)).
__kernel void conv_forward_fast(__global const float* in, __global const int* rows, int first, __global float* out,
                                SMALL_W const float* w, SMALL_W const float* b, int IH, int IW, int OC, int OH, int OW,
                                int P, int act, int maps) {
    const int q = (int)get_global_id(0), sg = (int)get_global_id(1), groups = (OC + maps - 1) / maps;
    const int s = sg / groups, o0 = sg % groups * maps, o1 = min(OC, o0 + maps), QW = (OW + 3) / 4;
    __global const float* src = CONV_SOURCE(in, rows, first, s, IH, IW);
#ifdef MEM_LOCAL
    const int LW = IW + 2 * P + 3;
    __local float plane[CONV_PLANE];
    __local float wl[CONV_FW];
    CONV_STAGE_PLANE(plane, src, IH, IW, P, LW)
    for (int e = (int)get_local_id(0); e < (o1 - o0) * FK * FK; e += (int)get_local_size(0)) wl[e] = w[o0 * FK * FK + e];
    barrier(CLK_LOCAL_MEM_FENCE);
    // wl holds maps o0.. only: index it from o0 (a pointer wl - o0*FK*FK would point before the array).
    __local const float* wo = wl;
    const int wo_first = o0;
#else
    SMALL_W const float* wo = w;
    const int wo_first = 0;
#endif
    if (q >= OH * QW) return;
    const int y = q / QW, x0 = q % QW * 4;
    float v[FK][FX];
    CONV_WIN(v, plane, src, IH, IW, P, LW, y, x0)
    __global float* dst = out + (size_t)s * OC * OH * OW + y * OW + x0;
    for (int o = o0; o < o1; ++o) {
        float a0 = b[o], a1 = a0, a2 = a0, a3 = a0;
        const int wk = (o - wo_first) * FK * FK;
#pragma unroll
        for (int ky = 0; ky < FK; ++ky)
#pragma unroll
            for (int kx = 0; kx < FK; ++kx) {
                const float c = wo[wk + ky * FK + kx];
                a0 = mad(c, v[ky][kx], a0);
                a1 = mad(c, v[ky][kx + 1], a1);
                a2 = mad(c, v[ky][kx + 2], a2);
                a3 = mad(c, v[ky][kx + 3], a3);
            }
        __global float* d = dst + (size_t)o * OH * OW;
        if ((OW & 3) == 0) {  // float4-aligned rows (OH*OW a multiple of 4 too)
            *(__global float4*)d = (float4)(act_forward(act, a0), act_forward(act, a1), act_forward(act, a2),
                                            act_forward(act, a3));
            continue;
        }
        d[0] = act_forward(act, a0);
        if (x0 + 1 < OW) d[1] = act_forward(act, a1);
        if (x0 + 2 < OW) d[2] = act_forward(act, a2);
        if (x0 + 3 < OW) d[3] = act_forward(act, a3);
    }
}

// The weight and bias gradient shares as conv_partials writes them (share r = s*chunks + c: the
// output rows [c*rows, min(OH, (c+1)*rows)) of sample s). Item lid = g*OC + o sums map o's
// FK*FK weights and bias over the rows y0 + g, y0 + g + G, ..., 4 outputs of a row at a time;
// then the G row groups' sums are added up in g order. The input as conv_forward_fast's.
// NDRange (OC*G, shares), work-group (OC*G, 1).
__kernel void conv_partials_fast(__global const float* in, __global const int* in_rows, int first,
                                 __global const float* d, __global float* part, int IH, int IW, int OC, int OH, int OW,
                                 int P, int rows) {
    const int lid = (int)get_local_id(0), r = (int)get_global_id(1), G = (int)get_local_size(0) / OC;
    const int o = lid % OC, g = lid / OC;
    const int chunks = (OH + rows - 1) / rows, s = r / chunks, y0 = r % chunks * rows, y1 = min(OH, y0 + rows);
    __global const float* src = CONV_SOURCE(in, in_rows, first, s, IH, IW);
    __global const float* dm = d + ((size_t)s * OC + o) * OH * OW;
    __local float shared[CONV_SHARED];
#ifdef MEM_LOCAL
    const int LW = IW + 2 * P + 3;
    __local float* plane = shared;
    CONV_STAGE_PLANE(plane, src, IH, IW, P, LW)
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    float acc[FK][FK], bias = 0.0f;
    for (int ky = 0; ky < FK; ++ky)
        for (int kx = 0; kx < FK; ++kx) acc[ky][kx] = 0.0f;
    for (int y = y0 + g; y < y1; y += G)
        for (int x0 = 0; x0 < OW; x0 += 4) {
            float v[FK][FX];
            CONV_WIN(v, plane, src, IH, IW, P, LW, y, x0)
            float d0, d1, d2, d3;
            if ((OW & 3) == 0) {  // float4-aligned rows
                const float4 dv = *(__global const float4*)(dm + y * OW + x0);
                d0 = dv.s0, d1 = dv.s1, d2 = dv.s2, d3 = dv.s3;
            } else {
                d0 = dm[y * OW + x0], d1 = x0 + 1 < OW ? dm[y * OW + x0 + 1] : 0.0f;
                d2 = x0 + 2 < OW ? dm[y * OW + x0 + 2] : 0.0f, d3 = x0 + 3 < OW ? dm[y * OW + x0 + 3] : 0.0f;
            }
            bias += d0 + d1 + d2 + d3;
#pragma unroll
            for (int ky = 0; ky < FK; ++ky)
#pragma unroll
                for (int kx = 0; kx < FK; ++kx)
                    acc[ky][kx] += d0 * v[ky][kx] + d1 * v[ky][kx + 1] + d2 * v[ky][kx + 2] + d3 * v[ky][kx + 3];
        }
    barrier(CLK_LOCAL_MEM_FENCE);  // the plane is done with: the sums take its place
    const int per = FK * FK + 1, weights = OC * FK * FK;
    for (int t = 0; t < FK * FK; ++t) shared[lid * per + t] = acc[t / FK][t % FK];
    shared[lid * per + FK * FK] = bias;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = lid; e < OC * per; e += (int)get_local_size(0)) {
        const int oe = e / per, t = e % per;
        float sum = 0.0f;
        for (int h = 0; h < G; ++h) sum += shared[(h * OC + oe) * per + t];
        part[(size_t)r * (weights + OC) + (t < FK * FK ? oe * FK * FK + t : weights + oe)] = sum;
    }
}
#undef FK
#undef FX
#endif  // CONV_FK

// Max or average pooling with windows that tile the input (stride = window, no input left over):
// each item takes one window, its output's delta to the window's inputs (max: to the first largest
// only), times their activation's derivative. NDRange (round_up(OH*OW, WG), count*C).
__kernel void pool_backward_tiled(__global const float* in, __global const float* d, __global float* din, int IH,
                                  int IW, int OH, int OW, int K, int is_max, int in_act) {
    const int p = (int)get_global_id(0), sc = (int)get_global_id(1);
    if (p >= OH * OW) return;
    const int y = p / OW, x = p % OW;
    const size_t base = (size_t)sc * IH * IW + (size_t)(y * K) * IW + x * K;
    const float g = d[(size_t)sc * OH * OW + p];
    if (K == 2 && IW % 2 == 0) {  // the window's rows as float2 (aligned: base and IW are even)
        __global const float2* row = (__global const float2*)(in + base);
        const float2 a = row[0], b = row[IW / 2];
        // The first largest, in the order of the loop below.
        const int first = !is_max ? -1
                          : a.s0 >= a.s1 && a.s0 >= b.s0 && a.s0 >= b.s1 ? 0
                          : a.s1 >= b.s0 && a.s1 >= b.s1               ? 1
                          : b.s0 >= b.s1                                ? 2
                                                                        : 3;
        const float share = is_max ? 0.0f : g / 4.0f;
        __global float2* out = (__global float2*)(din + base);
        out[0] = (float2)(delta_of(in_act, a.s0, first == 0 ? g : share),
                          delta_of(in_act, a.s1, first == 1 ? g : share));
        out[IW / 2] = (float2)(delta_of(in_act, b.s0, first == 2 ? g : share),
                               delta_of(in_act, b.s1, first == 3 ? g : share));
        return;
    }
    int best = 0;
    if (is_max)
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx)
                if (in[base + ky * IW + kx] > in[base + best / K * IW + best % K]) best = ky * K + kx;
    for (int ky = 0; ky < K; ++ky)
        for (int kx = 0; kx < K; ++kx) {
            const size_t at = base + ky * IW + kx;
            const float share = is_max ? (ky * K + kx == best ? g : 0.0f) : g / (float)(K * K);
            din[at] = delta_of(in_act, in[at], share);
        }
}

// sum_rows for many rows: work-group (8, 32); item (c, j) sums the rows of its 32nd in order,
// then item (c, 0) the 32 sums in order. NDRange (round_up(cols, 8), 32).
__kernel __attribute__((reqd_work_group_size(8, 32, 1))) void sum_rows32(__global const float* part, int rows,
                                                                          int cols, int split, __global float* grads,
                                                                          int off_w, int off_b) {
    const int c = (int)get_global_id(0), j = (int)get_local_id(1), lc = (int)get_local_id(0);
    __local float sums[32][8];
    const int len = (rows + 31) / 32, r0 = j * len, r1 = min(rows, r0 + len);
    float sum = 0.0f;
    if (c < cols)
        for (int r = r0; r < r1; ++r) sum += part[(size_t)r * cols + c];
    sums[j][lc] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (j != 0 || c >= cols) return;
    float total = 0.0f;
    for (int h = 0; h < 32; ++h) total += sums[h][lc];
    grads[c < split ? off_w + c : off_b + c - split] = total;
}

// ---- GEMMs of at most 16 rows of C and a deep k (a small batch's fully connected layers,
// gpu-local): every group takes a slice of k (k_len deep, at most SK_KC; group z) and writes its
// sums to the slice C + z*c_z (EPI_STORE; gemm_reduce adds the slices up in order and applies the
// epilogue), so B (the weights) is read once, by many groups. A's 16 x k_len slice is staged in
// __local memory (zeros outside A).
#ifdef MEM_LOCAL
#define SK_KC 256
#define SK_GROUP 64

// A(m, k0 + kk) for kk < rows into As[m*rows + kk] (by_m) or As[kk*16 + m]: inside the slice (kk < len)
// and A, zeros elsewhere.
inline void skinny_stage(__local float* As, __global const float* A, int a_off, int a_m, int a_k, int M, int len,
                         int k0, int rows, int by_m) {
    for (int e = (int)get_local_id(0); e < 16 * rows; e += (int)get_local_size(0)) {
        const int m = a_k == 1 ? e / rows : e % 16, kk = a_k == 1 ? e % rows : e / 16;  // along A's k where contiguous
        As[by_m ? m * rows + kk : kk * 16 + m] = m < M && kk < len ? A[a_off + m * a_m + (k0 + kk) * a_k] : 0.0f;
    }
}

// acc[m] += a[m] w for the 16 rows m of a row of As[k*16 + m].
inline void skinny_mad(float* acc, __local const float* a, float w) {
    for (int q = 0; q < 4; ++q) {
        const float4 v = ((__local const float4*)a)[q];
        acc[4 * q] = mad(v.s0, w, acc[4 * q]);
        acc[4 * q + 1] = mad(v.s1, w, acc[4 * q + 1]);
        acc[4 * q + 2] = mad(v.s2, w, acc[4 * q + 2]);
        acc[4 * q + 3] = mad(v.s3, w, acc[4 * q + 3]);
    }
}

// B along k (B(k, n) = B[b_off + k + n*b_n]: a layer's forward, W [N][K]), slices of at most
// SK_KC_K. Item (c, q) = (lid/4, lid%4) takes column nb + c of the group's 64 and k = 4q .. 4q+3,
// 4q+16 .., reading B as float4 where vec (the host found its rows aligned) and A's slice as
// float4 from __local (a column's 4 items read 64 contiguous bytes, which the warp's 8 columns
// share); then the 4 items' sums are added up in order. NDRange (ceil(N/64)*256, 1, splits),
// work-group (256, 1, 1). (Measured on an H100 at batch 16, the CNN's first fully connected
// layer: 28 us; 35 with 4 columns an item and lanes along k, 51 with an item per column.)
#define SK_KC_K 384
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void gemm_skinny_k(
    int M, int N, int K, int k_len, __global const float* A, int a_off, int a_m, int a_k, __global const float* B,
    int b_off, int b_n, __global float* C, int c_z, int vec) {
    __local float As[16 * SK_KC_K] __attribute__((aligned(16)));
    __local float sums[64 * 16 * 4];  // [column][m][q]
    const int lid = (int)get_local_id(0), c = lid / 4, q = lid % 4, z = (int)get_group_id(2);
    const int nb = (int)get_group_id(0) * 64, k0 = z * k_len, len = min(k_len, K - k0);
    skinny_stage(As, A, a_off, a_m, a_k, M, len, k0, k_len, 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    float acc[16];
    for (int m = 0; m < 16; ++m) acc[m] = 0.0f;
    __global const float* w = B + b_off + min(nb + c, N - 1) * b_n + k0;
    for (int k4 = 4 * q; k4 < len; k4 += 64) {  // four float4 of B in flight, then their sums
        float4 b[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int kk = k4 + 16 * u;
            b[u] = vec && kk + 4 <= len ? *(__global const float4*)(w + kk)
                                        : (float4)(kk < len ? w[kk] : 0.0f, kk + 1 < len ? w[kk + 1] : 0.0f,
                                                   kk + 2 < len ? w[kk + 2] : 0.0f, kk + 3 < len ? w[kk + 3] : 0.0f);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
            for (int m = 0; m < 16; ++m) {
                const float4 a = *(__local const float4*)(As + m * k_len + k4 + 16 * u);
                acc[m] = mad(a.s0, b[u].s0, acc[m]);
                acc[m] = mad(a.s1, b[u].s1, acc[m]);
                acc[m] = mad(a.s2, b[u].s2, acc[m]);
                acc[m] = mad(a.s3, b[u].s3, acc[m]);
            }
    }
    for (int m = 0; m < 16; ++m) sums[(c * 16 + m) * 4 + q] = acc[m];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = lid; e < 64 * 16; e += 256) {
        const int cc = e / 16, m = e % 16, n = nb + cc;
        const float4 t = vload4(e, sums);
        if (m < M && n < N) C[z * c_z + m * N + n] = ((t.s0 + t.s1) + t.s2) + t.s3;
    }
}

// B along n (B(k, n) = B[b_off + k*b_k + n]: the previous layer's delta, W [K][N]): item lid takes
// the four columns from n = 4*(group*SK_GROUP + lid), read as float4 when vec (the host found them
// aligned), its 4 x 16 sums over the slice in k order (As[k*16 + m] read at the same k by every item).
// NDRange (ceil(N/(4*SK_GROUP))*SK_GROUP, 1, splits), work-group (SK_GROUP, 1, 1).
__kernel __attribute__((reqd_work_group_size(SK_GROUP, 1, 1))) void gemm_skinny_n(
    int M, int N, int K, int k_len, __global const float* A, int a_off, int a_m, int a_k, __global const float* B,
    int b_off, int b_k, __global float* C, int c_z, int vec) {
    __local float As[16 * (SK_KC + 4)] __attribute__((aligned(16)));
    const int z = (int)get_group_id(2), k0 = z * k_len;
    const int n = 4 * ((int)get_group_id(0) * SK_GROUP + (int)get_local_id(0));
    const int len = min(k_len, K - k0);
    skinny_stage(As, A, a_off, a_m, a_k, M, len, k0, k_len + 4, 0);  // zeros in the 4 rows past the slice
    barrier(CLK_LOCAL_MEM_FENCE);
    if (n >= N) return;
    float acc[4][16];
    for (int c = 0; c < 4; ++c)
        for (int m = 0; m < 16; ++m) acc[c][m] = 0.0f;
    const int cols = min(4, N - n);
    __global const float* b = B + b_off + (size_t)k0 * b_k + n;
    // Four rows of B per round, their loads first.
    for (int kk = 0; kk < len; kk += 4) {
        float4 w[4];
        for (int u = 0; u < 4; ++u) {
            __global const float* row = b + (size_t)(kk + u) * b_k;
            if (kk + u >= len)
                w[u] = (float4)(0.0f);
            else if (vec)
                w[u] = *(__global const float4*)row;
            else
                w[u] = (float4)(row[0], cols > 1 ? row[1] : 0.0f, cols > 2 ? row[2] : 0.0f, cols > 3 ? row[3] : 0.0f);
        }
        for (int u = 0; u < 4; ++u) {
            __local const float* a = As + (kk + u) * 16;
            skinny_mad(acc[0], a, w[u].s0);
            skinny_mad(acc[1], a, w[u].s1);
            skinny_mad(acc[2], a, w[u].s2);
            skinny_mad(acc[3], a, w[u].s3);
        }
    }
    for (int m = 0; m < M; ++m)
        for (int c = 0; c < cols; ++c) C[z * c_z + m * N + n + c] = acc[c][m];
}
#endif

#endif  // LENET5_BATCH
