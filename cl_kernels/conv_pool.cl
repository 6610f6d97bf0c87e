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

// Backward from dpool [count][OC][PH][PW] (dLoss/d the pool's pre-activation). The convolution's
// delta is dconv[o][cy][cx] = act'(conv_out) * coef[o] * dpool[o][cy/PK][cx/PK].
// NDRange (ceil(count / chunk) * G * REDUCE), G = OC + (has_prev ? IC : 0), work-group REDUCE:
// group g works on the samples of chunk c = g / G (chunk samples from c * chunk), and r = g % G:
// - r < OC: the chunk's share of the gradients of output map o = r ("taps": the weights (ky, kx)
//   of its connections, then its conv bias, pool coefficient and pool bias), written to
//   partial[c*n + at] (w_at, b_at, coef_at, pbias_at: where each kind starts in the run);
//   sum_partials adds the chunks up in order. When there are fewer taps than items, `lanes`
//   items share a tap and tap_sum adds their sums;
// - r >= OC: the previous layer's delta on input map i = r - OC: d_prev[i][y][x] =
//   act'(in[i][y][x]) * sum over the connections j reading map i and the (ky, kx) inside the
//   output of dconv[conn_out[j]][y-ky][x-kx] * W[j][ky][kx] (in_begin, in_conn: the connections
//   reading each input map, built by the host).
// Per sample, a group first computes what it reads many times into its `tile`: for taps, dconv,
// dpool * conv_out (over the conv positions) and dpool of map o; for d_prev, dconv of every map.
// gpu-local also stages the input maps of o's connections, and the weights, there.
// scratch and tile: gpu-local __local [REDUCE] and [tile_floats], otherwise __global slices of
// that size per group.
__kernel __attribute__((reqd_work_group_size(REDUCE, 1, 1))) void conv_pool_backward(
    __global const float* in, __global const float* conv_out, __global const float* dpool, WEIGHTS const float* W,
    WEIGHTS const float* coef, __global float* partial, int n, int w_at, int b_at, int coef_at, int pbias_at,
    __global const int* conn_begin, __global const int* conn_out, __global const int* conn_in,
    __global const int* in_begin, __global const int* in_conn, int IC, int IH, int IW, int OC, int CH, int CW, int k_arg,
    int conv_act, int PK, int PH, int PW, int prev_act, int has_prev, __global float* d_prev, int count, int chunk,
    SCRATCH float* scratch, SCRATCH float* tiles, int tile_floats) {
    const int G = OC + (has_prev ? IC : 0), c = (int)get_group_id(0) / G, r = (int)get_group_id(0) % G;
    const int lid = (int)get_local_id(0), K = CONV_WINDOW(k_arg), KK = K * K;
    const int M = IH * IW, C = CH * CW, P = PH * PW, s_end = min(count, (c + 1) * chunk);
    SCRATCH float* tile = GROUP_SCRATCH(tiles, tile_floats);
    __global const float* x;
    __global const float* y;
    __global const float* dp;
#define SAMPLE(s) (x = in + (size_t)(s) * IC * M, y = conv_out + (size_t)(s) * OC * C, dp = dpool + (size_t)(s) * OC * P)
    // The pooled output over conv position p (of a CH x CW map).
#define POOL_AT(p) ((p) / CW / PK * PW + (p) % CW / PK)
    if (r < OC) {
        const int o = r, j0 = conn_begin[o], nj = conn_begin[o + 1] - j0;
        SCRATCH float* dc = tile;     // [C] dconv of map o
        SCRATCH float* py = dc + C;   // [C] dpool (over p) * conv_out
        SCRATCH float* dpo = py + C;  // [P] dpool of map o
#ifdef MEM_LOCAL
        __local float* xs = dpo + P;  // [nj][M] the input maps of o's connections
#define STAGE_INPUTS() for (int e = lid; e < nj * M; e += REDUCE) xs[e] = x[conn_in[j0 + e / M] * M + e % M]
#define XIN(jj, at) xs[(jj) * M + (at)]
#else
#define STAGE_INPUTS()
#define XIN(jj, at) x[conn_in[j0 + (jj)] * M + (at)]
#endif
        // Conv output p = (cy, cx) pairs with input (cy + ky, cx + kx), at p + cy*(IW - CW) + window.
#define WEIGHT_TERM(p) (dc[p] * XIN(jj, (p) + (p) / CW * (IW - CW) + window))
#define DC_TERM(p) dc[p]
#define PY_TERM(p) py[p]
#define DPO_TERM(q) dpo[q]
        const int taps = nj * KK + 3, per_round = min(taps, REDUCE), lanes = REDUCE / per_round;
        __global float* out = partial + (size_t)c * n;
        for (int t0 = 0; t0 < taps; t0 += per_round) {  // the same rounds for every item: tap_sum has barriers
            const int t = t0 + lid % per_round, lane = lid / per_round;
            const bool active = t < taps && lane < lanes;
            float v = 0.0f;
            int at = -1;
            for (int s = c * chunk; s < s_end; ++s) {
                SAMPLE(s);
                barrier(SCRATCH_FENCE);  // the previous sample's tile is no longer read
                for (int p = lid; p < C; p += REDUCE) {
                    const float d = dp[o * P + POOL_AT(p)], yp = y[o * C + p];
                    dc[p] = activation_grad(conv_act, yp) * coef[o] * d;
                    py[p] = d * yp;
                }
                for (int q = lid; q < P; q += REDUCE) dpo[q] = dp[o * P + q];
                STAGE_INPUTS();
                barrier(SCRATCH_FENCE);
                if (!active) continue;
                if (t < nj * KK) {
                    const int jj = t / KK, k = t % KK, window = k / K * IW + k % K;
                    SUM_STRIDED(v, lane, lanes, C, WEIGHT_TERM);
                    at = w_at + (j0 + jj) * KK + k;
                } else if (t == nj * KK) {
                    SUM_STRIDED(v, lane, lanes, C, DC_TERM);
                    at = b_at + o;
                } else if (t == nj * KK + 1) {
                    SUM_STRIDED(v, lane, lanes, C, PY_TERM);
                    at = coef_at + o;
                } else {
                    SUM_STRIDED(v, lane, lanes, P, DPO_TERM);
                    at = pbias_at + o;
                }
            }
            v = tap_sum(GROUP_SCRATCH(scratch, REDUCE), v, per_round, lanes);
            if (lane == 0 && at >= 0) out[at] = v;
            barrier(SCRATCH_FENCE);  // the next round reuses the scratch
        }
#undef STAGE_INPUTS
#undef XIN
#undef WEIGHT_TERM
#undef DC_TERM
#undef PY_TERM
#undef DPO_TERM
    } else {
        const int i = r - OC;
        SCRATCH float* dc = tile;  // [OC][C] dconv of every map
#ifdef MEM_LOCAL
        __local float* w = dc + OC * C;
        copy_to_local(w, W, conn_begin[OC] * KK);
#else
        WEIGHTS const float* w = W;
#endif
        for (int s = c * chunk; s < s_end; ++s) {
            SAMPLE(s);
            barrier(SCRATCH_FENCE);  // the previous sample's dconv is no longer read
            for (int e = lid; e < OC * C; e += REDUCE)
                dc[e] = activation_grad(conv_act, y[e]) * coef[e / C] * dp[e / C * P + POOL_AT(e % C)];
            barrier(SCRATCH_FENCE);
            for (int e = lid; e < M; e += REDUCE) {
                const int iy = e / IW, ix = e % IW;
                float sum = 0.0f;
                for (int q = in_begin[i]; q < in_begin[i + 1]; ++q) {
                    const int j = in_conn[q], at = (conn_out[j] * CH + iy) * CW + ix;  // minus ky*CW + kx
                    for (int ky = 0; ky < K; ++ky) {
                        if (iy - ky < 0 || iy - ky >= CH) continue;
                        for (int kx = 0; kx < K; ++kx)
                            if (ix - kx >= 0 && ix - kx < CW) sum += dc[at - ky * CW - kx] * w[(j * K + ky) * K + kx];
                    }
                }
                d_prev[((size_t)s * IC + i) * M + e] = activation_grad(prev_act, x[i * M + e]) * sum;
            }
        }
    }
#undef SAMPLE
#undef POOL_AT
}
