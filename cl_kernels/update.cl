// The optimizer step over the whole flat buffer (compiled after update_rule.h), one item per
// parameter: params, velocity (Adam's first moment), grads [n]. NDRange (round_up(n, WG)).

__kernel void sgd_momentum(__global float* params, __global float* velocity, __global const float* grads, int n,
                           float lr, float momentum, float weight_decay) {
    const int i = (int)get_global_id(0);
    if (i >= n) return;
    sgd_step(params, velocity, i, grads[i], lr, momentum, weight_decay);
}

#ifdef ADAM_C1
// second [n]: Adam's second moment. The scalars are the host's AdamStep's for this update.
__kernel void adam_update(__global float* params, __global float* velocity, __global float* second,
                          __global const float* grads, int n, float weight_decay, float decay, float step_size,
                          float bias2_sqrt) {
    const int i = (int)get_global_id(0);
    if (i >= n) return;
    adam_step(params, velocity, second, i, grads[i], weight_decay, decay, step_size, bias2_sqrt);
}
#endif
