// Batch-level convolutions (host/conv/opencl_conv.cpp), three algorithms over the same layout:
// NCHW tensors, weights [OC][IC][K][K], every input map feeding every output map, zero padding P
// on all sides, stride S. Compiled together with batch_layers.cl (its act_forward and its GEMM,
// which the im2col algorithm uses) when the host asks for it (-DLENET5_CONV -DLENET5_BATCH).
// Every item owns what it writes and every sum runs in a fixed order: no atomics, and the same
// inputs give the same bits.
#if defined(LENET5_CONV) && defined(LENET5_BATCH)

// ---- direct forward: out[s][o][y][x] = act(b[o] + sum over c, ky, kx of w[o][c][ky][kx] *
// in[s][c][y*S + ky - P][x*S + kx - P]). A work-group of 256 items computes a tile of TM = 4*TMG
// output maps x TY rows x TX = 8*TXG columns of one sample: item l takes maps 4*(l % TMG) .. +3
// and 8 neighbouring outputs of one row (row (l / TMG) / TXG, columns 8*((l / TMG) % TXG) ..), 32
// sums in registers. The input channels go in rounds of CI: each round stages the tile's input
// window (CI planes of PH x PW, zeros in the padding) in `patch` and the tile's filters of those
// channels in `wl` ([c][ky][kx][map], so an item's 4 maps are one float4), both __local. K and S
// are literals in the _k3 kernels (3x3, stride 1: the loops unroll and neighbouring outputs share
// their loads). NDRange (tiles_y*tiles_x*256, ceil(OC/TM), batch), work-group (256, 1, 1).
inline void cv_direct_body(__global const float* in, __global const float* w, __global const float* b,
                           __global float* out, int IC, int IH, int IW, int OC, int OH, int OW, int P, int act,
                           int CI, __local float* patch, __local float* wl, const int K, const int S, const int TMG,
                           const int TY, const int TXG) {
    const int l = (int)get_local_id(0), mg = l % TMG, pg = l / TMG;
    const int TM = 4 * TMG, TX = 8 * TXG, r = pg / TXG, cx = pg % TXG * 8;
    const int tiles_x = (OW + TX - 1) / TX, t = (int)get_group_id(0);
    const int y0 = t / tiles_x * TY, x0 = t % tiles_x * TX, o0 = (int)get_group_id(1) * TM, s = (int)get_group_id(2);
    const int PH = (TY - 1) * S + K, PW = (TX - 1) * S + K, KK = K * K, iy0 = y0 * S - P, ix0 = x0 * S - P;
    float acc[4][8];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    for (int c0 = 0; c0 < IC; c0 += CI) {
        const int cn = min(CI, IC - c0);
        __global const float* src = in + ((size_t)s * IC + c0) * IH * IW;
        for (int e = l; e < cn * PH * PW; e += 256) {
            const int c = e / (PH * PW), q = e % (PH * PW), iy = iy0 + q / PW, ix = ix0 + q % PW;
            patch[e] = iy >= 0 && iy < IH && ix >= 0 && ix < IW ? src[((size_t)c * IH + iy) * IW + ix] : 0.0f;
        }
        for (int e = l; e < TM * cn * KK; e += 256) {
            const int m = e / (cn * KK), ct = e % (cn * KK);
            wl[ct * TM + m] = o0 + m < OC ? w[((size_t)(o0 + m) * IC + c0) * KK + ct] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int c = 0; c < cn; ++c)
#pragma unroll
            for (int ky = 0; ky < K; ++ky) {
                __local const float* row = patch + (c * PH + r * S + ky) * PW + cx * S;
                __local const float* wr = wl + (c * KK + ky * K) * TM + mg * 4;
#pragma unroll
                for (int kx = 0; kx < K; ++kx) {
                    const float4 wv = vload4(0, wr + kx * TM);
#pragma unroll
                    for (int j = 0; j < 8; ++j) {
                        const float v = row[j * S + kx];
                        acc[0][j] = mad(wv.s0, v, acc[0][j]);
                        acc[1][j] = mad(wv.s1, v, acc[1][j]);
                        acc[2][j] = mad(wv.s2, v, acc[2][j]);
                        acc[3][j] = mad(wv.s3, v, acc[3][j]);
                    }
                }
            }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int y = y0 + r;
    if (y >= OH) return;
    for (int i = 0; i < 4; ++i) {
        const int o = o0 + mg * 4 + i;
        if (o >= OC) break;
        __global float* dst = out + (((size_t)s * OC + o) * OH + y) * OW;
        for (int j = 0; j < 8; ++j)
            if (x0 + cx + j < OW) dst[x0 + cx + j] = act_forward(act, acc[i][j] + b[o]);
    }
}

// The tile shapes (TMG, TY, TXG): m64 for many output maps, m16, and m4 for a few maps over wide
// planes (the seed's single filter). The host picks by the number of maps and what fits __local.
#define CV_DIRECT(NAME, KC, SC, TMG, TY, TXG)                                                                    \
    __kernel __attribute__((reqd_work_group_size(256, 1, 1))) void NAME(                                       \
        __global const float* in, __global const float* w, __global const float* b, __global float* out, int IC, \
        int IH, int IW, int OC, int OH, int OW, int K, int S, int P, int act, int CI, __local float* patch,      \
        __local float* wl) {                                                                                   \
        cv_direct_body(in, w, b, out, IC, IH, IW, OC, OH, OW, P, act, CI, patch, wl, KC, SC, TMG, TY, TXG);   \
    }
CV_DIRECT(cv_direct_m64_k3, 3, 1, 16, 8, 2)
CV_DIRECT(cv_direct_m64, K, S, 16, 8, 2)
CV_DIRECT(cv_direct_m16_k3, 3, 1, 4, 8, 8)
CV_DIRECT(cv_direct_m16, K, S, 4, 8, 8)
CV_DIRECT(cv_direct_m4_k3, 3, 1, 1, 16, 16)
CV_DIRECT(cv_direct_m4, K, S, 1, 16, 16)

// Direct forward for at most CV_FEW_MAPS output maps at strides above 1 (the seed's 3 channels,
// one filter): memory-bound, so no __local staging (the tiles above would stage whole strided
// rows, 4 to 64 maps of filters and 32 sums per item for one map). An item computes output (y, x)
// of every map from global memory: a warp's loads of a tap row are neighbouring x*S + kx, so the
// K loads of the row cover one contiguous stretch of the input row (the line the first load brings
// serves the next taps from L1), and each input element is fetched about once (twice where windows
// of stride 2 overlap). NDRange (round_up(OW, WG), OH, batch).
#define CV_FEW_MAPS 4
__kernel void cv_direct_few(__global const float* in, __global const float* w, __global const float* b,
                            __global float* out, int IC, int IH, int IW, int OC, int OH, int OW, int K, int S, int P,
                            int act) {
    const int x = (int)get_global_id(0), y = (int)get_global_id(1), s = (int)get_global_id(2);
    if (x >= OW) return;
    float acc[CV_FEW_MAPS] = {0.0f};
    const int iy0 = y * S - P, ix0 = x * S - P, KK = K * K;
    for (int c = 0; c < IC; ++c) {
        __global const float* src = in + ((size_t)s * IC + c) * IH * IW;
        for (int ky = 0; ky < K; ++ky) {
            const int iy = iy0 + ky;
            if (iy < 0 || iy >= IH) continue;
            for (int kx = 0; kx < K; ++kx) {
                const int ix = ix0 + kx;
                const float v = ix >= 0 && ix < IW ? src[(size_t)iy * IW + ix] : 0.0f;
#pragma unroll
                for (int o = 0; o < CV_FEW_MAPS; ++o)
                    if (o < OC) acc[o] = mad(w[((size_t)o * IC + c) * KK + ky * K + kx], v, acc[o]);
            }
        }
    }
#pragma unroll
    for (int o = 0; o < CV_FEW_MAPS; ++o)
        if (o < OC) out[(((size_t)s * OC + o) * OH + y) * OW + x] = act_forward(act, acc[o] + b[o]);
}

// wf[c][o][ky][kx] = w[o][c][K-1-ky][K-1-kx]: with these weights and padding K-1-P, the direct
// forward kernel of stride 1 computes the input gradient. NDRange (round_up(OC*IC*K*K, WG)).
__kernel void cv_flip_weights(__global const float* w, __global float* wf, int IC, int OC, int K) {
    const int e = (int)get_global_id(0), KK = K * K;
    if (e >= OC * IC * KK) return;
    const int o = e / (IC * KK), c = e / KK % IC, t = e % KK;
    wf[((size_t)c * OC + o) * KK + KK - 1 - t] = w[e];
}

// The output (y, x) = ((iy + P - ky) / S, (ix + P - kx) / S) that tap (ky, kx) of input (iy, ix)
// feeds, if any: the loops of the gathers below (input gradient, col2im).
#define CV_FOR_TAPS(BODY)                                                       \
    for (int ky = 0; ky < K; ++ky) {                                            \
        const int ty = iy + P - ky;                                             \
        if (ty < 0 || ty % S || ty / S >= OH) continue;                         \
        for (int kx = 0; kx < K; ++kx) {                                        \
            const int tx = ix + P - kx;                                         \
            if (tx < 0 || tx % S || tx / S >= OW) continue;                     \
            const int yx = ty / S * OW + tx / S, kk = ky * K + kx;              \
            BODY                                                                \
        }                                                                       \
    }

// direct input gradient (strides above 1): din[s][c][iy][ix] = sum over o and the taps that read
// it of d[s][o][y][x] * w[o][c][ky][kx]. NDRange (round_up(IH*IW, WG), batch*IC).
__kernel void cv_backward_data(__global const float* d, __global const float* w, __global float* din, int IC, int IH,
                               int IW, int OC, int OH, int OW, int K, int S, int P) {
    const int q = (int)get_global_id(0), sc = (int)get_global_id(1);
    if (q >= IH * IW) return;
    const int s = sc / IC, c = sc % IC, iy = q / IW, ix = q % IW;
    float sum = 0.0f;
    for (int o = 0; o < OC; ++o) {
        __global const float* dm = d + ((size_t)s * OC + o) * OH * OW;
        __global const float* wm = w + ((size_t)o * IC + c) * K * K;
        CV_FOR_TAPS(sum = mad(dm[yx], wm[kk], sum);)
    }
    din[(size_t)sc * IH * IW + q] = sum;
}

// direct weight and bias gradients, in shares: share r = g*chunks + h covers samples
// [g*per, min(batch, (g+1)*per)) and output rows [h*rows, min(OH, (h+1)*rows)); part[r][e]: e < W =
// OC*IC*K*K: weight e, else the bias of map e - W. NDRange (round_up(W + OC, WG), shares).
__kernel void cv_weight_partials(__global const float* in, __global const float* d, __global float* part, int batch,
                                 int IC, int IH, int IW, int OC, int OH, int OW, int K, int S, int P, int per,
                                 int rows) {
    const int e = (int)get_global_id(0), r = (int)get_global_id(1), KK = K * K, W = OC * IC * KK;
    if (e >= W + OC) return;
    const int chunks = (OH + rows - 1) / rows, g = r / chunks, y0 = r % chunks * rows, y1 = min(OH, y0 + rows);
    const int o = e < W ? e / (IC * KK) : e - W, c = e / KK % IC, ky = e % KK / K, kx = e % K;
    float sum = 0.0f;
    for (int s = g * per; s < min(batch, (g + 1) * per); ++s) {
        __global const float* dm = d + ((size_t)s * OC + o) * OH * OW;
        __global const float* src = in + ((size_t)s * IC + c) * IH * IW;
        for (int y = y0; y < y1; ++y) {
            const int iy = y * S + ky - P;
            if (e < W && (iy < 0 || iy >= IH)) continue;
            for (int x = 0; x < OW; ++x) {
                const int ix = x * S + kx - P;
                if (e >= W) sum += dm[y * OW + x];
                else if (ix >= 0 && ix < IW) sum = mad(dm[y * OW + x], src[iy * IW + ix], sum);
            }
        }
    }
    part[(size_t)r * (W + OC) + e] = sum;
}

// dw[e] (e < W) or db[e - W] = the sum of the shares part[r][e] in order. NDRange (round_up(W + OC, WG)).
__kernel void cv_sum_shares(__global const float* part, int shares, int W, int OC, __global float* dw,
                            __global float* db) {
    const int e = (int)get_global_id(0);
    if (e >= W + OC) return;
    float sum = 0.0f;
    for (int r = 0; r < shares; ++r) sum += part[(size_t)r * (W + OC) + e];
    if (e < W) dw[e] = sum;
    else db[e - W] = sum;
}

// ---- im2col: the windows of samples s0 .. s0+cn-1 as a matrix col[c*K*K + ky*K + kx][j*OH*OW + y*OW
// + x] (j = s - s0), zeros in the padding. NDRange (round_up(cn*OH*OW, WG), IC*K*K).
__kernel void cv_im2col(__global const float* in, __global float* col, int s0, int cn, int IC, int IH, int IW, int OH,
                        int OW, int K, int S, int P) {
    const int q = (int)get_global_id(0), row = (int)get_global_id(1), PP = OH * OW;
    if (q >= cn * PP) return;
    const int j = q / PP, p = q % PP, c = row / (K * K), ky = row % (K * K) / K, kx = row % K;
    const int iy = p / OW * S + ky - P, ix = p % OW * S + kx - P;
    col[(size_t)row * cn * PP + q] =
        iy >= 0 && iy < IH && ix >= 0 && ix < IW ? in[(((size_t)(s0 + j) * IC + c) * IH + iy) * IW + ix] : 0.0f;
}

// col2im: din[s0 + j][c][iy][ix] = the sum of the col entries of the taps that read it.
// NDRange (round_up(IH*IW, WG), cn*IC).
__kernel void cv_col2im(__global const float* col, __global float* din, int s0, int cn, int IC, int IH, int IW, int OH,
                        int OW, int K, int S, int P) {
    const int q = (int)get_global_id(0), jc = (int)get_global_id(1), PP = OH * OW;
    if (q >= IH * IW) return;
    const int j = jc / IC, c = jc % IC, iy = q / IW, ix = q % IW;
    __global const float* cc = col + (size_t)c * K * K * cn * PP + (size_t)j * PP;
    float sum = 0.0f;
    CV_FOR_TAPS(sum += cc[(size_t)kk * cn * PP + yx];)
    din[((size_t)(s0 + j) * IC + c) * IH * IW + q] = sum;
}

// Samples s0 .. s0+cn-1 of an NCHW tensor with C maps of PP values, between the layout [s][c][p]
// and [c][j][p] (the GEMM's: maps as rows): to_cm 1 copies into the latter, 0 back.
// NDRange (round_up(PP, WG), cn*C).
__kernel void cv_reorder(__global const float* src, __global float* dst, int s0, int cn, int C, int PP, int to_cm) {
    const int p = (int)get_global_id(0), jc = (int)get_global_id(1);
    if (p >= PP) return;
    const int j = jc / C, c = jc % C;
    const size_t nchw = ((size_t)(s0 + j) * C + c) * PP + p, cm = ((size_t)c * cn + j) * PP + p;
    if (to_cm) dst[cm] = src[nchw];
    else dst[nchw] = src[cm];
}

// d[i] = delta_of(act, y[i], d[i]): an input gradient times the derivative of the activation that
// produced the input y (the batch-level engine's deltas). NDRange (round_up(n, WG)).
__kernel void cv_delta(__global float* d, __global const float* y, int n, int act) {
    const int i = (int)get_global_id(0);
    if (i < n) d[i] = delta_of(act, y[i], d[i]);
}

// out[s][o][p] = act(out[s][o][p] + b[o]) (after CLBlast's Convgemm). NDRange (round_up(PP, WG), batch*OC).
__kernel void cv_bias_act(__global float* out, __global const float* b, int OC, int PP, int act) {
    const int p = (int)get_global_id(0), so = (int)get_global_id(1);
    if (p >= PP) return;
    const size_t at = (size_t)so * PP + p;
    out[at] = act_forward(act, out[at] + b[so % OC]);
}

// db[o] = the sum over the batch and the map of d[s][o][p]: a work-group per map, item l sums the
// values l, l + 256, ... in order, then the 256 sums are added up in a fixed tree.
// NDRange (OC*256), work-group (256).
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void cv_bias_grad(__global const float* d,
                                                                             __global float* db, int batch, int OC,
                                                                             int PP) {
    __local float sums[256];
    const int l = (int)get_local_id(0), o = (int)get_group_id(0);
    float sum = 0.0f;
    for (int e = l; e < batch * PP; e += 256) sum += d[((size_t)(e / PP) * OC + o) * PP + e % PP];
    sums[l] = sum;
    for (int h = 128; h > 0; h /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (l < h) sums[l] += sums[l + h];
    }
    if (l == 0) db[o] = sums[0];
}

// ---- Winograd F(4x4, 3x3), stride 1 (host/conv/winograd_host.h has the maths):
// tile t (of T = batch x tiles_h x tiles_w) covers outputs 4*ty .. +3, 4*tx .. +3 of its sample.
// cv_wino_input: V[xi][c][t] = (B^T d B)[xi] of the tile's 6x6 input patch d in map c (zeros in
// the padding). NDRange (round_up(T, WG), C).
inline void wino_bt(const float* x, int step, float* o) {  // B^T x over x[0], x[step], .. x[5*step]
    const float x0 = x[0], x1 = x[step], x2 = x[2 * step], x3 = x[3 * step], x4 = x[4 * step], x5 = x[5 * step];
    o[0] = 4.0f * x0 - 5.0f * x2 + x4;
    o[1] = -4.0f * x1 - 4.0f * x2 + x3 + x4;
    o[2] = 4.0f * x1 - 4.0f * x2 - x3 + x4;
    o[3] = -2.0f * x1 - x2 + 2.0f * x3 + x4;
    o[4] = 2.0f * x1 - x2 - 2.0f * x3 + x4;
    o[5] = 4.0f * x1 - 5.0f * x3 + x5;
}

__kernel void cv_wino_input(__global const float* in, __global float* V, int C, int IH, int IW, int P, int tiles_w,
                            int tiles, int T) {
    const int t = (int)get_global_id(0), c = (int)get_global_id(1);
    if (t >= T) return;
    const int s = t / tiles, r = t % tiles, y0 = r / tiles_w * 4 - P, x0 = r % tiles_w * 4 - P;
    __global const float* plane = in + ((size_t)s * C + c) * IH * IW;
    float d[36], u[36], v[6];
    for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
            const int y = y0 + i, x = x0 + j;
            d[i * 6 + j] = y >= 0 && y < IH && x >= 0 && x < IW ? plane[y * IW + x] : 0.0f;
        }
    for (int j = 0; j < 6; ++j) {  // B^T d, column by column
        wino_bt(d + j, 6, v);
        for (int i = 0; i < 6; ++i) u[i * 6 + j] = v[i];
    }
    for (int i = 0; i < 6; ++i) {  // (B^T d) B, row by row
        wino_bt(u + i * 6, 1, v);
        for (int j = 0; j < 6; ++j) V[((size_t)(i * 6 + j) * C + c) * T + t] = v[j];
    }
}

// cv_wino_output: out[s][o][4*ty + i][4*tx + j] = act((A^T M A)[i][j] + b[o]) from M[xi][o][t] (the
// 36 GEMMs' products), the outputs past the edge dropped. NDRange (round_up(T, WG), OC).
inline void wino_at(const float* x, int step, float* o) {  // A^T x: four values from six
    const float a = x[step] + x[2 * step], b = x[step] - x[2 * step], c = x[3 * step] + x[4 * step],
                d = x[3 * step] - x[4 * step];
    o[0] = x[0] + a + c;
    o[1] = b + 2.0f * d;
    o[2] = a + 4.0f * c;
    o[3] = b + 8.0f * d + x[5 * step];
}

__kernel void cv_wino_output(__global const float* M, __global const float* b, __global float* out, int OC, int OH,
                             int OW, int tiles_w, int tiles, int T, int act) {
    const int t = (int)get_global_id(0), o = (int)get_global_id(1);
    if (t >= T) return;
    const int s = t / tiles, r = t % tiles, y0 = r / tiles_w * 4, x0 = r % tiles_w * 4;
    float m[36], u[24], v[4];
    for (int k = 0; k < 36; ++k) m[k] = M[((size_t)k * OC + o) * T + t];
    for (int j = 0; j < 6; ++j) {  // A^T m, column by column
        wino_at(m + j, 6, v);
        for (int i = 0; i < 4; ++i) u[i * 6 + j] = v[i];
    }
    __global float* plane = out + ((size_t)s * OC + o) * OH * OW;
    const float bias = b[o];
    for (int i = 0; i < 4 && y0 + i < OH; ++i) {  // (A^T m) A, row by row
        wino_at(u + i * 6, 1, v);
        for (int j = 0; j < 4 && x0 + j < OW; ++j) plane[(y0 + i) * OW + x0 + j] = act_forward(act, v[j] + bias);
    }
}

// cv_wino_filters: U[o][xi][c] = (G g G^T)[xi] (winograd_host.h's winograd_filters, in float) for
// g = w[o][c] (flip 0: w is OC x C x 3 x 3), or for the input gradient's convolution (flip 1: w is
// the forward's C x OC x 3 x 3) g = w[c][o] turned by 180 degrees. NDRange (round_up(OC*C, WG)).
inline void wino_g(float g0, float g1, float g2, float* o) {  // G (g0, g1, g2): six values from three
    o[0] = 0.25f * g0;
    o[1] = -(g0 + g1 + g2) / 6.0f;
    o[2] = -(g0 - g1 + g2) / 6.0f;
    o[3] = g0 / 24.0f + g1 / 12.0f + g2 / 6.0f;
    o[4] = g0 / 24.0f - g1 / 12.0f + g2 / 6.0f;
    o[5] = g2;
}

__kernel void cv_wino_filters(__global const float* w, __global float* U, int OC, int C, int flip) {
    const int e = (int)get_global_id(0);
    if (e >= OC * C) return;
    const int o = e / C, c = e % C;
    float g[9], r[18], v[6];
    for (int k = 0; k < 9; ++k) g[k] = flip ? w[((size_t)c * OC + o) * 9 + 8 - k] : w[((size_t)o * C + c) * 9 + k];
    for (int k = 0; k < 3; ++k) {  // G g, column by column
        wino_g(g[k], g[3 + k], g[6 + k], v);
        for (int i = 0; i < 6; ++i) r[i * 3 + k] = v[i];
    }
    for (int i = 0; i < 6; ++i) {  // (G g) G^T, row by row
        wino_g(r[i * 3], r[i * 3 + 1], r[i * 3 + 2], v);
        for (int k = 0; k < 6; ++k) U[((size_t)o * 36 + i * 6 + k) * C + c] = v[k];
    }
}

#endif  // LENET5_CONV && LENET5_BATCH
