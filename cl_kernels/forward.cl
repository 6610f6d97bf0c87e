// Forward kernels, one launch per layer over the whole batch (compiled after common.h).
// Every forward kernel starts with (in, rows, first): see INPUT_ROW.

// Convolution (stride 1, valid) over each output map's connections, plus bias, then the activation.
// in [rows][IC][IH][IW], W [connections][K][K], bias [OC] -> out [count][OC][OH][OW].
// conn_begin [OC+1], conn_in [connections]: network.h's lists (output map o reads input maps
// conn_in[conn_begin[o] .. conn_begin[o+1])).
// NDRange (round_up(OC*OH*OW, WG), count), work-group (WG, 1): one item per output element.
// gpu-local: the group first stages its sample's input maps, the weights and the biases in
// `tile` (IC*IH*IW + connections*K*K + OC floats).
__kernel void conv_forward(__global const float* in, __global const int* rows, int first,
                           WEIGHTS const float* W, WEIGHTS const float* bias, __global float* out,
                           __global const int* conn_begin, __global const int* conn_in,
                           int IC, int IH, int IW, int OC, int OH, int OW, int K, int act LOCAL_TILE_ARG) {
    const int e = (int)get_global_id(0), s = (int)get_global_id(1);
    const int in_size = IC * IH * IW;
#ifdef MEM_LOCAL
    const int nw = conn_begin[OC] * K * K;
    __local float* x = tile;
    __local float* w = x + in_size;
    __local float* b = w + nw;
    copy_to_local(x, INPUT_ROW(in, rows, first, s, in_size), in_size);
    copy_to_local(w, W, nw);
    copy_to_local(b, bias, OC);
    barrier(CLK_LOCAL_MEM_FENCE);
#else
    __global const float* x = INPUT_ROW(in, rows, first, s, in_size);
    WEIGHTS const float* w = W;
    WEIGHTS const float* b = bias;
#endif
    if (e >= OC * OH * OW) return;
    const int o = e / (OH * OW), y = e / OW % OH, xo = e % OW;
    float sum = b[o];
    for (int j = conn_begin[o]; j < conn_begin[o + 1]; ++j) {
        const int at = (conn_in[j] * IH + y) * IW + xo;
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx) sum += x[at + ky * IW + kx] * w[(j * K + ky) * K + kx];
    }
    out[(size_t)s * OC * OH * OW + e] = activate(act, sum);
}

// KxK non-overlapping sum times coef[c], plus bias[c], then the activation.
// in [rows][C][IH][IW], coef [C], bias [C] -> out [count][C][OH][OW].
// NDRange (round_up(C*OH*OW, WG), count), work-group (WG, 1): one item per output element.
// Every input is read once, so gpu-local stages nothing here.
__kernel void subsample_forward(__global const float* in, __global const int* rows, int first,
                                WEIGHTS const float* coef, WEIGHTS const float* bias, __global float* out,
                                int C, int IH, int IW, int OH, int OW, int K, int act) {
    const int e = (int)get_global_id(0), s = (int)get_global_id(1);
    if (e >= C * OH * OW) return;
    const int c = e / (OH * OW), y = e / OW % OH, xo = e % OW;
    __global const float* x = INPUT_ROW(in, rows, first, s, C * IH * IW) + (c * IH + y * K) * IW + xo * K;
    float sum = 0.0f;
    for (int ky = 0; ky < K; ++ky)
        for (int kx = 0; kx < K; ++kx) sum += x[ky * IW + kx];
    out[(size_t)s * C * OH * OW + e] = activate(act, coef[c] * sum + bias[c]);
}

#ifndef MEM_LOCAL
// Fully connected: out[s][o] = act(bias[o] + sum_i W[o][i] in[s][i]).
// in [rows][I], W [O][I], bias [O] -> out [count][O].
// NDRange (round_up(count, n), O): one item per output, samples along dimension 0 so that the
// items of a group read the same weight at the same time (a broadcast, which __constant favours).
__kernel void fc_forward(__global const float* in, __global const int* rows, int first,
                         WEIGHTS const float* W, WEIGHTS const float* bias, __global float* out,
                         int I, int O, int act, int count) {
    const int s = (int)get_global_id(0), o = (int)get_global_id(1);
    if (s >= count) return;
    __global const float* x = INPUT_ROW(in, rows, first, s, I);
    WEIGHTS const float* w = W + (size_t)o * I;
    float sum = bias[o];
    for (int i = 0; i < I; ++i) sum += w[i] * x[i];
    out[(size_t)s * O + o] = activate(act, sum);
}
#else
// Fully connected, as a tiled matrix product: out[s][o] = act(bias[o] + sum_i in[s][i] W[o][i]).
// in [rows][I], W [O][I], bias [O] -> out [count][O].
// NDRange (round_up(O, TILE), round_up(count, TILE)), work-group (TILE, TILE): item (o, s) of a
// TILE x TILE block of outputs; TILE-wide slices of the inputs and the weights go through __local.
__kernel void fc_forward(__global const float* in, __global const int* rows, int first,
                         __global const float* W, __global const float* bias, __global float* out,
                         int I, int O, int act, int count) {
    __local float xt[TILE][TILE];      // [sample][i]
    __local float wt[TILE][TILE + 1];  // [o][i], padded so the items of a row hit distinct banks
    const int lo = (int)get_local_id(0), ls = (int)get_local_id(1);
    const int o0 = (int)get_group_id(0) * TILE, s0 = (int)get_group_id(1) * TILE;
    const int o = o0 + lo, s = s0 + ls;
    // Item (lo, ls) loads input row s0+ls and weight row o0+ls, both at column i0+lo: coalesced.
    __global const float* x = s < count ? INPUT_ROW(in, rows, first, s, I) : in;
    const int wrow = o0 + ls;
    float sum = o < O ? bias[o] : 0.0f;
    for (int i0 = 0; i0 < I; i0 += TILE) {
        const int i = i0 + lo;
        xt[ls][lo] = s < count && i < I ? x[i] : 0.0f;
        wt[ls][lo] = wrow < O && i < I ? W[(size_t)wrow * I + i] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < TILE; ++t) sum += wt[lo][t] * xt[ls][t];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (o < O && s < count) out[(size_t)s * O + o] = activate(act, sum);
}
#endif

// The last layer, fully connected without activation, fused with the softmax cross-entropy.
// in [rows][I], W [O][I], bias [O] -> logits [count][O]; with label labels[label_rows[label_first+s]]:
// delta [count][O] = scale * (softmax - one-hot) (scale = 1/count: the gradient of the mean loss),
// loss[slot+s] the cross-entropy, hit[slot+s] = 1 when the first arg-max is the label.
// NDRange (round_up(count, n)): one item per sample; the logits are kept in `logits` itself.
__kernel void output_forward(__global const float* in, __global const int* rows, int first,
                             WEIGHTS const float* W, WEIGHTS const float* bias, __global float* logits,
                             int I, int O, int count, __global const uchar* labels,
                             __global const int* label_rows, int label_first, float scale,
                             __global float* delta, __global float* loss, __global int* hit, int slot) {
    const int s = (int)get_global_id(0);
    if (s >= count) return;
    __global const float* x = INPUT_ROW(in, rows, first, s, I);
    __global float* z = logits + (size_t)s * O;
    int best = 0;
    for (int o = 0; o < O; ++o) {
        float sum = bias[o];
        for (int i = 0; i < I; ++i) sum += W[(size_t)o * I + i] * x[i];
        z[o] = sum;
        if (sum > z[best]) best = o;
    }
    const float mx = z[best];
    float total = 0.0f;
    for (int o = 0; o < O; ++o) total += exp(z[o] - mx);
    const int label = labels[label_rows[label_first + s]];
    for (int o = 0; o < O; ++o)
        delta[(size_t)s * O + o] = scale * (exp(z[o] - mx) / total - (o == label ? 1.0f : 0.0f));
    loss[slot + s] = log(total) - (z[label] - mx);
    hit[slot + s] = best == label;
}
