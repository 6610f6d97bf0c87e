// A convolution and the subsampling after it (C1+S2, C3+S4) run as one fused pair: one launch
// forward, one backward (compiled after common.h). The pair's tensors:
//   in       [count][IC][IH][IW]   the pair's input (the previous pool's output, or the batch)
//   conv_out [count][OC][CH][CW]   the convolution's output, after its activation
//   pool_out [count][OC][PH][PW]   the subsampling's output (PK x PK windows), after its activation
// The convolution reads the input maps of network.h's connection lists: output map o reads maps
// conn_in[conn_begin[o] .. conn_begin[o+1]), connection j has weights W[j][K][K].

// Forward: each item computes the PK x PK convolution outputs under one pooled output, writes
// them, and pools them: pool_out = act(coef[o] * sum + pool_bias[o]).
// NDRange (round_up(OC*PH*PW, WG), count), work-group (WG, 1): one item per pooled output.
// gpu-local: the group first stages its sample's input maps, the weights and the biases in
// `tile` (IC*IH*IW + connections*K*K + OC floats).
__kernel void conv_pool_forward(__global const float* in, WEIGHTS const float* W, WEIGHTS const float* bias,
                                WEIGHTS const float* coef, WEIGHTS const float* pool_bias, __global float* conv_out,
                                __global float* pool_out, __global const int* conn_begin, __global const int* conn_in,
                                int IC, int IH, int IW, int OC, int CH, int CW, int k_arg, int conv_act, int PK,
                                int PH, int PW, int pool_act LOCAL_TILE_ARG) {
    const int e = (int)get_global_id(0), s = (int)get_global_id(1);
    const int K = CONV_WINDOW(k_arg), in_size = IC * IH * IW;
#ifdef MEM_LOCAL
    const int nw = conn_begin[OC] * K * K;
    __local float* x = tile;
    __local float* w = x + in_size;
    __local float* b = w + nw;
    copy_to_local(x, in + (size_t)s * in_size, in_size);
    copy_to_local(w, W, nw);
    copy_to_local(b, bias, OC);
    barrier(CLK_LOCAL_MEM_FENCE);
#else
    __global const float* x = in + (size_t)s * in_size;
    WEIGHTS const float* w = W;
    WEIGHTS const float* b = bias;
#endif
    if (e >= OC * PH * PW) return;
    const int o = e / (PH * PW), py = e / PW % PH, px = e % PW;
    __global float* y = conv_out + ((size_t)s * OC + o) * CH * CW;
    float pooled = 0.0f;
    for (int dy = 0; dy < PK; ++dy)
        for (int dx = 0; dx < PK; ++dx) {
            const int cy = py * PK + dy, cx = px * PK + dx;
            float sum = b[o];
            for (int j = conn_begin[o]; j < conn_begin[o + 1]; ++j) {
                const int at = (conn_in[j] * IH + cy) * IW + cx;
                for (int ky = 0; ky < K; ++ky)
                    for (int kx = 0; kx < K; ++kx) sum += x[at + ky * IW + kx] * w[(j * K + ky) * K + kx];
            }
            const float v = activate(conv_act, sum);
            y[cy * CW + cx] = v;
            pooled += v;
        }
    pool_out[(size_t)s * OC * PH * PW + e] = activate(pool_act, coef[o] * pooled + pool_bias[o]);
}

// The sum of the PK x PK window of map y (CW wide) under pooled output q (PW wide).
inline float window_sum(__global const float* y, int q, int CW, int PW, int PK) {
    const int py = q / PW, px = q - py * PW;
    float sum = 0.0f;
    for (int dy = 0; dy < PK; ++dy)
        for (int dx = 0; dx < PK; ++dx) sum += y[(py * PK + dy) * CW + px * PK + dx];
    return sum;
}

// Where the backward pass keeps a sample's input maps, convolution delta and weights: __local in
// gpu-local, else __global (the input and weights where they are, the delta in `dconv`).
#ifdef MEM_LOCAL
#define STAGE __local
#else
#define STAGE __global
#endif

// Backward, one work-group (REDUCE items) per sample, from dpool [count][OC][PH][PW] (dLoss/d the
// pool's pre-activation). In three passes separated by barriers:
// 1. the convolution's delta: dconv[o][cy][cx] = act'(conv_out) * coef[o] * dpool[o][cy/PK][cx/PK];
// 2. the sample's share of every parameter gradient of the pair ("taps": connection j's weight
//    (ky, kx), then per map the conv bias, the pool coefficient, the pool bias), written to
//    partial[s*n + at] (w_at, b_at, coef_at, pbias_at: where each kind starts); sum_partials
//    adds the samples up in order. When there are fewer taps than items, `lanes` items share a tap
//    and tap_sum adds their sums;
// 3. unless has_prev is 0, the previous layer's delta: d_prev[i][y][x] = act'(in[i][y][x]) * sum
//    over the connections j reading map i and the (ky, kx) inside the output of
//    dconv[conn_out[j]][y-ky][x-kx] * W[j][ky][kx] (in_begin, in_conn: the connections reading
//    each input map, built by the host).
// NDRange (count * REDUCE), work-group REDUCE. scratch: gpu-local __local [REDUCE], otherwise
// __global [count * REDUCE]. gpu-local stages in `tile` (IC*IH*IW + OC*CH*CW + connections*K*K floats).
__kernel __attribute__((reqd_work_group_size(REDUCE, 1, 1))) void conv_pool_backward(
    __global const float* in, __global const float* conv_out, __global const float* dpool, WEIGHTS const float* W,
    WEIGHTS const float* coef, __global float* dconv, __global float* partial, int n, int w_at, int b_at, int coef_at,
    int pbias_at, __global const int* conn_out, __global const int* conn_in, __global const int* in_begin,
    __global const int* in_conn, int IC, int IH, int IW, int OC, int CH, int CW, int k_arg, int nconn, int conv_act,
    int PK, int PH, int PW, int prev_act, int has_prev, __global float* d_prev, SCRATCH float* scratch LOCAL_TILE_ARG) {
    const int s = (int)get_group_id(0), lid = (int)get_local_id(0);
    const int K = CONV_WINDOW(k_arg), KK = K * K, nw = nconn * KK;
    const int in_size = IC * IH * IW, C = CH * CW, P = PH * PW;
    __global const float* y = conv_out + (size_t)s * OC * C;
    __global const float* dp = dpool + (size_t)s * OC * P;
#ifdef MEM_LOCAL
    __local float* x = tile;
    __local float* dc = x + in_size;
    __local float* w = dc + OC * C;
    copy_to_local(x, in + (size_t)s * in_size, in_size);
    copy_to_local(w, W, nw);
#else
    __global const float* x = in + (size_t)s * in_size;
    __global float* dc = dconv + (size_t)s * OC * C;
    WEIGHTS const float* w = W;
#endif
    for (int e = lid; e < OC * C; e += REDUCE) {
        const int o = e / C, cy = e / CW % CH, cx = e % CW;
        dc[e] = activation_grad(conv_act, y[e]) * coef[o] * dp[(o * PH + cy / PK) * PW + cx / PK];
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);

    // Output (cy, cx) = p pairs with input (cy + ky, cx + kx), at p + cy*(IW - CW) + window.
#define WEIGHT_TERM(p) (d[p] * xi[(p) + (p) / CW * (IW - CW) + window])
#define SUM_TERM(p) d[p]
#define COEF_TERM(q) (dp[o * P + (q)] * window_sum(y + o * C, q, CW, PW, PK))
#define POOL_TERM(q) dp[o * P + (q)]
    const int taps = nw + 3 * OC, per_round = min(taps, REDUCE), lanes = REDUCE / per_round;
    __global float* out = partial + (size_t)s * n;
    for (int t0 = 0; t0 < taps; t0 += per_round) {  // the same rounds for every item: tap_sum has barriers
        const int t = t0 + lid % per_round, lane = lid / per_round;
        float v = 0.0f;
        int at = -1;
        if (t < taps && lane < lanes) {
            if (t < nw) {
                const int j = t / KK, k = t % KK, window = k / K * IW + k % K;
                STAGE const float* d = dc + conn_out[j] * C;
                STAGE const float* xi = x + conn_in[j] * IH * IW;
                SUM_STRIDED(v, lane, lanes, C, WEIGHT_TERM);
                at = w_at + t;
            } else if (t < nw + OC) {
                const int o = t - nw;
                STAGE const float* d = dc + o * C;
                SUM_STRIDED(v, lane, lanes, C, SUM_TERM);
                at = b_at + o;
            } else if (t < nw + 2 * OC) {
                const int o = t - nw - OC;
                SUM_STRIDED(v, lane, lanes, P, COEF_TERM);
                at = coef_at + o;
            } else {
                const int o = t - nw - 2 * OC;
                SUM_STRIDED(v, lane, lanes, P, POOL_TERM);
                at = pbias_at + o;
            }
        }
        v = tap_sum(GROUP_SCRATCH(scratch), v, per_round, lanes);
        if (lane == 0 && at >= 0) out[at] = v;
        barrier(SCRATCH_FENCE);  // the next round reuses the scratch
    }
#undef WEIGHT_TERM
#undef SUM_TERM
#undef COEF_TERM
#undef POOL_TERM

    if (!has_prev) return;
    for (int e = lid; e < in_size; e += REDUCE) {
        const int i = e / (IH * IW), iy = e / IW % IH, ix = e % IW;
        float sum = 0.0f;
        for (int c = in_begin[i]; c < in_begin[i + 1]; ++c) {
            const int j = in_conn[c];
            const int at = (conn_out[j] * CH + iy) * CW + ix;  // dconv[o][iy][ix]; the term is at - ky*CW - kx
            for (int ky = 0; ky < K; ++ky) {
                if (iy - ky < 0 || iy - ky >= CH) continue;
                for (int kx = 0; kx < K; ++kx)
                    if (ix - kx >= 0 && ix - kx < CW) sum += dc[at - ky * CW - kx] * w[(j * K + ky) * K + kx];
            }
        }
        d_prev[(size_t)s * in_size + e] = activation_grad(prev_act, x[e]) * sum;
    }
}
#undef STAGE
