// The backward pass (compiled after common.h): one work-group per sample runs every layer from
// the last down over the sample's arena, writing the sample's weight gradients; sum_samples then
// adds them up over the batch. Per layer: its weight gradients from its input x and its delta d,
// then (except for the first layer) the previous layer's delta, written over x in place: each
// element reads only its own activation, and the weight gradients no longer need x.
// L is the layer's row of the table, g the sample's gradients (the device layout).

// Convolutions and subsamplings sum their weight gradients over the output rows in two steps, so
// that more items share the work than the layer has parameters: the parameters' sums over every
// R-th row (rows r, r + R, ...) go to parts [params][R] in the arena, then row_parts_sum adds them.

// R: as many row sets as parts (capacity floats) holds, at most one per output row.
inline int row_sets(int params, int OH, int capacity) { return max(1, min(OH, capacity / params)); }

// A convolution's gradients: weight (j, ky, kx) = sum over output positions p of
// d[conn_out[j]][p] * x[conn_in[j]][p + (ky, kx)], bias o = sum_p d[o][p].
// x [IC][IH][IW], d [OC][OH][OW] -> parts [nconn*K*K + OC][R]: the weights W [nconn][K][K], then the
// biases [OC]; item e sums parameter e / R over rows e % R, e % R + R, ...
inline void conv_weight_parts(__global const int* L, __global const int* pool, ARENA const float* x,
                              ARENA const float* d, ARENA float* parts, int R) {
    const int IH = L[L_IH], IW = L[L_IW], OC = L[L_OC], OH = L[L_OH], OW = L[L_OW], K = CONV_WINDOW(L);
    const int nw = L[L_NCONN] * K * K, P = OH * OW;
    __global const int* conn_in = pool + L[L_CONN_IN];
    __global const int* conn_out = pool + L[L_CONN_OUT];
    FOR_GROUP(e, (nw + OC) * R) {
        const int q = e / R, r = e % R;
        float v = 0.0f;
        if (q < nw) {
            const int j = q / (K * K), t = q % (K * K);
            ARENA const float* dj = d + conn_out[j] * P;
            ARENA const float* xj = x + conn_in[j] * IH * IW + t / K * IW + t % K;  // tap (ky, kx)
            for (int oy = r; oy < OH; oy += R) {
#define WEIGHT_TERM(ox) (dj[oy * OW + (ox)] * xj[oy * IW + (ox)])
                SUM_STRIDED(v, 0, 1, OW, WEIGHT_TERM);
#undef WEIGHT_TERM
            }
        } else {
            ARENA const float* dq = d + (q - nw) * P;
            for (int oy = r; oy < OH; oy += R) {
#define BIAS_TERM(ox) dq[oy * OW + (ox)]
                SUM_STRIDED(v, 0, 1, OW, BIAS_TERM);
#undef BIAS_TERM
            }
        }
        parts[e] = v;
    }
}

// A KxK subsampling's gradients: coef[c] = sum_p d[c][p] * (the KxK window of x under p),
// bias[c] = sum_p d[c][p]. x [C][IH][IW], d [C][OH][OW] -> parts [2C][R] (coef [C], then bias [C]),
// as for conv_weight_parts.
inline void subsample_weight_parts(__global const int* L, ARENA const float* x, ARENA const float* d,
                                   ARENA float* parts, int R) {
    const int IH = L[L_IH], IW = L[L_IW], C = L[L_OC], OH = L[L_OH], OW = L[L_OW], K = POOL_WINDOW(L), P = OH * OW;
    FOR_GROUP(e, 2 * C * R) {
        const int q = e / R, r = e % R, c = q % C;
        ARENA const float* dc = d + c * P;
        float v = 0.0f;
        for (int oy = r; oy < OH; oy += R)
            for (int ox = 0; ox < OW; ++ox) {
                float sum = 1.0f;  // bias: d alone
                if (q < C) {
                    ARENA const float* window = x + (c * IH + oy * K) * IW + ox * K;
                    sum = 0.0f;
                    for (int ky = 0; ky < K; ++ky)
                        for (int kx = 0; kx < K; ++kx) sum += window[ky * IW + kx];
                }
                v += dc[oy * OW + ox] * sum;
            }
        parts[e] = v;
    }
}

// The second step: parameter q's gradient = sum_r parts[q][r], in order. The first nw parameters
// are the layer's weights, the next nb its biases.
inline void row_parts_sum(__global const int* L, ARENA const float* parts, int R, int nw, int nb, __global float* g) {
    FOR_GROUP(q, nw + nb) {
        float v = 0.0f;
        for (int r = 0; r < R; ++r) v += parts[q * R + r];
        g[q < nw ? L[L_W_AT] + q : L[L_B_AT] + q - nw] = v;
    }
}

// The previous layer's delta through a convolution, in place over x:
// x[i][iy][ix] = act'(x[i][iy][ix]) * sum over the connections j reading map i and the (ky, kx)
// with (iy-ky, ix-kx) inside the output of d[conn_out[j]][iy-ky][ix-kx] * W[j][ky][kx].
inline void conv_input_delta(__global const int* L, __global const int* pool, PARAMS_ARG, ARENA float* x,
                             ARENA const float* d) {
    const int IC = L[L_IC], IH = L[L_IH], IW = L[L_IW], OH = L[L_OH], OW = L[L_OW], K = CONV_WINDOW(L);
    __global const int* in_begin = pool + L[L_IN_BEGIN];
    __global const int* in_conn = pool + L[L_IN_CONN];
    __global const int* conn_out = pool + L[L_CONN_OUT];
    const int w_at = L[L_W_AT];
    FOR_GROUP(e, IC * IH * IW) {
        const int i = e / (IH * IW), iy = e / IW % IH, ix = e % IW;
        float sum = 0.0f;
        for (int c = in_begin[i]; c < in_begin[i + 1]; ++c) {
            const int j = in_conn[c];
            const int at = (conn_out[j] * OH + iy) * OW + ix;  // d[o][iy][ix]; the term is at - ky*OW - kx
            for (int ky = 0; ky < K; ++ky) {
                if (iy - ky < 0 || iy - ky >= OH) continue;
                for (int kx = 0; kx < K; ++kx)
                    if (ix - kx >= 0 && ix - kx < OW) sum += d[at - ky * OW - kx] * PARAM(w_at + (j * K + ky) * K + kx);
            }
        }
        x[e] = activation_grad(L[L_PREV_ACT], x[e]) * sum;
    }
}

// The previous layer's delta through a KxK subsampling, in place over x:
// x[c][iy][ix] = act'(x[c][iy][ix]) * coef[c] * d[c][iy/K][ix/K].
inline void subsample_input_delta(__global const int* L, PARAMS_ARG, ARENA float* x, ARENA const float* d) {
    const int IH = L[L_IH], IW = L[L_IW], C = L[L_OC], OH = L[L_OH], OW = L[L_OW], K = POOL_WINDOW(L);
    FOR_GROUP(e, C * IH * IW) {
        const int c = e / (IH * IW), iy = e / IW % IH, ix = e % IW;
        x[e] = activation_grad(L[L_PREV_ACT], x[e]) * PARAM(L[L_W_AT] + c) * d[(c * OH + iy / K) * OW + ix / K];
    }
}

// A fully connected layer's gradients: W[o][i] = d[o] * x[i], bias[o] = d[o].
// x [I], d [O] -> g: W [O][I], bias [O].
inline void fc_weight_grads(__global const int* L, ARENA const float* x, ARENA const float* d, __global float* g) {
    const int I = L[L_IC] * L[L_IH] * L[L_IW], O = L[L_OC] * L[L_OH] * L[L_OW];
    __global float* gW = g + L[L_W_AT];
    FOR_GROUP(e, O * I) gW[e] = d[e / I] * x[e % I];
    FOR_GROUP(o, O) g[L[L_B_AT] + o] = d[o];
}

// The previous layer's delta through a fully connected layer, in place over x:
// x[i] = act'(x[i]) * sum_o W[o][i] d[o].
inline void fc_input_delta(__global const int* L, PARAMS_ARG, ARENA float* x, ARENA const float* d) {
    const int I = L[L_IC] * L[L_IH] * L[L_IW], O = L[L_OC] * L[L_OH] * L[L_OW], w_at = L[L_W_AT];
    FOR_GROUP(i, I) {
        float sum = 0.0f;
#define INPUT_TERM(o) (PARAM(w_at + (o) * I + i) * d[o])
        SUM_STRIDED(sum, 0, 1, O, INPUT_TERM);
#undef INPUT_TERM
        x[i] = activation_grad(L[L_PREV_ACT], x[i]) * sum;
    }
}

// The whole backward pass of a batch, from the arenas of its forward pass.
// acts [count][A], out_delta [count][classes] (forward_samples), table and pool (common.h)
// -> sample_grads [count][n]: sample s's gradients in the device layout (the padding is never
// written: the host zeroes it once). The arena's partial sums (parts_at, parts_size floats) take
// the row sets of the weight gradients.
// NDRange (count * SAMPLE_GROUP), work-group SAMPLE_GROUP: group s runs sample s. It copies its arena to `local_arena`
// ([A] floats, gpu-local) or to arenas + s*A (otherwise), so that acts keeps the layer outputs.
PER_SAMPLE void backward_samples(PARAMS_ARG, __global const int* table, __global const int* pool, int layers, int A,
                               int parts_at, int parts_size,
                               __global const float* acts, __global const float* out_delta, int n,
                               __global float* sample_grads,
#ifdef MEM_LOCAL
                               __local float* local_arena
#else
                               __global float* arenas
#endif
) {
    const int s = (int)get_group_id(0);
#ifdef MEM_LOCAL
    __local float* arena = local_arena;
#else
    __global float* arena = arenas + (size_t)s * A;
#endif
    __global const int* last = table + (layers - 1) * LAYER_FIELDS;
    const int classes = last[L_OC] * last[L_OH] * last[L_OW];
    // The logits' place takes the output delta.
    FOR_GROUP(e, A) {
        const int c = e - last[L_OUT_AT];
        arena[e] = c >= 0 && c < classes ? out_delta[(size_t)s * classes + c] : acts[(size_t)s * A + e];
    }
    __global float* g = sample_grads + (size_t)s * n;
    ARENA float* parts = arena + parts_at;
    for (int k = layers - 1; k >= 0; --k) {
        __global const int* L = table + k * LAYER_FIELDS;
        ARENA float* x = arena + L[L_IN_AT];
        ARENA const float* d = arena + L[L_OUT_AT];
        const int kind = L[L_KIND], OC = L[L_OC];
        const int nw = kind == KIND_CONV ? L[L_NCONN] * CONV_WINDOW(L) * CONV_WINDOW(L) : OC;  // conv, subsampling: weights
        const int R = row_sets(nw + OC, L[L_OH], parts_size);
        barrier(ARENA_FENCE);  // d is complete
        switch (kind) {
            case KIND_CONV: conv_weight_parts(L, pool, x, d, parts, R); break;
            case KIND_SUBSAMPLE: subsample_weight_parts(L, x, d, parts, R); break;
            default: fc_weight_grads(L, x, d, g); break;
        }
        // The row sets are complete, and x is no longer read as an activation.
        barrier(ARENA_FENCE);
        if (kind != KIND_FC) row_parts_sum(L, parts, R, nw, OC, g);
        if (k > 0) {  // the network's input needs no delta
            switch (kind) {
                case KIND_CONV: conv_input_delta(L, pool, PARAMS, x, d); break;
                case KIND_SUBSAMPLE: subsample_input_delta(L, PARAMS, x, d); break;
                default: fc_input_delta(L, PARAMS, x, d); break;
            }
        }
    }
}

// The batch's gradients: grads[q] = sum over the samples s (in order) of sample_grads[s][q].
// sample_grads [count][n] -> grads [n]. NDRange (round_up(n, WG)): one item per parameter.
// Eight samples' values are loaded before they are added (in order): the loads overlap.
__kernel void sum_samples(__global const float* sample_grads, int n, int count, __global float* grads) {
    const int q = (int)get_global_id(0);
    if (q >= n) return;
    __global const float* g = sample_grads + q;
    float sum = 0.0f;
    int s = 0;
    for (; s + 8 <= count; s += 8) {
        float v[8];
        for (int t = 0; t < 8; ++t) v[t] = g[(size_t)(s + t) * n];
        for (int t = 0; t < 8; ++t) sum += v[t];
    }
    for (; s < count; ++s) sum += g[(size_t)s * n];
    grads[q] = sum;
}
