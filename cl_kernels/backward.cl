// Backward kernels of the fully connected layers (compiled after common.h; conv_pool.cl has the
// convolutions and subsamplings). Per layer: one launch for the weight and bias gradients (summed
// over the batch in a fixed order) and, except for the first layer, one for the previous layer's
// delta. Both read this layer's delta; the gradients are overwritten.

// The gradients of a run of conv + subsample pairs: grads[begin + q] = sum over the chunks c of
// `chunk` samples (in order) of partial[c*n + q], the chunks' shares written by conv_pool_backward.
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
