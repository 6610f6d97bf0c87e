// The optimizer step (compiled after common.h): one launch over the whole flat buffer.

// SGD with momentum and L2 weight decay (common.h's sgd_step) on every parameter.
// params, velocity, grads [n]. NDRange (round_up(n, WG)): one item per parameter.
__kernel void sgd_momentum(__global float* params, __global float* velocity, __global const float* grads, int n,
                           float lr, float momentum, float weight_decay) {
    const int i = (int)get_global_id(0);
    if (i >= n) return;
    sgd_step(params, velocity, i, grads[i], lr, momentum, weight_decay);
}
