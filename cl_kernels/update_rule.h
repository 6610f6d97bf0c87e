// The update rule of the OpenCL kernels, in one place (cpu_opt/update_rule.h is the host's, the same
// arithmetic). Both programs include it: the per-sample kernels' (after common.h) and the batch
// engine's. Its options, from the host's TrainingRule:
//   -DNESTEROV   Nesterov momentum
//   -DADAM_C1, -DADAM_BETA2, -DADAM_C2, -DADAM_EPS   Adam or AdamW: 1 - beta1, beta2, 1 - beta2, eps

// SGD on p and its velocity v (lvalues of type T: float, float2 or float4), g their gradient:
// v = momentum*v + g + weight_decay*p; p -= lr*v, or with -DNESTEROV p -= lr*(g + weight_decay*p +
// momentum*v) with the new v. A macro, so the vector updates (batch_layers.cl's fc_sgd*) share it.
#ifdef NESTEROV
#define SGD_STEP(T, p, v, g, lr, momentum, weight_decay)       \
    do {                                                       \
        const T gw_ = (g) + (weight_decay) * (p);              \
        (v) = (momentum) * (v) + gw_;                          \
        (p) -= (lr) * (gw_ + (momentum) * (v));                \
    } while (0)
#else
#define SGD_STEP(T, p, v, g, lr, momentum, weight_decay)       \
    do {                                                       \
        (v) = (momentum) * (v) + ((g) + (weight_decay) * (p)); \
        (p) -= (lr) * (v);                                     \
    } while (0)
#endif

// SGD_STEP on parameter i of the flat buffers.
inline void sgd_step(__global float* params, __global float* velocity, int i, float g, float lr, float momentum,
                     float weight_decay) {
    float p = params[i], v = velocity[i];
    SGD_STEP(float, p, v, g, lr, momentum, weight_decay);
    velocity[i] = v;
    params[i] = p;
}

#ifdef ADAM_C1
// Adam on parameter i, first and second moments m1 and m2: the host's adam_param, with the step's
// scalars of its AdamStep (weight_decay: Adam's L2; decay: AdamW's 1 - lr*wd).
inline void adam_step(__global float* params, __global float* m1, __global float* m2, int i, float g,
                      float weight_decay, float decay, float step_size, float bias2_sqrt) {
    float p = params[i];
    g += weight_decay * p;
    p *= decay;
    const float m = m1[i] + ADAM_C1 * (g - m1[i]);
    const float v = m2[i] * ADAM_BETA2 + ADAM_C2 * g * g;
    m1[i] = m;
    m2[i] = v;
    params[i] = p - step_size * (m / (sqrt(v) / bias2_sqrt + ADAM_EPS));
}
#endif
