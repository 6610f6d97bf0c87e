// Backward kernels (compiled after common.h). Per layer: one launch for the weight and bias
// gradients (summed over the batch in a fixed order) and, except for the first layer, one for
// the previous layer's delta. Both read this layer's delta; the gradients are overwritten.

// Weight and bias gradients of a convolution, each summed over the samples and output positions.
// in [count][IC][IH][IW], delta [count][OC][OH][OW] -> gW [nconn][K][K], gb [OC].
// conn_out, conn_in [nconn]: each connection's output and input map.
// NDRange ((nconn*K*K + OC) * REDUCE), work-group REDUCE: group g < nconn*K*K owns weight g, each
// later group one bias; its items split the (sample, position) pairs (see REDUCE_SPAN), then
// group_sum adds them up. scratch: gpu-local __local [REDUCE], otherwise __global [groups * REDUCE].
__kernel __attribute__((reqd_work_group_size(REDUCE, 1, 1))) void conv_backward_weights(
    __global const float* in, __global const float* delta,
    __global float* gW, __global float* gb, __global const int* conn_out, __global const int* conn_in, int IC,
    int IH, int IW, int OC, int OH, int OW, int k_arg, int nconn, int count, SCRATCH float* scratch) {
    const int g = (int)get_group_id(0), lid = (int)get_local_id(0), K = CONV_WINDOW(k_arg);
    const int nw = nconn * K * K, P = OH * OW, span = REDUCE_SPAN(P), lanes = REDUCE_LANES(P), lane = lid / span;
    const bool is_weight = g < nw;
    const int j = g / (K * K), o = is_weight ? conn_out[j] : g - nw;
    const int corner = is_weight ? (conn_in[j] * IH + g / K % K) * IW + g % K : 0;  // the window's corner
    const size_t delta_stride = (size_t)OC * P;
    float v = 0.0f;
    if (lane < lanes) {
        for (int p = lid % span; p < P; p += span) {
            const int y = p / OW, x = p - y * OW, at = corner + y * IW + x;
            __global const float* d = delta + (size_t)o * P + p;
            __global const float* src = in + at;
            const size_t in_stride = (size_t)IC * IH * IW;
#define WEIGHT_TERM(s) (d[(s) * delta_stride] * src[(s) * in_stride])
#define BIAS_TERM(s) d[(s) * delta_stride]
            if (is_weight) SUM_OVER_SAMPLES(v, lane, lanes, count, WEIGHT_TERM);
            else SUM_OVER_SAMPLES(v, lane, lanes, count, BIAS_TERM);
        }
    }
    v = group_sum(GROUP_SCRATCH(scratch), v);
    if (lid == 0) {
        if (is_weight) gW[g] = v;
        else gb[o] = v;
    }
}

// The sum of a KxK window whose first row starts at x (rows IW apart).
inline float window_sum(__global const float* x, int IW, int K) {
    float sum = 0.0f;
    for (int ky = 0; ky < K; ++ky)
        for (int kx = 0; kx < K; ++kx) sum += x[ky * IW + kx];
    return sum;
}

// Coefficient and bias gradients of a KxK subsampling, each summed over samples and positions.
// in [count][C][IH][IW], delta [count][C][OH][OW] -> gcoef [C], gb [C].
// NDRange (2*C * REDUCE), work-group REDUCE: group c < C owns coef[c], group C+c bias[c].
// The items split the domain as in conv_backward_weights; scratch as there.
__kernel __attribute__((reqd_work_group_size(REDUCE, 1, 1))) void subsample_backward_weights(
    __global const float* in, __global const float* delta,
    __global float* gcoef, __global float* gb, int C, int IH, int IW, int OH, int OW, int K, int count,
    SCRATCH float* scratch) {
    const int g = (int)get_group_id(0), lid = (int)get_local_id(0);
    const int c = g % C, P = OH * OW, span = REDUCE_SPAN(P), lanes = REDUCE_LANES(P), lane = lid / span;
    const size_t delta_stride = (size_t)C * P;
    float v = 0.0f;
    if (lane < lanes) {
        for (int p = lid % span; p < P; p += span) {
            const int y = p / OW, x = p - y * OW, at = (c * IH + y * K) * IW + x * K;  // the window
            __global const float* d = delta + (size_t)c * P + p;
            __global const float* src = in + at;
            const size_t in_stride = (size_t)C * IH * IW;
#define COEF_TERM(s) (d[(s) * delta_stride] * window_sum(src + (s) * in_stride, IW, K))
            if (g < C) SUM_OVER_SAMPLES(v, lane, lanes, count, COEF_TERM);
            else SUM_OVER_SAMPLES(v, lane, lanes, count, BIAS_TERM);
        }
    }
    v = group_sum(GROUP_SCRATCH(scratch), v);
    if (lid == 0) {
        if (g < C) gcoef[c] = v;
        else gb[c] = v;
    }
}
#undef WEIGHT_TERM
#undef BIAS_TERM
#undef COEF_TERM

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
        for (int s = 0; s < count; ++s) v += delta[(size_t)s * O + o] * in[(size_t)s * I + i];
        gW[g] = v;
    } else {
        const int o = g - O * I;
        for (int s = 0; s < count; ++s) v += delta[(size_t)s * O + o];
        gb[o] = v;
    }
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
    for (int o = 0; o < O; ++o) sum += W[(size_t)o * I + i] * delta[(size_t)s * O + o];
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
