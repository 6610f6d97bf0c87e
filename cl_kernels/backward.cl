// Backward kernels (compiled after common.h). Per layer: one launch for the weight and bias
// gradients (summed over the batch in a fixed order) and, except for the first layer, one for
// the previous layer's delta. Both read this layer's delta; the gradients are overwritten.

// The weight gradients of convolutions and subsamplings take two launches: stage 1 (per layer)
// sums over chunks of `chunk` samples into partial [chunks][n], at the parameters' offsets within
// a run of such layers in the device layout; stage 2 (sum_partials, once per run) adds the chunks
// in order. The chunks make enough work-groups, and each group reads its maps once for all taps.

// Stage 1 for a convolution. in [count][IC][IH][IW], delta [count][OC][OH][OW] -> partial: chunk c's
// sum for weight (j, ky, kx) at c*n + w_at + (j*K + ky)*K + kx, for bias o at c*n + b_at + o.
// conn_begin [OC+1], conn_out, conn_in [nconn]: network.h's lists.
// NDRange (nconn * chunks * REDUCE), work-group REDUCE: group (j, c) = (g % nconn, g / nconn). Its
// items are (tap, lane): taps 0..K*K-1 are the weights of connection j, tap K*K the bias of its
// output map (summed by the map's first connection); the lanes split the output positions.
// scratch: gpu-local __local [REDUCE], otherwise __global [groups * REDUCE]. gpu-local stages
// each sample's delta and input map in `tile` (OH*OW + IH*IW floats).
__kernel __attribute__((reqd_work_group_size(REDUCE, 1, 1))) void conv_weight_partials(
    __global const float* in, __global const float* delta, __global float* partial, int n, int w_at, int b_at,
    __global const int* conn_begin, __global const int* conn_out, __global const int* conn_in, int IC, int IH,
    int IW, int OC, int OH, int OW, int k_arg, int nconn, int count, int chunk,
    SCRATCH float* scratch LOCAL_TILE_ARG) {
    const int K = CONV_WINDOW(k_arg), taps = K * K + 1, lanes = REDUCE / taps;
    const int g = (int)get_group_id(0), lid = (int)get_local_id(0), t = lid % taps, lane = lid / taps;
    const int j = g % nconn, c = g / nconn, o = conn_out[j], i = conn_in[j], P = OH * OW;
    const bool bias = t == K * K, active = lane < lanes && (!bias || conn_begin[o] == j);
    const int window = bias ? 0 : t / K * IW + t % K;  // tap (ky, kx) within the input map
    float v = 0.0f;
    for (int s = c * chunk; s < min(count, (c + 1) * chunk); ++s) {
#ifdef MEM_LOCAL
        __local float* d = tile;
        __local float* x = tile + P;
        barrier(CLK_LOCAL_MEM_FENCE);  // the previous sample's maps are no longer read
        copy_to_local(d, delta + ((size_t)s * OC + o) * P, P);
        copy_to_local(x, in + ((size_t)s * IC + i) * IH * IW, IH * IW);
        barrier(CLK_LOCAL_MEM_FENCE);
#else
        __global const float* d = delta + ((size_t)s * OC + o) * P;
        __global const float* x = in + ((size_t)s * IC + i) * IH * IW;
#endif
        // Output (y, x) pairs with input (y + ky, x + kx), at p + y*(IW - OW) + window.
#define WEIGHT_TERM(p) (d[p] * x[(p) + (p) / OW * (IW - OW) + window])
#define BIAS_TERM(p) d[p]
        if (active) {
            if (bias) SUM_STRIDED(v, lane, lanes, P, BIAS_TERM);
            else SUM_STRIDED(v, lane, lanes, P, WEIGHT_TERM);
        }
    }
    v = tap_sum(GROUP_SCRATCH(scratch), v, taps, lanes);
    if (lid < taps && active) {
        __global float* out = partial + (size_t)c * n;
        if (bias) out[b_at + o] = v;
        else out[w_at + j * K * K + t] = v;
    }
}

// Stage 1 for a KxK subsampling. in [count][C][IH][IW], delta [count][C][OH][OW] -> partial: chunk
// ch's sum for coef[c] at ch*n + w_at + c, for bias[c] at ch*n + b_at + c.
// NDRange (C * chunks * REDUCE), work-group REDUCE: group (c, ch) = (g % C, g / C); its items are
// (tap, lane) with tap 0 the coefficient and tap 1 the bias. scratch and tile as for
// conv_weight_partials.
__kernel __attribute__((reqd_work_group_size(REDUCE, 1, 1))) void subsample_weight_partials(
    __global const float* in, __global const float* delta, __global float* partial, int n, int w_at, int b_at,
    int C, int IH, int IW, int OH, int OW, int K, int count, int chunk, SCRATCH float* scratch LOCAL_TILE_ARG) {
    const int taps = 2, lanes = REDUCE / taps;
    const int g = (int)get_group_id(0), lid = (int)get_local_id(0), t = lid % taps, lane = lid / taps;
    const int c = g % C, ch = g / C, P = OH * OW;
    float v = 0.0f;
    for (int s = ch * chunk; s < min(count, (ch + 1) * chunk); ++s) {
#ifdef MEM_LOCAL
        __local float* d = tile;
        __local float* x = tile + P;
        barrier(CLK_LOCAL_MEM_FENCE);  // the previous sample's maps are no longer read
        copy_to_local(d, delta + ((size_t)s * C + c) * P, P);
        copy_to_local(x, in + ((size_t)s * C + c) * IH * IW, IH * IW);
        barrier(CLK_LOCAL_MEM_FENCE);
#else
        __global const float* d = delta + ((size_t)s * C + c) * P;
        __global const float* x = in + ((size_t)s * C + c) * IH * IW;
#endif
        if (t == 0) {
            for (int p = lane; p < P; p += lanes) {
                const int y = p / OW, xo = p - y * OW;
                float sum = 0.0f;  // the KxK window under output (y, xo)
                for (int ky = 0; ky < K; ++ky)
                    for (int kx = 0; kx < K; ++kx) sum += x[(y * K + ky) * IW + xo * K + kx];
                v += d[p] * sum;
            }
        } else {
            SUM_STRIDED(v, lane, lanes, P, BIAS_TERM);
        }
    }
    v = tap_sum(GROUP_SCRATCH(scratch), v, taps, lanes);
    if (lid < taps) partial[(size_t)ch * n + (t == 0 ? w_at : b_at) + c] = v;
}
#undef WEIGHT_TERM
#undef BIAS_TERM

// Stage 2: grads[begin + q] = sum over the chunks c (in order) of partial[c*n + q].
// NDRange (round_up(n, WG)): one item per parameter of the run (n: its span in the device layout).
__kernel void sum_partials(__global const float* partial, int n, int count, int chunk, __global float* grads,
                           int begin) {
    const int q = (int)get_global_id(0);
    if (q >= n) return;
    float sum = 0.0f;
#define CHUNK_TERM(c) partial[(size_t)(c) * n + q]
    SUM_STRIDED(sum, 0, 1, (count + chunk - 1) / chunk, CHUNK_TERM);
#undef CHUNK_TERM
    grads[begin + q] = sum;
}

#ifndef MEM_LOCAL
// Weight and bias gradients of a fully connected layer, each summed over the batch in sample order.
// in [count][I], delta [count][O] -> gW [O][I], gb [O].
// NDRange (round_up(O*I + O, WG)): item g < O*I owns gW[g / I][g % I], each later item one bias.
__kernel void fc_backward_weights(__global const float* in,
                                  __global const float* delta, __global float* gW, __global float* gb,
                                  int I, int O, int count) {
    const int g = (int)get_global_id(0);
    if (g >= O * I + O) return;
    float v = 0.0f;
    if (g < O * I) {
        const int o = g / I, i = g - o * I;
#define GRAD_TERM(s) (delta[(size_t)(s) * O + o] * in[(size_t)(s) * I + i])
        SUM_STRIDED(v, 0, 1, count, GRAD_TERM);
        gW[g] = v;
    } else {
        const int o = g - O * I;
#define BIAS_GRAD_TERM(s) delta[(size_t)(s) * O + o]
        SUM_STRIDED(v, 0, 1, count, BIAS_GRAD_TERM);
        gb[o] = v;
    }
#undef GRAD_TERM
#undef BIAS_GRAD_TERM
}
#else
// Weight and bias gradients of a fully connected layer as a tiled matrix product over the batch:
// gW[o][i] = sum_s delta[s][o] in[s][i], gb[o] = sum_s delta[s][o].
// in [count][I], delta [count][O] -> gW [O][I], gb [O].
// NDRange (round_up(I, TILE), round_up(O, TILE)), work-group (TILE, TILE): item (i, o) of a block;
// DEPTH samples at a time of delta and of the inputs go through __local. Items of column i = 0
// also sum the bias.
__kernel void fc_backward_weights(__global const float* in,
                                  __global const float* delta, __global float* gW, __global float* gb,
                                  int I, int O, int count) {
    __local float dt[DEPTH][TILE];  // [sample][o]
    __local float xt[DEPTH][TILE];  // [sample][i]
    const int li = (int)get_local_id(0), lo = (int)get_local_id(1);
    const int i0 = (int)get_group_id(0) * TILE, o0 = (int)get_group_id(1) * TILE;
    const int i = i0 + li, o = o0 + lo;
    float v = 0.0f, vb = 0.0f;
    for (int s0 = 0; s0 < count; s0 += DEPTH) {
        // Item (li, lo) loads samples s0+lo, s0+lo+TILE, ... of both, at column o0+li and i: coalesced.
        for (int t = lo; t < DEPTH; t += TILE) {
            const int s = s0 + t;
            dt[t][li] = s < count && o0 + li < O ? delta[(size_t)s * O + o0 + li] : 0.0f;
            xt[t][li] = s < count && i < I ? in[(size_t)s * I + i] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < DEPTH; ++t) {
            v += dt[t][lo] * xt[t][li];
            vb += dt[t][lo];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (o < O && i < I) gW[(size_t)o * I + i] = v;
    if (o < O && i == 0) gb[o] = vb;
}
#endif

// The previous layer's delta through a convolution:
// d_prev[s][i][y][x] = act'(prev_out[s][i][y][x]) * sum over the connections j reading map i and
// the (ky, kx) with (y-ky, x-kx) inside the output of delta[s][conn_out[j]][y-ky][x-kx] * W[j][ky][kx].
// delta [count][OC][OH][OW], W [nconn][K][K], prev_out [count][IC][IH][IW] -> d_prev (same shape).
// in_begin [IC+1], in_conn [nconn]: the connections reading input map i are
// in_conn[in_begin[i] .. in_begin[i+1]) (the inverse of network.h's lists, built by the host).
// NDRange (round_up(IC*IH*IW, WG), count), work-group (WG, 1): one item per input element.
// gpu-local: the group first stages its sample's delta and the weights in `tile`
// (OC*OH*OW + nconn*K*K floats).
__kernel void conv_backward_input(__global const float* delta, WEIGHTS const float* W,
                                  __global const float* prev_out, int prev_act, __global float* d_prev,
                                  __global const int* in_begin, __global const int* in_conn,
                                  __global const int* conn_out, int IC, int IH, int IW, int OC, int OH, int OW,
                                  int k_arg, int nconn LOCAL_TILE_ARG) {
    const int e = (int)get_global_id(0), s = (int)get_global_id(1);
    const int K = CONV_WINDOW(k_arg), out_size = OC * OH * OW;
#ifdef MEM_LOCAL
    __local float* dl = tile;
    __local float* w = dl + out_size;
    copy_to_local(dl, delta + (size_t)s * out_size, out_size);
    copy_to_local(w, W, nconn * K * K);
    barrier(CLK_LOCAL_MEM_FENCE);
#else
    __global const float* dl = delta + (size_t)s * out_size;
    WEIGHTS const float* w = W;
#endif
    const int in_size = IC * IH * IW;
    if (e >= in_size) return;
    const int i = e / (IH * IW), y = e / IW % IH, x = e % IW;
    float sum = 0.0f;
    for (int c = in_begin[i]; c < in_begin[i + 1]; ++c) {
        const int j = in_conn[c];
        const int at = (conn_out[j] * OH + y) * OW + x;  // delta[o][y][x]; the term is at - ky*OW - kx
        for (int ky = 0; ky < K; ++ky) {
            if (y - ky < 0 || y - ky >= OH) continue;
            for (int kx = 0; kx < K; ++kx)
                if (x - kx >= 0 && x - kx < OW) sum += dl[at - ky * OW - kx] * w[(j * K + ky) * K + kx];
        }
    }
    const size_t at = (size_t)s * in_size + e;
    d_prev[at] = activation_grad(prev_act, prev_out[at]) * sum;
}

// The previous layer's delta through a KxK subsampling:
// d_prev[s][c][y][x] = act'(prev_out[s][c][y][x]) * coef[c] * delta[s][c][y/K][x/K].
// delta [count][C][OH][OW], coef [C], prev_out [count][C][IH][IW] -> d_prev (same shape).
// NDRange (round_up(C*IH*IW, WG), count): one item per input element.
__kernel void subsample_backward_input(__global const float* delta, WEIGHTS const float* coef,
                                       __global const float* prev_out, int prev_act, __global float* d_prev,
                                       int C, int IH, int IW, int OH, int OW, int K) {
    const int e = (int)get_global_id(0), s = (int)get_global_id(1);
    if (e >= C * IH * IW) return;
    const int c = e / (IH * IW), y = e / IW % IH, x = e % IW;
    const size_t at = (size_t)s * C * IH * IW + e;
    const float d = delta[(((size_t)s * C + c) * OH + y / K) * OW + x / K];
    d_prev[at] = activation_grad(prev_act, prev_out[at]) * coef[c] * d;
}

#ifndef MEM_LOCAL
// The previous layer's delta through a fully connected layer:
// d_prev[s][i] = act'(prev_out[s][i]) * sum_o W[o][i] delta[s][o].
// delta [count][O], W [O][I], prev_out [count][I] -> d_prev [count][I].
// NDRange (round_up(count, n), I): one item per element, samples along dimension 0 so that the
// items of a group read the same weight at the same time.
__kernel void fc_backward_input(__global const float* delta, WEIGHTS const float* W,
                                __global const float* prev_out, int prev_act, __global float* d_prev,
                                int I, int O, int count) {
    const int s = (int)get_global_id(0), i = (int)get_global_id(1);
    if (s >= count) return;
    float sum = 0.0f;
#define INPUT_GRAD_TERM(o) (W[(size_t)(o) * I + i] * delta[(size_t)s * O + (o)])
    SUM_STRIDED(sum, 0, 1, O, INPUT_GRAD_TERM);
#undef INPUT_GRAD_TERM
    const size_t at = (size_t)s * I + i;
    d_prev[at] = activation_grad(prev_act, prev_out[at]) * sum;
}
#else
// The previous layer's delta through a fully connected layer, as a tiled matrix product:
// d_prev[s][i] = act'(prev_out[s][i]) * sum_o delta[s][o] W[o][i].
// delta [count][O], W [O][I], prev_out [count][I] -> d_prev [count][I].
// NDRange (round_up(I, TILE), round_up(count, TILE)), work-group (TILE, TILE): item (i, s) of a
// block; DEPTH-wide slices of delta and of the weights go through __local.
__kernel void fc_backward_input(__global const float* delta, __global const float* W,
                                __global const float* prev_out, int prev_act, __global float* d_prev,
                                int I, int O, int count) {
    __local float dt[TILE][DEPTH];  // [sample][o]
    __local float wt[DEPTH][TILE];  // [o][i]
    const int li = (int)get_local_id(0), ls = (int)get_local_id(1);
    const int i0 = (int)get_group_id(0) * TILE, s0 = (int)get_group_id(1) * TILE;
    const int i = i0 + li, s = s0 + ls;
    float sum = 0.0f;
    for (int o0 = 0; o0 < O; o0 += DEPTH) {
        // Item (li, ls) loads delta row s at columns o0+li, o0+li+TILE, ... and weight rows
        // o0+ls, o0+ls+TILE, ... at column i: coalesced.
        for (int t = li; t < DEPTH; t += TILE)
            dt[ls][t] = s < count && o0 + t < O ? delta[(size_t)s * O + o0 + t] : 0.0f;
        for (int t = ls; t < DEPTH; t += TILE)
            wt[t][li] = o0 + t < O && i < I ? W[(size_t)(o0 + t) * I + i] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < DEPTH; ++t) sum += dt[ls][t] * wt[t][li];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (s < count && i < I) {
        const size_t at = (size_t)s * I + i;
        d_prev[at] = activation_grad(prev_act, prev_out[at]) * sum;
    }
}
#endif
