// Backward kernels (compiled after common.h). Per layer: one launch for the weight and bias
// gradients (summed over the batch in a fixed order) and, except for the first layer, one for
// the previous layer's delta. Both read this layer's delta; the gradients are overwritten.

// Weight and bias gradients of a convolution, each summed over the samples and output positions.
// in [rows][IC][IH][IW], delta [count][OC][OH][OW] -> gW [nconn][K][K], gb [OC].
// conn_out, conn_in [nconn]: each connection's output and input map.
// NDRange ((nconn*K*K + OC) * WG), work-group WG: group g < nconn*K*K owns weight g, each later
// group one bias; its items stride over the (sample, position) pairs, then group_sum adds them.
// scratch: gpu-local __local [WG], otherwise __global [groups * WG].
__kernel void conv_backward_weights(__global const float* in, __global const int* rows, int first,
                                    __global const float* delta, __global float* gW, __global float* gb,
                                    __global const int* conn_out, __global const int* conn_in,
                                    int IC, int IH, int IW, int OC, int OH, int OW, int K, int nconn,
                                    int count, SCRATCH float* scratch) {
    const int g = (int)get_group_id(0), lid = (int)get_local_id(0);
    const int P = OH * OW, n = count * P, nw = nconn * K * K;
    float v = 0.0f;
    if (g < nw) {
        const int j = g / (K * K), ky = g / K % K, kx = g % K;
        const int o = conn_out[j], at = (conn_in[j] * IH + ky) * IW + kx;  // the window's corner
        for (int d = lid; d < n; d += WG) {
            const int s = d / P, p = d - s * P, y = p / OW, x = p - y * OW;
            v += delta[((size_t)s * OC + o) * P + p] * INPUT_ROW(in, rows, first, s, IC * IH * IW)[at + y * IW + x];
        }
    } else {
        const int o = g - nw;
        for (int d = lid; d < n; d += WG) {
            const int s = d / P;
            v += delta[((size_t)s * OC + o) * P + d - s * P];
        }
    }
    v = group_sum(GROUP_SCRATCH(scratch), v);
    if (lid == 0) {
        if (g < nw) gW[g] = v;
        else gb[g - nw] = v;
    }
}

// Coefficient and bias gradients of a KxK subsampling, each summed over samples and positions.
// in [rows][C][IH][IW], delta [count][C][OH][OW] -> gcoef [C], gb [C].
// NDRange (2*C * WG), work-group WG: group c < C owns coef[c], group C+c owns bias[c].
// scratch as for conv_backward_weights.
__kernel void subsample_backward_weights(__global const float* in, __global const int* rows, int first,
                                         __global const float* delta, __global float* gcoef, __global float* gb,
                                         int C, int IH, int IW, int OH, int OW, int K, int count,
                                         SCRATCH float* scratch) {
    const int g = (int)get_group_id(0), lid = (int)get_local_id(0);
    const int c = g % C, P = OH * OW, n = count * P;
    float v = 0.0f;
    for (int d = lid; d < n; d += WG) {
        const int s = d / P, p = d - s * P;
        const float dl = delta[((size_t)s * C + c) * P + p];
        if (g < C) {
            const int y = p / OW, x = p - y * OW;
            __global const float* win = INPUT_ROW(in, rows, first, s, C * IH * IW) + (c * IH + y * K) * IW + x * K;
            float sum = 0.0f;
            for (int ky = 0; ky < K; ++ky)
                for (int kx = 0; kx < K; ++kx) sum += win[ky * IW + kx];
            v += dl * sum;
        } else {
            v += dl;
        }
    }
    v = group_sum(GROUP_SCRATCH(scratch), v);
    if (lid == 0) {
        if (g < C) gcoef[c] = v;
        else gb[c] = v;
    }
}

#ifndef MEM_LOCAL
// Weight and bias gradients of a fully connected layer, each summed over the batch in sample order.
// in [rows][I], delta [count][O] -> gW [O][I], gb [O].
// NDRange (round_up(O*I + O, WG)): item g < O*I owns gW[g / I][g % I], each later item one bias.
__kernel void fc_backward_weights(__global const float* in, __global const int* rows, int first,
                                  __global const float* delta, __global float* gW, __global float* gb,
                                  int I, int O, int count) {
    const int g = (int)get_global_id(0);
    if (g >= O * I + O) return;
    float v = 0.0f;
    if (g < O * I) {
        const int o = g / I, i = g - o * I;
        for (int s = 0; s < count; ++s) v += delta[(size_t)s * O + o] * INPUT_ROW(in, rows, first, s, I)[i];
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
// in [rows][I], delta [count][O] -> gW [O][I], gb [O].
// NDRange (round_up(I, TILE), round_up(O, TILE)), work-group (TILE, TILE): item (i, o) of a block;
// TILE samples at a time of delta and of the inputs go through __local. Items of column i = 0
// also sum the bias.
__kernel void fc_backward_weights(__global const float* in, __global const int* rows, int first,
                                  __global const float* delta, __global float* gW, __global float* gb,
                                  int I, int O, int count) {
    __local float dt[TILE][TILE];  // [sample][o]
    __local float xt[TILE][TILE];  // [sample][i]
    const int li = (int)get_local_id(0), lo = (int)get_local_id(1);
    const int i0 = (int)get_group_id(0) * TILE, o0 = (int)get_group_id(1) * TILE;
    const int i = i0 + li, o = o0 + lo;
    float v = 0.0f, vb = 0.0f;
    for (int s0 = 0; s0 < count; s0 += TILE) {
        // Item (li, lo) loads sample s0+lo of both, at column o0+li and i0+li: coalesced.
        const int s = s0 + lo;
        dt[lo][li] = s < count && o0 + li < O ? delta[(size_t)s * O + o0 + li] : 0.0f;
        xt[lo][li] = s < count && i < I ? INPUT_ROW(in, rows, first, s, I)[i] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < TILE; ++t) {
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
                                  int K, int nconn LOCAL_TILE_ARG) {
    const int e = (int)get_global_id(0), s = (int)get_global_id(1);
    const int out_size = OC * OH * OW;
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
    // The kernel rows/columns that put (y, x) inside the output.
    const int ky0 = max(0, y - OH + 1), ky1 = min(K - 1, y), kx0 = max(0, x - OW + 1), kx1 = min(K - 1, x);
    float sum = 0.0f;
    for (int c = in_begin[i]; c < in_begin[i + 1]; ++c) {
        const int j = in_conn[c];
        const int at = (conn_out[j] * OH + y) * OW + x;  // delta[o][y][x]; the term is at - ky*OW - kx
        for (int ky = ky0; ky <= ky1; ++ky)
            for (int kx = kx0; kx <= kx1; ++kx) sum += dl[at - ky * OW - kx] * w[(j * K + ky) * K + kx];
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
// block; TILE-wide slices of delta and of the weights go through __local.
__kernel void fc_backward_input(__global const float* delta, __global const float* W,
                                __global const float* prev_out, int prev_act, __global float* d_prev,
                                int I, int O, int count) {
    __local float dt[TILE][TILE];  // [sample][o]
    __local float wt[TILE][TILE];  // [o][i]
    const int li = (int)get_local_id(0), ls = (int)get_local_id(1);
    const int i0 = (int)get_group_id(0) * TILE, s0 = (int)get_group_id(1) * TILE;
    const int i = i0 + li, s = s0 + ls;
    float sum = 0.0f;
    for (int o0 = 0; o0 < O; o0 += TILE) {
        // Item (li, ls) loads delta row s at column o0+li and weight row o0+ls at column i: coalesced.
        dt[ls][li] = s < count && o0 + li < O ? delta[(size_t)s * O + o0 + li] : 0.0f;
        wt[ls][li] = o0 + ls < O && i < I ? W[(size_t)(o0 + ls) * I + i] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < TILE; ++t) sum += dt[ls][t] * wt[t][li];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (s < count && i < I) {
        const size_t at = (size_t)s * I + i;
        d_prev[at] = activation_grad(prev_act, prev_out[at]) * sum;
    }
}
#endif
