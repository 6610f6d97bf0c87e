// The kernel of the batch-level engine's inference (host/opencl/batch_inference.h) that
// batch_layers.cl lacks; compiled after it (act_forward and the BA_* activations come from there).
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
