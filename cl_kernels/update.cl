// The optimizer step (compiled after common.h): one launch over the whole flat buffer.

// SGD with momentum and L2 weight decay: v = momentum*v + g + weight_decay*p; p -= lr*v.
// params, velocity, grads [n]. NDRange (round_up(n, WG)): one item per parameter.
__kernel void sgd_momentum(__global float* params, __global float* velocity, __global const float* grads, int n,
                           float lr, float momentum, float weight_decay) {
    const int i = (int)get_global_id(0);
    if (i >= n) return;
    const float v = momentum * velocity[i] + (grads[i] + weight_decay * params[i]);
    velocity[i] = v;
    params[i] -= lr * v;
}
