// The `cpu` variant: the scalar reference every other variant is checked against, each layer
// kind's own (host/model/layers/), and the update.
#include "host_ops.h"
#include "update_rule.h"
#include "model/layers/layer_type.h"

namespace lenet5 {
namespace {

// The reference of each layer kind is in its home (host/model/layers/); a layer that draws random numbers
// gets its draws from HostEngine, which calls the reference itself.
void forward(const LayerSpec& l, const float* p, const float* in, float* out) { reference_forward(l, p, in, out); }

void backward(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout, float* din,
              float* g) {
    reference_backward(l, p, in, out, dout, din, g);
}

void update(float* p, float* v, const float* g, size_t n, float lr, float momentum, float weight_decay,
            bool nesterov) {
    for (size_t i = 0; i < n; ++i) sgd_step<ScalarMath>(p[i], v[i], g[i], lr, momentum, weight_decay, nesterov);
}

}  // namespace

const HostOps& cpu_ops() {
    static const HostOps ops{forward, backward, update};
    return ops;
}

}  // namespace lenet5
