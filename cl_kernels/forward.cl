// The forward pass (compiled after common.h): one work-group per sample runs every layer in
// turn over the sample's arena, its items sharing each layer's outputs. L is the layer's row
// of the table, x its input and y its output (both in the arena), pool the connection lists.

// Convolution (stride 1, valid) over each output map's connections, plus bias, then the activation.
// x [IC][IH][IW], W [nconn][K][K], bias [OC] -> y [OC][OH][OW].
inline void conv_forward(__global const int* L, __global const int* pool, PARAMS_ARG, ARENA const float* x,
                         ARENA float* y) {
    const int IH = L[L_IH], IW = L[L_IW], OC = L[L_OC], OH = L[L_OH], OW = L[L_OW], K = L[L_K];
    __global const int* conn_begin = pool + L[L_CONN_BEGIN];
    __global const int* conn_in = pool + L[L_CONN_IN];
    const int w_at = L[L_W_AT], act = L[L_ACT];
    FOR_GROUP(e, OC * OH * OW) {
        const int o = e / (OH * OW), oy = e / OW % OH, ox = e % OW;
        float sum = PARAM(L[L_B_AT] + o);
        for (int j = conn_begin[o]; j < conn_begin[o + 1]; ++j) {
            const int at = (conn_in[j] * IH + oy) * IW + ox, w = w_at + j * K * K;
            for (int ky = 0; ky < K; ++ky)
                for (int kx = 0; kx < K; ++kx) sum += x[at + ky * IW + kx] * PARAM(w + ky * K + kx);
        }
        y[e] = activate(act, sum);
    }
}

// KxK non-overlapping sum times coef[c], plus bias[c], then the activation.
// x [C][IH][IW], coef [C], bias [C] -> y [C][OH][OW].
inline void subsample_forward(__global const int* L, PARAMS_ARG, ARENA const float* x, ARENA float* y) {
    const int IH = L[L_IH], IW = L[L_IW], C = L[L_OC], OH = L[L_OH], OW = L[L_OW], K = L[L_K];
    FOR_GROUP(e, C * OH * OW) {
        const int c = e / (OH * OW), oy = e / OW % OH, ox = e % OW;
        ARENA const float* window = x + (c * IH + oy * K) * IW + ox * K;
        float sum = 0.0f;
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx) sum += window[ky * IW + kx];
        y[e] = activate(L[L_ACT], PARAM(L[L_W_AT] + c) * sum + PARAM(L[L_B_AT] + c));
    }
}

// Fully connected: y[o] = act(bias[o] + sum_i W[o][i] x[i]). x [I], W [O][I], bias [O] -> y [O].
inline void fc_forward(__global const int* L, PARAMS_ARG, ARENA const float* x, ARENA float* y) {
    const int I = L[L_IC] * L[L_IH] * L[L_IW], O = L[L_OC] * L[L_OH] * L[L_OW];
    FOR_GROUP(o, O) {
        const int w = L[L_W_AT] + o * I;
        float sum = PARAM(L[L_B_AT] + o);
#define FC_TERM(i) (PARAM(w + (i)) * x[i])
        SUM_STRIDED(sum, 0, 1, I, FC_TERM);
#undef FC_TERM
        y[o] = activate(L[L_ACT], sum);
    }
}

// The whole forward pass of a batch, and the softmax cross-entropy of the logits (the last layer's
// output, fully connected without activation).
// inputs [n][in], labels [n]: the data set; sample s of the batch is row rows[first + s].
// table [layers][LAYER_FIELDS], pool: the layer table (common.h). acts [count][A]: each sample's
// arena after the pass (the input, then every layer's output). out_delta [count][classes]
// = scale * (softmax - one-hot) (scale = 1/count: the gradient of the mean loss);
// loss[slot+s] the cross-entropy, hit[slot+s] = 1 when the first arg-max is the label.
// NDRange (count * G), work-group G: group s runs sample s. gpu-local: the arena is `local_arena`
// ([A] floats) and is copied to acts at the end; otherwise the pass runs in acts itself.
__kernel void forward_samples(__global const float* inputs, __global const uchar* labels, __global const int* rows,
                              int first, PARAMS_ARG, __global const int* table, __global const int* pool, int layers,
                              int A, __global float* acts, __global float* out_delta, float scale,
                              __global float* loss, __global int* hit, int slot
#ifdef MEM_LOCAL
                              , __local float* local_arena
#endif
) {
    const int s = (int)get_group_id(0);
    const int row = rows[first + s];
    __global const int* last = table + (layers - 1) * LAYER_FIELDS;
#ifdef MEM_LOCAL
    __local float* arena = local_arena;
#else
    __global float* arena = acts + (size_t)s * A;
#endif
    const int n_in = table[L_IC] * table[L_IH] * table[L_IW];
    FOR_GROUP(e, n_in) arena[table[L_IN_AT] + e] = inputs[(size_t)row * n_in + e];
    for (int k = 0; k < layers; ++k) {
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);  // layer k's input is complete
        __global const int* L = table + k * LAYER_FIELDS;
        ARENA const float* x = arena + L[L_IN_AT];
        ARENA float* y = arena + L[L_OUT_AT];
        switch (L[L_KIND]) {
            case KIND_CONV: conv_forward(L, pool, PARAMS, x, y); break;
            case KIND_SUBSAMPLE: subsample_forward(L, PARAMS, x, y); break;
            default: fc_forward(L, PARAMS, x, y); break;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    // The softmax: every item of a class reads all the logits (the same sums in the same order).
    ARENA const float* z = arena + last[L_OUT_AT];
    const int O = last[L_OC] * last[L_OH] * last[L_OW], label = labels[row];
    FOR_GROUP(o, O) {
        int best = 0;
        for (int c = 1; c < O; ++c)
            if (z[c] > z[best]) best = c;
        const float mx = z[best];
        float total = 0.0f;
        for (int c = 0; c < O; ++c) total += exp(z[c] - mx);
        out_delta[(size_t)s * O + o] = scale * (exp(z[o] - mx) / total - (o == label ? 1.0f : 0.0f));
        if (o == 0) {
            loss[slot + s] = log(total) - (z[label] - mx);
            hit[slot + s] = best == label;
        }
    }
#ifdef MEM_LOCAL
    FOR_GROUP(e, A) acts[(size_t)s * A + e] = arena[e];
#endif
}
