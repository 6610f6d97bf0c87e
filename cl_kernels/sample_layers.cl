// One sample's layers, forward and backward, each run by the whole work-group of that sample
// (compiled after common.h). step.cl's kernels call them in the network's order, with every shape
// and offset a literal (host/opencl/opencl_program.cpp writes the calls), so each loop bound is known to
// the compiler. Every function is called by all SG items with the same arguments and ends with
// SYNC(), so the next layer reads what it wrote (the loss functions, always last, need not).
//
// SCRATCH pointers point into the group's work area, __global ones into the sample's rows of the
// batch's activations and deltas ([count][ACT_FLOATS] each), which the backward kernel, the
// gradient kernel and the tests read. A convolution pair is a convolution and the subsampling
// after it: output map o of the convolution reads the input maps of network.h's connection
// lists, conn_in[conn_begin[o] .. conn_begin[o+1]); connection j has the weights W[j][K][K].

// How many neighbouring outputs of a row one item computes in the convolutions: the most, up to
// `most` (at most 8), that divides the row (a literal, so the loops over them unroll). More share
// more loads, fewer give more items work: measured on an H200 (LeNet-5, batch 64 and 256), the
// forward is fastest with up to 5 (C1's rows of 28 in fours, C3's of 10 in fives), the input's
// delta with up to 8 (sevens); up to 4 in both cost 15% more a step. `lenet5 tune` tries others
// (-DFWD_RUN=N, -DBWD_RUN=N; opencl_program.cpp's sample_knobs).
#define RUN(width, most)                                                                                    \
    ((most) >= 8 && (width) % 8 == 0   ? 8                                                                  \
     : (most) >= 7 && (width) % 7 == 0 ? 7                                                                  \
     : (most) >= 6 && (width) % 6 == 0 ? 6                                                                  \
     : (most) >= 5 && (width) % 5 == 0 ? 5                                                                  \
     : (most) >= 4 && (width) % 4 == 0 ? 4                                                                  \
     : (most) >= 3 && (width) % 3 == 0 ? 3                                                                  \
     : (most) >= 2 && (width) % 2 == 0 ? 2                                                                  \
                                       : 1)
#ifndef FWD_RUN
#define FWD_RUN 5
#endif
#ifndef BWD_RUN
#define BWD_RUN 8
#endif

// Pair forward, in two phases so that every item has work and short sums: convolution outputs
// (stored in the work area, conv, and in conv_out), then one item per pooled output:
// pool = act(coef[o] * the PK x PK sum + pool_bias[o]), stored in pool and pool_out. The input x
// is [IC][IH] rows of IW values, XW floats apart (the network's input: an odd number, so that items
// reading several rows at one column hit different __local banks).
// Each item computes RUN(CW, FWD_RUN) neighbouring convolution outputs of a row, which share their loads.
inline void pair_forward(SCRATCH const float* x, PAIR_PARAMS const float* W, PAIR_PARAMS const float* bias,
                         PAIR_PARAMS const float* coef, PAIR_PARAMS const float* pool_bias,
                         __constant const int* conn_begin, __constant const int* conn_in, int IH, int IW, int XW, int OC,
                         int CH, int CW, int K, int conv_act, int PK, int PH, int PW, int pool_act, SCRATCH float* conv,
                         __global float* conv_out, SCRATCH float* pool, __global float* pool_out) {
    const int lid = (int)get_local_id(0), C = CH * CW, R = RUN(CW, FWD_RUN), CR = CW / R;
    for (int e = lid; e < OC * CH * CR; e += SG) {
        const int o = e / (CH * CR), cy = e % (CH * CR) / CR, cx = e % CR * R;
        float sum[8];
        for (int r = 0; r < R; ++r) sum[r] = bias[o];
        for (int j = conn_begin[o]; j < conn_begin[o + 1]; ++j) {
            SCRATCH const float* xj = x + (conn_in[j] * IH + cy) * XW + cx;
            PAIR_PARAMS const float* wj = W + j * K * K;
            for (int ky = 0; ky < K; ++ky)
                for (int kx = 0; kx < K; ++kx) {
                    const float w = wj[ky * K + kx];
                    for (int r = 0; r < R; ++r) sum[r] += xj[ky * XW + kx + r] * w;
                }
        }
        for (int r = 0; r < R; ++r) {
            const float v = activate(conv_act, sum[r]);
            conv[o * C + cy * CW + cx + r] = v;
            conv_out[o * C + cy * CW + cx + r] = v;
        }
    }
    SYNC();
    for (int e = lid; e < OC * PH * PW; e += SG) {
        const int o = e / (PH * PW), py = e / PW % PH, px = e % PW;
        SCRATCH const float* c = conv + (o * CH + py * PK) * CW + px * PK;
        float pooled = 0.0f;
        for (int dy = 0; dy < PK; ++dy)
            for (int dx = 0; dx < PK; ++dx) pooled += c[dy * CW + dx];
        const float v = activate(pool_act, coef[o] * pooled + pool_bias[o]);
        pool[e] = v;
        pool_out[e] = v;
    }
    SYNC();
}

// Fully connected layers read each weight once per sample, from __global memory (C5 alone has 192 KB
// of them): what limits them is how many loads each item has in flight, so both directions read
// rows four floats at a time (I, a literal, is a multiple of 4 in LeNet-5, else they read one at a
// time) and give each item several independent sums. The float4 loads go through a cast pointer
// (the layout aligns every layer's weights; NVIDIA's compiler splits vload4 into four loads).

// x[i .. i+VEC) dot w[i .. i+VEC), VEC = 4 when I is a multiple of 4.
#define DOT_AT(w, x, i, vec) \
    ((vec) == 4 ? dot(*(__global const float4*)((w) + (i)), (float4)((x)[i], (x)[(i) + 1], (x)[(i) + 2], (x)[(i) + 3])) : (w)[i] * (x)[i])

// Items of a fully connected forward's output row: FC_LANES, 16 by default (measured on an H200
// against 32 and 8: LeNet-5's step 3% faster at batch 64, 6% at 256), at most LANES (the host sizes
// the lanes' sums for that many). -DFC_LANES=N (`lenet5 tune` tries 8 and 32) sets others.
#ifndef FC_LANES
#define FC_LANES 16
#endif
#define FC_ITEMS (FC_LANES < LANES ? FC_LANES : LANES)

// Fully connected forward: y = act(bias + W x), W [O][I]. FC_ITEMS neighbouring items share an
// output row (they read neighbouring weights), each summing every FC_ITEMS-th chunk of the row; an
// item works on four rows at once. part[O][FC_ITEMS] takes the lanes' sums, which one item per output
// then adds in order.
inline void fc_forward(SCRATCH const float* x, __global const float* W, __global const float* bias, int I, int O,
                       int act, SCRATCH float* part, SCRATCH float* y, __global float* y_out) {
    const int lid = (int)get_local_id(0), lane = lid % FC_ITEMS, rows = SG / FC_ITEMS;
    const int vec = I % 4 == 0 ? 4 : 1;
    for (int o = lid / FC_ITEMS; o < O; o += 4 * rows) {
        // Rows past the last are clamped (read, never stored).
        __global const float* w0 = W + (size_t)o * I;
        __global const float* w1 = W + (size_t)min(o + rows, O - 1) * I;
        __global const float* w2 = W + (size_t)min(o + 2 * rows, O - 1) * I;
        __global const float* w3 = W + (size_t)min(o + 3 * rows, O - 1) * I;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (int i = lane * vec; i < I; i += FC_ITEMS * vec) {
            s0 += DOT_AT(w0, x, i, vec);
            s1 += DOT_AT(w1, x, i, vec);
            s2 += DOT_AT(w2, x, i, vec);
            s3 += DOT_AT(w3, x, i, vec);
        }
        part[o * FC_ITEMS + lane] = s0;
        if (o + rows < O) part[(o + rows) * FC_ITEMS + lane] = s1;
        if (o + 2 * rows < O) part[(o + 2 * rows) * FC_ITEMS + lane] = s2;
        if (o + 3 * rows < O) part[(o + 3 * rows) * FC_ITEMS + lane] = s3;
    }
    SYNC();
    for (int o = lid; o < O; o += SG) {
        float sum = bias[o];
        for (int l = 0; l < FC_ITEMS; ++l) sum += part[o * FC_ITEMS + l];
        const float v = activate(act, sum);
        y[o] = v;
        y_out[o] = v;
    }
    SYNC();
}

// Some rows of a fully connected forward, for a layer spread over many work-groups (step.cl's
// first_rows_forward): `rows` rows (at most SG / LANES) from row0, LANES items per row, each
// lane's sum of every LANES-th chunk, then bias + the lanes' sums in order (fc_forward's arithmetic
// with LANES lanes), so the outputs are the same however the rows are split. x (the sample's
// input) is read where it is; part: SG floats of the work area.
inline void fc_rows_forward(__global const float* x, __global const float* W, __global const float* bias, int I,
                            int O, int act, SCRATCH float* part, __global float* y_out, int row0, int rows) {
    const int lid = (int)get_local_id(0), lane = lid % LANES;
    const int o = row0 + lid / LANES, vec = I % 4 == 0 ? 4 : 1;
    __global const float* w = W + (size_t)min(o, O - 1) * I;  // rows past the group's or the last: read, never stored
    float s = 0.0f;
    for (int i = lane * vec; i < I; i += LANES * vec) s += DOT_AT(w, x, i, vec);
    part[lid] = s;
    SYNC();
    if (lid < rows && row0 + lid < O) {
        const int row = row0 + lid;
        float sum = bias[row];
        for (int l = 0; l < LANES; ++l) sum += part[lid * LANES + l];
        y_out[row] = activate(act, sum);
    }
}

// The softmax cross-entropy of the logits z [O] against the label: delta = scale * (softmax -
// target) (common.h's softmax_target: the one-hot label, or its smoothed form; scale = 1/count, the
// gradient of the batch's mean loss), the loss (against the label itself), and the hit (1 when the
// first arg-max is the label). Every item reads all the logits, in the same order.
inline void softmax_loss(SCRATCH const float* z, int O, int label, float scale, __global float* delta,
                         __global float* loss, __global int* hit) {
    const int lid = (int)get_local_id(0);
    if (lid < O) {  // no early return: step.cl's step_samples runs the backward pass after this
        int best = 0;
        for (int k = 1; k < O; ++k)
            if (z[k] > z[best]) best = k;
        const float mx = z[best];
        float total = 0.0f;
        for (int k = 0; k < O; ++k) total += exp(z[k] - mx);
        for (int o = lid; o < O; o += SG) delta[o] = scale * (exp(z[o] - mx) / total - softmax_target(o, label, O));
        if (lid == 0) {
            *loss = log(total) - (z[label] - mx);
            *hit = best == label;
        }
    }
}

// The squared error 0.5 * sum (y - t)^2 of the outputs y [O] (after the last layer's activation
// act) against the one-hot label t: delta = scale * (y - t) * act'(y), the loss (summed in output
// order by one item, as the host does) and the hit (1 when the first arg-max is the label).
inline void squared_loss(SCRATCH const float* y, int O, int act, int label, float scale, __global float* delta,
                         __global float* loss, __global int* hit) {
    const int lid = (int)get_local_id(0);
    for (int o = lid; o < O; o += SG)
        delta[o] = scale * (y[o] - (o == label ? 1.0f : 0.0f)) * activation_grad(act, y[o]);
    if (lid == 0) {
        int best = 0;
        float total = 0.0f;
        for (int k = 0; k < O; ++k) {
            if (y[k] > y[best]) best = k;
            const float e = y[k] - (k == label ? 1.0f : 0.0f);
            total += 0.5f * e * e;
        }
        *loss = total;
        *hit = best == label;
    }
}

// Fully connected backward to the layer below: d_prev[i] = act'(x[i]) * sum_o W[o][i] d[o], with x
// the layer below's output. Item (c, q) reads the VEC columns from i = c*VEC of the rows
// o = q, q + parts, ... (neighbouring items, neighbouring columns) into part[q][I]; then one item
// per column adds the parts in order. parts (a literal) fits the items and the part area.
inline void fc_backward(SCRATCH const float* d, __global const float* W, int I, int O, __global const float* x,
                        int prev_act, int parts, SCRATCH float* part, SCRATCH float* d_prev,
                        __global float* d_prev_out) {
    const int lid = (int)get_local_id(0), vec = I % 4 == 0 ? 4 : 1, columns = I / vec;
    for (int e = lid; e < columns * parts; e += SG) {
        const int c = e % columns, q = e / columns;
        if (vec == 4) {
            float4 sum = 0.0f;
            for (int o = q; o < O; o += parts) sum += ((__global const float4*)(W + (size_t)o * I))[c] * d[o];
            vstore4(sum, c, part + q * I);
        } else {
            float sum = 0.0f;
            for (int o = q; o < O; o += parts) sum += W[(size_t)o * I + c] * d[o];
            part[q * I + c] = sum;
        }
    }
    SYNC();
    for (int i = lid; i < I; i += SG) {
        float sum = 0.0f;
        for (int q = 0; q < parts; ++q) sum += part[q * I + i];
        const float v = activation_grad(prev_act, x[i]) * sum;
        d_prev[i] = v;
        d_prev_out[i] = v;
    }
    SYNC();
}

// Pair backward, from dpool [OC][PH][PW] (the subsampling's delta) and the pair's input and
// convolution output (stored by pair_forward):
// 1. the convolution's delta dc[o][cy][cx] = act'(conv_out) * coef[o] * dpool[o][cy/PK][cx/PK], kept with
//    `pad` zeros around each map (pad = K-1 when has_prev, so step 3 needs no bounds checks; maps DS
//    floats apart), and the input staged in x [IC][IH][XW];
// 2. the sample's share of the pair's gradients ("taps": every connection's K x K weights, then
//    each map's conv bias, pool coefficient and pool bias), written to part at w_at, b_at, coef_at
//    and pool_bias_at; the gradient kernel adds the samples' shares. When there are fewer taps
//    (or rows of taps) than items, `lanes` items share them (each takes every lanes-th row) and
//    tap_sum adds their sums (red: SG floats);
// 3. if has_prev, the delta of the pair's input, RUN(IW, BWD_RUN) neighbouring inputs per item:
//    d_prev[i][y][x] = act'(x) * the sum, over the connections j reading map i (in_begin, in_conn)
//    and the (ky, kx) of the window, of dc[conn_out[j]][y-ky][x-kx] * W[j][ky][kx] (zero outside
//    the map).
inline void pair_backward(SCRATCH const float* dpool, __global const float* conv_out, __global const float* in,
                          PAIR_PARAMS const float* W, PAIR_PARAMS const float* coef, __constant const int* conn_begin,
                          __constant const int* conn_in, __constant const int* conn_out,
                          __constant const int* in_begin, __constant const int* in_conn, int IC, int IH, int IW,
                          int OC, int CH, int CW, int K, int conv_act, int PK, int PH, int PW, SCRATCH float* x,
                          SCRATCH float* dc, SCRATCH float* red, __global float* part, int w_at, int b_at,
                          int coef_at, int pool_bias_at, int has_prev, int prev_act, SCRATCH float* d_prev,
                          __global float* d_prev_out) {
    const int lid = (int)get_local_id(0), M = IH * IW, C = CH * CW, P = PH * PW, KK = K * K;
    const int pad = has_prev ? K - 1 : 0, DH = CH + 2 * pad, DW = CW + 2 * pad, D = DH * DW;
    // The staged rows and the delta's maps are an odd number of floats apart (XW, DS), so that the
    // items of step 2a, which read K rows (or several maps) at the same column, hit different
    // __local banks: with C1's 32-wide rows they all hit one (5-way bank conflicts).
    const int XW = IW | 1, XM = IH * XW, DS = D | 1;
    for (int e = lid; e < OC * D; e += SG) {
        const int o = e / D, cy = e % D / DW - pad, cx = e % DW - pad;
        float v = 0.0f;
        if (cy >= 0 && cy < CH && cx >= 0 && cx < CW)
            v = activation_grad(conv_act, conv_out[(o * CH + cy) * CW + cx]) * coef[o] *
                dpool[(o * PH + cy / PK) * PW + cx / PK];
        dc[o * DS + e % D] = v;
    }
    for (int e = lid; e < IC * M; e += SG) x[e / IW * XW + e % IW] = in[e];
    SYNC();

    // 2a. The weights: an item sums a row (j, ky) of K taps, sliding along each input row, so that
    // every input is read once per row (the unrolled loop reuses the K - 1 it read before).
    const int rows = conn_begin[OC] * K, row_round = min(rows, SG), row_lanes = min(SG / row_round, CH);
    for (int t0 = 0; t0 < rows; t0 += row_round) {  // the same rounds for every item: tap_sum synchronises
        const int t = t0 + lid % row_round, lane = lid / row_round;
        const bool active = t < rows && lane < row_lanes;
        float v[MAX_K];
        for (int kx = 0; kx < K; ++kx) v[kx] = 0.0f;
        if (active) {
            const int j = t / K, ky = t % K;
            SCRATCH const float* xj = x + conn_in[j] * XM + ky * XW;
            SCRATCH const float* dco = dc + conn_out[j] * DS + pad * DW + pad;
            for (int cy = lane; cy < CH; cy += row_lanes)
                for (int cx = 0; cx < CW; ++cx) {
                    const float d = dco[cy * DW + cx];
                    for (int kx = 0; kx < K; ++kx) v[kx] += d * xj[cy * XW + cx + kx];
                }
        }
        for (int kx = 0; kx < K; ++kx) {
            const float sum = tap_sum(red, v[kx], row_round, row_lanes);
            if (active && lane == 0) part[w_at + t * K + kx] = sum;
        }
    }
    // 2b. Each map's conv bias, pool coefficient and pool bias: one tap per item (or lane).
    const int taps = 3 * OC, per_round = min(taps, SG), lanes = SG / per_round;
    for (int t0 = 0; t0 < taps; t0 += per_round) {
        const int t = t0 + lid % per_round, lane = lid / per_round, o = t % OC;
        const bool active = t < taps && lane < lanes;
        float v = 0.0f;
        int at = 0;
        if (active && t < OC) {
            SCRATCH const float* dco = dc + o * DS + pad * DW + pad;
            for (int cy = lane; cy < CH; cy += lanes)
                for (int cx = 0; cx < CW; ++cx) v += dco[cy * DW + cx];
            at = b_at + o;
        } else if (active && t < 2 * OC) {
            for (int cy = lane; cy < CH; cy += lanes)
                for (int cx = 0; cx < CW; ++cx)
                    v += dpool[(o * PH + cy / PK) * PW + cx / PK] * conv_out[(o * CH + cy) * CW + cx];
            at = coef_at + o;
        } else if (active) {
            for (int q = lane; q < P; q += lanes) v += dpool[o * P + q];
            at = pool_bias_at + o;
        }
        v = tap_sum(red, v, per_round, lanes);
        if (active && lane == 0) part[at] = v;
    }
    if (!has_prev) return;  // a literal: the whole group returns

    // Where the inputs' runs are few, two items share each: the second sums every other
    // connection from the second, and leaves its sums in d_prev for the first to add (1.5% of a
    // LeNet-5 step at batch 64 on an H200).
    const int R = RUN(IW, BWD_RUN), IR = IW / R, runs = IC * IH * IR;
    const int parts = 2 * runs <= SG ? 2 : 1;
    float sum[8];
    for (int e = lid; e < runs * parts; e += SG) {  // one round when parts is 2
        const int t = e % runs, share = e / runs;
        const int i = t / (IH * IR), iy = t % (IH * IR) / IR, ix = t % IR * R;
        for (int r = 0; r < R; ++r) sum[r] = 0.0f;
        for (int q = in_begin[i] + share; q < in_begin[i + 1]; q += parts) {
            const int j = in_conn[q];
            // dc[o][iy - ky][ix - kx], padded: always inside the padded map.
            SCRATCH const float* dco = dc + conn_out[j] * DS + (iy + pad) * DW + ix + pad;
            PAIR_PARAMS const float* wj = W + j * KK;
            for (int ky = 0; ky < K; ++ky)
                for (int kx = 0; kx < K; ++kx) {
                    const float w = wj[ky * K + kx];
                    for (int r = 0; r < R; ++r) sum[r] += dco[-ky * DW - kx + r] * w;
                }
        }
        const int at = (i * IH + iy) * IW + ix;
        if (share == 1) {
            for (int r = 0; r < R; ++r) d_prev[at + r] = sum[r];
        } else if (parts == 1) {
            const int xat = (i * IH + iy) * XW + ix;  // the same input in the staged rows
            for (int r = 0; r < R; ++r) {
                const float v = activation_grad(prev_act, x[xat + r]) * sum[r];
                d_prev[at + r] = v;
                d_prev_out[at + r] = v;
            }
        }
    }
    if (parts == 2) {
        SYNC();
        if (lid < runs) {
            const int i = lid / (IH * IR), iy = lid % (IH * IR) / IR, ix = lid % IR * R;
            const int at = (i * IH + iy) * IW + ix, xat = (i * IH + iy) * XW + ix;
            for (int r = 0; r < R; ++r) {
                const float v = activation_grad(prev_act, x[xat + r]) * (sum[r] + d_prev[at + r]);
                d_prev[at + r] = v;
                d_prev_out[at + r] = v;
            }
        }
    }
    SYNC();
}
