// maxpool and avgpool: the largest or the mean input of each KxK window sliding by a stride; no
// parameters. Max pooling passes the gradient to the window's first largest input.
//   model file: maxpool NAME window=K [stride=S] [act=A]   (avgpool alike; stride: the window)
#include <algorithm>

#include "common/error.h"
#include "model/layers/activation.h"
#include "model/layers/layer_type.h"

namespace lenet5 {
namespace {

template <LayerKind Kind>
void read(const LayerType&, LayerLine& s, NetworkBuilder& b, const std::string& name) {
    const int window = static_cast<int>(s.integer("window", 1, kMaxLayerDim, std::nullopt));
    const int stride = static_cast<int>(s.integer("stride", 1, kMaxLayerDim, window));
    b.pool(name, Kind, window, stride, s.activation(Activation::None));
}

void write(const LayerType&, const LayerSpec& l, std::ostream& t) { t << " window=" << l.kernel << " stride=" << l.stride; }

void forward(const LayerSpec& l, const float*, const float* in, float* out, const Draw&) {
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

void backward(const LayerSpec& l, const float*, const float* in, const float* out, float* dout, float* din, float*,
              const Draw&) {
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

}  // namespace

NetworkBuilder& NetworkBuilder::pool(const std::string& name, LayerKind kind, int window, int stride,
                                     Activation act) {
    LayerSpec l = next(name, kind, act);
    l.kernel = window;
    l.stride = stride ? stride : window;
    if (kind != LayerKind::MaxPool && kind != LayerKind::AvgPool) throw Error("layer " + name + ": not a pooling kind");
    if (window < 1 || l.stride < 1) throw Error("layer " + name + ": window and stride must be at least 1");
    l.out = {l.in.c, sliding_positions(l.in.h, window, l.stride, 0), sliding_positions(l.in.w, window, l.stride, 0)};
    if (l.out.h <= 0 || l.out.w <= 0) throw Error("layer " + name + ": window larger than its input");
    return add(std::move(l));
}

const LayerType& maxpool_layer() {
    static const LayerType t{LayerKind::MaxPool, "maxpool", "the largest input of each KxK window, by a stride",
                             {}, read<LayerKind::MaxPool>, write, nullptr, forward, backward};
    return t;
}

const LayerType& avgpool_layer() {
    static const LayerType t{LayerKind::AvgPool, "avgpool", "the mean input of each KxK window, by a stride",
                             {}, read<LayerKind::AvgPool>, write, nullptr, forward, backward};
    return t;
}

}  // namespace lenet5
