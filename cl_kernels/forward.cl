// Forward kernels of the fully connected layers, one launch per layer over the whole batch
// (compiled after common.h; conv_pool.cl has the convolutions and subsamplings).

// A term of a fully connected output: weight row w times input row x.
#define FC_TERM(i) (w[i] * x[i])

#ifndef MEM_LOCAL
// Fully connected: out[s][o] = act(bias[o] + sum_i W[o][i] in[s][i]).
// in [count][I], W [O][I], bias [O] -> out [count][O].
// NDRange (round_up(count, n), O): one item per output, samples along dimension 0 so that the
// items of a group read the same weight at the same time (a broadcast, which __constant favours).
__kernel void fc_forward(__global const float* in,
                         WEIGHTS const float* W, WEIGHTS const float* bias, __global float* out,
                         int I, int O, int act, int count) {
    const int s = (int)get_global_id(0), o = (int)get_global_id(1);
    if (s >= count) return;
    __global const float* x = in + (size_t)s * I;
    WEIGHTS const float* w = W + (size_t)o * I;
    float sum = bias[o];
    SUM_STRIDED(sum, 0, 1, I, FC_TERM);
    out[(size_t)s * O + o] = activate(act, sum);
}
#else
// Fully connected, as a tiled matrix product: out[s][o] = act(bias[o] + sum_i in[s][i] W[o][i]).
// in [count][I], W [O][I], bias [O] -> out [count][O].
// NDRange (round_up(O, TILE), round_up(count, TILE)), work-group (TILE, TILE): item (o, s) of a
// TILE x TILE block of outputs; DEPTH-wide slices of the inputs and the weights go through __local.
__kernel void fc_forward(__global const float* in,
                         __global const float* W, __global const float* bias, __global float* out,
                         int I, int O, int act, int count) {
    __local float xt[TILE][DEPTH];      // [sample][i]
    __local float wt[TILE][DEPTH + 1];  // [o][i], padded so the items of a row hit distinct banks
    const int lo = (int)get_local_id(0), ls = (int)get_local_id(1);
    const int o0 = (int)get_group_id(0) * TILE, s0 = (int)get_group_id(1) * TILE;
    const int o = o0 + lo, s = s0 + ls;
    // Item (lo, ls) loads input row s0+ls and weight row o0+ls at columns i0+lo, i0+lo+TILE, ...
    __global const float* x = in + (size_t)s * I;  // read only when s < count
    const int wrow = o0 + ls;
    float sum = o < O ? bias[o] : 0.0f;
    for (int i0 = 0; i0 < I; i0 += DEPTH) {
        for (int t = lo; t < DEPTH; t += TILE) {
            const int i = i0 + t;
            xt[ls][t] = s < count && i < I ? x[i] : 0.0f;
            wt[ls][t] = wrow < O && i < I ? W[(size_t)wrow * I + i] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < DEPTH; ++t) sum += wt[lo][t] * xt[ls][t];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (o < O && s < count) out[(size_t)s * O + o] = activate(act, sum);
}
#endif

// The last layer, fully connected without activation, fused with the softmax cross-entropy.
// in [count][I], W [O][I], bias [O], labels [count] -> logits [count][O];
// delta [count][O] = scale * (softmax - one-hot) (scale = 1/count: the gradient of the mean loss),
// loss[slot+s] the cross-entropy, hit[slot+s] = 1 when the first arg-max is the label.
// NDRange (OP, round_up(count, S)), work-group (OP, S), OP >= O: item (o, s) computes logit o of
// sample s; after a barrier every item of the sample reads all its logits (the same sums in the
// same order) and writes its own delta; item (0, s) writes the loss and the hit.
__kernel void output_forward(__global const float* in,
                             WEIGHTS const float* W, WEIGHTS const float* bias, __global float* logits,
                             int I, int O, int count, __global const uchar* labels, float scale,
                             __global float* delta, __global float* loss, __global int* hit, int slot) {
    const int o = (int)get_global_id(0), s = (int)get_global_id(1);
    const bool active = o < O && s < count;
    __global float* z = logits + (size_t)s * O;
    if (active) {
        __global const float* x = in + (size_t)s * I;
        WEIGHTS const float* w = W + (size_t)o * I;
        float sum = bias[o];
        SUM_STRIDED(sum, 0, 1, I, FC_TERM);
        z[o] = sum;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (!active) return;
    int best = 0;
    for (int k = 1; k < O; ++k)
        if (z[k] > z[best]) best = k;
    const float mx = z[best];
    float total = 0.0f;
    for (int k = 0; k < O; ++k) total += exp(z[k] - mx);
    const int label = labels[s];
    delta[(size_t)s * O + o] = scale * (exp(z[o] - mx) / total - (o == label ? 1.0f : 0.0f));
    if (o == 0) {
        loss[slot + s] = log(total) - (z[label] - mx);
        hit[slot + s] = best == label;
    }
}
#undef FC_TERM
