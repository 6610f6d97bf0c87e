// The scalar reference: every other variant is checked against these loops.
// Tensors are one sample's maps, [channels][height][width], row-major.
#include <algorithm>
#include <cmath>

#include "host_ops.h"
#include "update_rule.h"

namespace lenet5 {
namespace {

// dout (gradient after the activation) becomes the gradient before it; each derivative
// is written in terms of the output y.
void activation_backward(Activation a, const float* out, float* dout, int n) {
    for (int i = 0; i < n; ++i) {
        const float y = out[i];
        switch (a) {
            case Activation::Tanh: dout[i] *= 1.0f - y * y; break;
            case Activation::Sigmoid: dout[i] *= y * (1.0f - y); break;
            case Activation::ReLU: dout[i] = y > 0.0f ? dout[i] : 0.0f; break;
            case Activation::None: return;
        }
    }
}

// in [in.c][in.h][in.w] -> out [out.c][out.h][out.w]; out map o sums its connections j,
// each a KxK kernel W[j] sliding by the stride over input map conn_in[j], zero-padded by pad.
// Output (y, x) with tap (ky, kx) reads input row y*stride + ky - pad, column x*stride + kx - pad.
void conv_forward(const LayerSpec& l, const float* p, const float* in, float* out) {
    const int K = l.kernel, S = l.stride, P = l.pad, OH = l.out.h, OW = l.out.w, IH = l.in.h, IW = l.in.w;
    const float* W = p + l.weight_offset;
    const float* b = p + l.bias_offset;
    for (int o = 0; o < l.out.c; ++o)
        for (int y = 0; y < OH; ++y)
            for (int x = 0; x < OW; ++x) {
                float s = b[o];
                for (int j = l.conn_begin[o]; j < l.conn_begin[o + 1]; ++j) {
                    const float* src = in + l.conn_in[j] * IH * IW;
                    const float* w = W + j * K * K;
                    for (int ky = 0; ky < K; ++ky) {
                        const int iy = y * S + ky - P;
                        if (iy < 0 || iy >= IH) continue;
                        for (int kx = 0; kx < K; ++kx) {
                            const int ix = x * S + kx - P;
                            if (ix >= 0 && ix < IW) s += src[iy * IW + ix] * w[ky * K + kx];
                        }
                    }
                }
                out[(o * OH + y) * OW + x] = activate(l.activation, s);
            }
}

void conv_backward(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout, float* din,
                   float* g) {
    const int K = l.kernel, S = l.stride, P = l.pad, OH = l.out.h, OW = l.out.w, IH = l.in.h, IW = l.in.w;
    activation_backward(l.activation, out, dout, l.out.size());
    const float* W = p + l.weight_offset;
    float* gW = g + l.weight_offset;
    float* gb = g + l.bias_offset;
    if (din)
        for (int i = 0; i < l.in.size(); ++i) din[i] = 0.0f;
    for (int j = 0; j < l.connections(); ++j) {
        const int o = l.conn_out[j], i = l.conn_in[j];
        const float* src = in + i * IH * IW;
        const float* d = dout + o * OH * OW;
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx) {
                float s = 0.0f;
                for (int y = 0; y < OH; ++y) {
                    const int iy = y * S + ky - P;
                    if (iy < 0 || iy >= IH) continue;
                    for (int x = 0; x < OW; ++x) {
                        const int ix = x * S + kx - P;
                        if (ix >= 0 && ix < IW) s += d[y * OW + x] * src[iy * IW + ix];
                    }
                }
                gW[j * K * K + ky * K + kx] += s;
            }
        if (din) {
            float* dst = din + i * IH * IW;
            const float* w = W + j * K * K;
            for (int y = 0; y < OH; ++y)
                for (int x = 0; x < OW; ++x)
                    for (int ky = 0; ky < K; ++ky) {
                        const int iy = y * S + ky - P;
                        if (iy < 0 || iy >= IH) continue;
                        for (int kx = 0; kx < K; ++kx) {
                            const int ix = x * S + kx - P;
                            if (ix >= 0 && ix < IW) dst[iy * IW + ix] += d[y * OW + x] * w[ky * K + kx];
                        }
                    }
        }
    }
    for (int o = 0; o < l.out.c; ++o) {
        float s = 0.0f;
        for (int k = 0; k < OH * OW; ++k) s += dout[o * OH * OW + k];
        gb[o] += s;
    }
}

// out[c][y][x] = act(coef[c] * sum of the KxK window + bias[c]).
void subsample_forward(const LayerSpec& l, const float* p, const float* in, float* out) {
    const int K = l.kernel, OH = l.out.h, OW = l.out.w, IH = l.in.h, IW = l.in.w;
    const float* coef = p + l.weight_offset;
    const float* b = p + l.bias_offset;
    for (int c = 0; c < l.out.c; ++c)
        for (int y = 0; y < OH; ++y)
            for (int x = 0; x < OW; ++x) {
                float s = 0.0f;
                for (int ky = 0; ky < K; ++ky)
                    for (int kx = 0; kx < K; ++kx) s += in[(c * IH + y * K + ky) * IW + x * K + kx];
                out[(c * OH + y) * OW + x] = activate(l.activation, coef[c] * s + b[c]);
            }
}

void subsample_backward(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout,
                        float* din, float* g) {
    const int K = l.kernel, OH = l.out.h, OW = l.out.w, IH = l.in.h, IW = l.in.w;
    activation_backward(l.activation, out, dout, l.out.size());
    const float* coef = p + l.weight_offset;
    for (int c = 0; c < l.out.c; ++c) {
        float gcoef = 0.0f, gbias = 0.0f;
        for (int y = 0; y < OH; ++y)
            for (int x = 0; x < OW; ++x) {
                const float d = dout[(c * OH + y) * OW + x];
                float s = 0.0f;
                for (int ky = 0; ky < K; ++ky)
                    for (int kx = 0; kx < K; ++kx) {
                        const int at = (c * IH + y * K + ky) * IW + x * K + kx;
                        s += in[at];
                        if (din) din[at] = d * coef[c];
                    }
                gcoef += d * s;
                gbias += d;
            }
        g[l.weight_offset + c] += gcoef;
        g[l.bias_offset + c] += gbias;
    }
}

// Max or average over each KxK window sliding by the stride: out[c][y][x] = act(pool(window)).
// Max pooling passes the gradient to the window's first largest input.
void pool_forward(const LayerSpec& l, const float*, const float* in, float* out) {
    const int K = l.kernel, S = l.stride, OH = l.out.h, OW = l.out.w, IH = l.in.h, IW = l.in.w;
    const bool max = l.kind == LayerKind::MaxPool;
    for (int c = 0; c < l.out.c; ++c)
        for (int y = 0; y < OH; ++y)
            for (int x = 0; x < OW; ++x) {
                const float* w = in + (c * IH + y * S) * IW + x * S;
                float r = max ? w[0] : 0.0f;
                for (int ky = 0; ky < K; ++ky)
                    for (int kx = 0; kx < K; ++kx) r = max ? std::max(r, w[ky * IW + kx]) : r + w[ky * IW + kx];
                out[(c * OH + y) * OW + x] = activate(l.activation, max ? r : r / static_cast<float>(K * K));
            }
}

void pool_backward(const LayerSpec& l, const float*, const float* in, const float* out, float* dout, float* din,
                   float*) {
    const int K = l.kernel, S = l.stride, OH = l.out.h, OW = l.out.w, IH = l.in.h, IW = l.in.w;
    activation_backward(l.activation, out, dout, l.out.size());
    if (!din) return;
    for (int i = 0; i < l.in.size(); ++i) din[i] = 0.0f;  // windows may overlap or leave inputs out
    for (int c = 0; c < l.out.c; ++c)
        for (int y = 0; y < OH; ++y)
            for (int x = 0; x < OW; ++x) {
                const int at = (c * IH + y * S) * IW + x * S;
                const float d = dout[(c * OH + y) * OW + x];
                if (l.kind == LayerKind::MaxPool) {
                    int best = at;
                    for (int ky = 0; ky < K; ++ky)
                        for (int kx = 0; kx < K; ++kx)
                            if (in[at + ky * IW + kx] > in[best]) best = at + ky * IW + kx;
                    din[best] += d;
                } else {
                    for (int ky = 0; ky < K; ++ky)
                        for (int kx = 0; kx < K; ++kx) din[at + ky * IW + kx] += d / static_cast<float>(K * K);
                }
            }
}

// out[o] = act(sum_i W[o][i] in[i] + b[o]).
void fc_forward(const LayerSpec& l, const float* p, const float* in, float* out) {
    const int I = l.in.size();
    const float* W = p + l.weight_offset;
    const float* b = p + l.bias_offset;
    for (int o = 0; o < l.out.size(); ++o) {
        float s = b[o];
        for (int i = 0; i < I; ++i) s += W[o * I + i] * in[i];
        out[o] = activate(l.activation, s);
    }
}

void fc_backward(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout, float* din,
                 float* g) {
    const int I = l.in.size(), O = l.out.size();
    activation_backward(l.activation, out, dout, O);
    const float* W = p + l.weight_offset;
    float* gW = g + l.weight_offset;
    for (int o = 0; o < O; ++o) {
        for (int i = 0; i < I; ++i) gW[o * I + i] += dout[o] * in[i];
        g[l.bias_offset + o] += dout[o];
    }
    if (din)
        for (int i = 0; i < I; ++i) {
            float s = 0.0f;
            for (int o = 0; o < O; ++o) s += W[o * I + i] * dout[o];
            din[i] = s;
        }
}

void forward(const LayerSpec& l, const float* p, const float* in, float* out) {
    switch (l.kind) {
        case LayerKind::Conv: conv_forward(l, p, in, out); break;
        case LayerKind::Subsample: subsample_forward(l, p, in, out); break;
        case LayerKind::FullyConnected: fc_forward(l, p, in, out); break;
        case LayerKind::MaxPool:
        case LayerKind::AvgPool: pool_forward(l, p, in, out); break;
    }
}

void backward(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout, float* din,
              float* g) {
    switch (l.kind) {
        case LayerKind::Conv: conv_backward(l, p, in, out, dout, din, g); break;
        case LayerKind::Subsample: subsample_backward(l, p, in, out, dout, din, g); break;
        case LayerKind::FullyConnected: fc_backward(l, p, in, out, dout, din, g); break;
        case LayerKind::MaxPool:
        case LayerKind::AvgPool: pool_backward(l, p, in, out, dout, din, g); break;
    }
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
