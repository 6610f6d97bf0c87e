// The inference kernels of `lenet5 infer` (host/infer/infer_opencl.cpp) that batch_layers.cl lacks;
// compiled after it (act_forward and the BA_* activations come from there). Its GEMM computes the
// convolutions (over the windows unrolled here) and the fully connected layers, its pool_forward
// the square unpadded poolings. The batch-level engine's inference (host/opencl/batch_inference.h)
// runs infer_dense.
#ifdef LENET5_BATCH

// One sample's windows: col[(c*KH + ky)*KW + kx][p] = in[c][y*SH - PT + ky][x*SW - PL + kx] for
// output pixel p = y*OW + x (0 in the padding). NDRange (round_up(OH*OW, WG), C*KH*KW).
__kernel void infer_im2col(__global const float* in, int in_off, __global float* col, int IH, int IW, int OH, int OW,
                           int KH, int KW, int SH, int SW, int PT, int PL) {
    const int p = (int)get_global_id(0), row = (int)get_global_id(1);
    if (p >= OH * OW) return;
    const int kx = row % KW, ky = row / KW % KH, c = row / (KW * KH);
    const int iy = p / OW * SH - PT + ky, ix = p % OW * SW - PL + kx;
    col[(size_t)row * OH * OW + p] =
        iy >= 0 && iy < IH && ix >= 0 && ix < IW ? in[in_off + ((size_t)c * IH + iy) * IW + ix] : 0.0f;
}

// Pooling over KH x KW windows with strides and padding (what pool_forward does not take):
// max over the inputs inside the input, or their sum divided by the window's size
// (include_pad) or by the inputs inside. NDRange (round_up(OH*OW, WG), count*C).
__kernel void infer_pool(__global const float* in, __global float* out, int IH, int IW, int OH, int OW, int KH, int KW,
                         int SH, int SW, int PT, int PL, int is_max, int include_pad) {
    const int p = (int)get_global_id(0), sc = (int)get_global_id(1);
    if (p >= OH * OW) return;
    const int y0 = p / OW * SH - PT, x0 = p % OW * SW - PL;
    __global const float* src = in + (size_t)sc * IH * IW;
    float r = is_max ? -INFINITY : 0.0f;
    int taps = 0;
    for (int ky = max(0, -y0); ky < KH && y0 + ky < IH; ++ky)
        for (int kx = max(0, -x0); kx < KW && x0 + kx < IW; ++kx) {
            const float v = src[(y0 + ky) * IW + x0 + kx];
            r = is_max ? fmax(r, v) : r + v;
            ++taps;
        }
    out[(size_t)sc * OH * OW + p] = is_max ? r : r / (float)(include_pad ? KH * KW : max(taps, 1));
}

// y[e] = act(x[e] + x2[e]) (add 1) or act(x[e]) (add 0). NDRange (round_up(n, WG)).
__kernel void infer_eltwise(__global const float* x, __global const float* x2, __global float* y, int n, int add,
                            int act) {
    const int e = (int)get_global_id(0);
    if (e >= n) return;
    y[e] = act_forward(act, add ? x[e] + x2[e] : x[e]);
}

// y[e] = act(x[e] * factor[e % size] + addend[e % size]). NDRange (round_up(n, WG)).
__kernel void infer_affine(__global const float* x, __global const float* factor, __global const float* addend,
                           __global float* y, int n, int size, int act) {
    const int e = (int)get_global_id(0);
    if (e >= n) return;
    y[e] = act_forward(act, x[e] * factor[e % size] + addend[e % size]);
}

// Each IH x IW map inside an OH x OW one of `value`, PT rows above and PL columns left of it.
// NDRange (round_up(OH*OW, WG), count*C).
__kernel void infer_pad(__global const float* in, __global float* out, int IH, int IW, int OH, int OW, int PT, int PL,
                        float value) {
    const int p = (int)get_global_id(0), m = (int)get_global_id(1);
    if (p >= OH * OW) return;
    const int y = p / OW - PT, x = p % OW - PL;
    out[(size_t)m * OH * OW + p] = y >= 0 && y < IH && x >= 0 && x < IW ? in[((size_t)m * IH + y) * IW + x] : value;
}

// Softmax of each sample's n values, one item per sample. NDRange (round_up(count, WG)).
__kernel void infer_softmax(__global const float* x, __global float* y, int n, int count) {
    const int s = (int)get_global_id(0);
    if (s >= count) return;
    __global const float* a = x + (size_t)s * n;
    __global float* b = y + (size_t)s * n;
    float top = a[0];
    for (int e = 1; e < n; ++e) top = fmax(top, a[e]);
    float sum = 0.0f;
    for (int e = 0; e < n; ++e) sum += b[e] = exp(a[e] - top);
    for (int e = 0; e < n; ++e) b[e] /= sum;
}

#endif

#ifdef LENET5_BATCH
// A fully connected layer over up to 16 samples: y[y_off + s*O + o] = act(b[o] + sum_i w[o][i]
// x[x_off + s*I + i]), s < ns. One work-group per unit o, its items striding over i (each weight
// read once, coalesced), the items' partial sums added in a fixed tree order. NDRange (O*256),
// work-group (256).
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void infer_dense(
    __global const float* x, int x_off, __global const float* w, __global const float* b, __global float* y,
    int y_off, int I, int O, int ns, int act) {
    const int o = (int)get_group_id(0), l = (int)get_local_id(0);
    __local float part[16][256];
    float acc[16];
    for (int s = 0; s < 16; ++s) acc[s] = 0.0f;
    __global const float* row = w + (size_t)o * I;
    for (int i = l; i < I; i += 256) {
        const float wv = row[i];
        for (int s = 0; s < ns; ++s) acc[s] = mad(wv, x[x_off + (size_t)s * I + i], acc[s]);
    }
    for (int s = 0; s < 16; ++s) part[s][l] = acc[s];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = 128; h > 0; h >>= 1) {
        if (l < h)
            for (int s = 0; s < ns; ++s) part[s][l] += part[s][l + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l < ns) y[y_off + (size_t)l * O + o] = act_forward(act, part[l][0] + b[o]);
}
#endif
