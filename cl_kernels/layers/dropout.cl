// dropout's generic kernels (host/layers/dropout.cpp has its reference): over a batch of `count`
// samples of n units each, sample s being position first + s of the epoch's order. attr.x: the rate.
//   forward:  y[s][i] = act(x[s][i] * factor), factor 0 or 1 / (1 - rate) in training, else 1
//   backward: dp[s][i] = d[s][i] * factor, times the derivative of the layer below (in_act at x)
// NDRange (round_up(n, WG), count).

inline float dropout_factor(float rate, int training, uint seed, uint step, uint sample, uint unit) {
    if (!training) return 1.0f;
    return draw_uniform(seed, step, sample, unit) < rate ? 0.0f : 1.0f / (1.0f - rate);
}

__kernel void dropout_forward(__global const float* x, __global float* y, int count, int n, float4 attr, int act,
                              uint seed, uint step, uint first, int training) {
    const int i = get_global_id(0), s = get_global_id(1);
    if (i >= n || s >= count) return;
    const size_t at = (size_t)s * n + i;
    y[at] = act_forward(act, x[at] * dropout_factor(attr.x, training, seed, step, first + s, i));
}

__kernel void dropout_backward(__global const float* x, __global const float* d, __global float* dp, int count, int n,
                               float4 attr, int in_act, uint seed, uint step, uint first) {
    const int i = get_global_id(0), s = get_global_id(1);
    if (i >= n || s >= count) return;
    const size_t at = (size_t)s * n + i;
    dp[at] = delta_of(in_act, x[at], d[at] * dropout_factor(attr.x, 1, seed, step, first + s, i));
}
