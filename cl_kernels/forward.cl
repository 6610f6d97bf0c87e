// The forward pass (compiled after common.h): one work-group per sample runs every layer in
// turn over the sample's arena, its items sharing each layer's outputs. L is the layer's row
// of the table, x its input and y its output (both in the arena), pool the connection lists.

// Convolution (stride 1, valid) over each output map's connections, plus bias, then the activation.
// x [IC][IH][IW], W [nconn][K][K], bias [OC] -> y [OC][OH][OW].
inline void conv_forward(__global const int* L, __global const int* pool, PARAMS_ARG, ARENA const float* x,
                         ARENA float* y) {
    const int IH = L[L_IH], IW = L[L_IW], OC = L[L_OC], OH = L[L_OH], OW = L[L_OW], K = CONV_WINDOW(L);
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
    const int IH = L[L_IH], IW = L[L_IW], C = L[L_OC], OH = L[L_OH], OW = L[L_OW], K = POOL_WINDOW(L);
    FOR_GROUP(e, C * OH * OW) {
        const int c = e / (OH * OW), oy = e / OW % OH, ox = e % OW;
        ARENA const float* window = x + (c * IH + oy * K) * IW + ox * K;
        float sum = 0.0f;
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx) sum += window[ky * IW + kx];
        y[e] = activate(L[L_ACT], PARAM(L[L_W_AT] + c) * sum + PARAM(L[L_B_AT] + c));
    }
}

// Fully connected, stage 1: parts[o][q] = sum over i = q, q + P, q + 2P, ... < I of W[o][i] x[i].
// x [I], W [O][I] -> parts [O][P]. Item e is (o, q) = (e / P, e % P): P neighbouring items read
// neighbouring weights of a row (one item per row would read O rows P-fold more scattered).
inline void fc_forward_parts(__global const int* L, PARAMS_ARG, ARENA const float* x, ARENA float* parts, int P) {
    const int I = L[L_IC] * L[L_IH] * L[L_IW], O = L[L_OC] * L[L_OH] * L[L_OW];
    FOR_GROUP(e, O * P) {
        const int w = L[L_W_AT] + e / P * I;
        float sum = 0.0f;
#define FC_TERM(i) (PARAM(w + (i)) * x[i])
        SUM_STRIDED(sum, e % P, P, I, FC_TERM);
#undef FC_TERM
        parts[e] = sum;
    }
}

// Fully connected, stage 2: y[o] = act(bias[o] + sum_q parts[o][q]). parts [O][P], bias [O] -> y [O].
inline void fc_forward_sum(__global const int* L, PARAMS_ARG, ARENA const float* parts, int P, ARENA float* y) {
    FOR_GROUP(o, L[L_OC] * L[L_OH] * L[L_OW]) {
        float sum = PARAM(L[L_B_AT] + o);
        for (int q = 0; q < P; ++q) sum += parts[o * P + q];
        y[o] = activate(L[L_ACT], sum);
    }
}

// The whole forward pass of a batch, and the softmax cross-entropy of the logits (the last layer's
// output, fully connected without activation).
// inputs [n][in], labels [n]: the data set; sample s of the batch is row rows[first + s].
// table [layers][LAYER_FIELDS], pool: the layer table (common.h). acts [count][A]: each sample's
// arena after the pass (the input, then every layer's output, then the fully connected layers'
// partial sums: fc_parts per output, at parts_at). out_delta [count][classes]
// = scale * (softmax - one-hot) (scale = 1/count: the gradient of the mean loss);
// loss[slot+s] the cross-entropy, hit[slot+s] = 1 when the first arg-max is the label.
// NDRange (count * SAMPLE_GROUP), work-group SAMPLE_GROUP: group s runs sample s. gpu-local: the arena is `local_arena`
// ([A] floats) and is copied to acts at the end; otherwise the pass runs in acts itself.
PER_SAMPLE void forward_samples(__global const float* inputs, __global const uchar* labels, __global const int* rows,
                              int first, PARAMS_ARG, __global const int* table, __global const int* pool, int layers,
                              int A, int parts_at, int fc_parts, __global float* acts, __global float* out_delta, float scale,
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
        barrier(ARENA_FENCE);  // layer k's input is complete
        __global const int* L = table + k * LAYER_FIELDS;
        ARENA const float* x = arena + L[L_IN_AT];
        ARENA float* y = arena + L[L_OUT_AT];
        const int kind = L[L_KIND];
        switch (kind) {
            case KIND_CONV: conv_forward(L, pool, PARAMS, x, y); break;
            case KIND_SUBSAMPLE: subsample_forward(L, PARAMS, x, y); break;
            default: fc_forward_parts(L, PARAMS, x, arena + parts_at, fc_parts); break;
        }
        barrier(ARENA_FENCE);  // the partial sums are complete
        if (kind == KIND_FC) fc_forward_sum(L, PARAMS, arena + parts_at, fc_parts, y);
    }
    barrier(ARENA_FENCE);
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
