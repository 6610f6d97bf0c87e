// conv: a KxK convolution with a stride and zero padding, over the input maps its connection table
// names (LeCun's C3 reads a chosen few; without a table every output map reads every input map).
//   model file: conv NAME maps=M kernel=K [stride=S] [pad=P] [act=A] [table, then a row per input map]
//   parameters: connections x K x K weights, then one bias per output map
#include <cmath>

#include "common/error.h"
#include "model/layers/activation.h"
#include "model/layers/layer_type.h"

namespace lenet5 {
namespace {

constexpr size_t kMaxConnections = 1u << 22;  // refused before anything is allocated (model files)

void read(const LayerType&, LayerLine& s, NetworkBuilder& b, const std::string& name) {
    const int maps = static_cast<int>(s.integer("maps", 1, kMaxLayerMaps, std::nullopt));
    const int kernel = static_cast<int>(s.integer("kernel", 1, kMaxLayerDim, std::nullopt));
    const int stride = static_cast<int>(s.integer("stride", 1, kMaxLayerDim, 1));
    const int pad = static_cast<int>(s.integer("pad", 0, kMaxLayerDim, 0));
    const Activation act = s.activation(Activation::None);
    const bool table = s.flag("table");
    const int in_maps = b.output().c;
    if (static_cast<size_t>(in_maps) * static_cast<size_t>(maps) > kMaxConnections)
        s.fail("layer " + name + " has too many connections");
    std::vector<std::vector<int>> connections;
    if (table) {
        // Rows are input maps, columns output maps; stored as [output][input].
        connections.assign(static_cast<size_t>(maps), std::vector<int>(static_cast<size_t>(in_maps), 0));
        for (int i = 0; i < in_maps; ++i) {
            const std::string row = s.next_row("the table of " + name + " needs " + std::to_string(in_maps) + " rows");
            if (row.size() != static_cast<size_t>(maps) || row.find_first_not_of("X.") != std::string::npos)
                s.fail_row("a table row of " + name + " needs " + std::to_string(maps) + " of X or . (one per output map)");
            for (int o = 0; o < maps; ++o) connections[static_cast<size_t>(o)][static_cast<size_t>(i)] = row[static_cast<size_t>(o)] == 'X';
        }
        for (int o = 0; o < maps; ++o) {
            int reads = 0;
            for (int v : connections[static_cast<size_t>(o)]) reads += v;
            if (!reads) s.fail("the table of " + name + " leaves output map " + std::to_string(o) + " without inputs");
        }
    }
    b.conv(name, maps, kernel, act, connections, stride, pad);
}

void write(const LayerType&, const LayerSpec& l, std::ostream& t) {
    t << " maps=" << l.out.c << " kernel=" << l.kernel << " stride=" << l.stride << " pad=" << l.pad;
    if (l.connections() == l.in.c * l.out.c) return;
    t << " table";
    for (int i = 0; i < l.in.c; ++i) {
        std::string row(static_cast<size_t>(l.out.c), '.');
        for (size_t j = 0; j < l.conn_in.size(); ++j)
            if (l.conn_in[j] == i) row[static_cast<size_t>(l.conn_out[j])] = 'X';
        t << '\n' << row;
    }
}

// Weights uniform in +-sqrt(gain / fan_in), fan_in the inputs of the output map the kernel feeds.
void init(const LayerSpec& l, float* p, Rng& rng) {
    const size_t kk = static_cast<size_t>(l.kernel * l.kernel);
    float* w = p + l.weight_offset;
    for (size_t j = 0; j < l.conn_in.size(); ++j) {
        const size_t o = static_cast<size_t>(l.conn_out[j]);
        const int fan_in = (l.conn_begin[o + 1] - l.conn_begin[o]) * l.kernel * l.kernel;
        const float a = std::sqrt(init_gain(l.activation) / static_cast<float>(fan_in));
        for (size_t k = 0; k < kk; ++k) w[j * kk + k] = rng.uniform(-a, a);
    }
}

// in [in.c][in.h][in.w] -> out [out.c][out.h][out.w]; out map o sums its connections j,
// each a KxK kernel W[j] sliding by the stride over input map conn_in[j], zero-padded by pad.
// Output (y, x) with tap (ky, kx) reads input row y*stride + ky - pad, column x*stride + kx - pad.
void forward(const LayerSpec& l, const float* p, const float* in, float* out, const Draw&) {
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

void backward(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout, float* din,
              float* g, const Draw&) {
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

}  // namespace

NetworkBuilder& NetworkBuilder::conv(const std::string& name, int maps, int kernel, Activation act,
                                     const std::vector<std::vector<int>>& connections, int stride, int pad) {
    LayerSpec l = next(name, LayerKind::Conv, act);
    l.kernel = kernel;
    l.stride = stride;
    l.pad = pad;
    if (maps < 1 || kernel < 1 || stride < 1 || pad < 0 || pad >= kernel)
        throw Error("layer " + name + ": needs maps, kernel and stride of at least 1 and 0 <= padding < kernel");
    l.out = {maps, sliding_positions(l.in.h, kernel, stride, pad), sliding_positions(l.in.w, kernel, stride, pad)};
    if (l.out.h <= 0 || l.out.w <= 0) throw Error("layer " + name + ": kernel larger than its (padded) input");
    if (!connections.empty() && static_cast<int>(connections.size()) != maps)
        throw Error("layer " + name + ": connection table needs one row per output map");
    for (int o = 0; o < maps; ++o) {
        l.conn_begin.push_back(static_cast<int32_t>(l.conn_in.size()));
        for (int i = 0; i < l.in.c; ++i) {
            if (connections.empty() || connections[static_cast<size_t>(o)].at(static_cast<size_t>(i))) {
                l.conn_out.push_back(o);
                l.conn_in.push_back(i);
            }
        }
    }
    l.conn_begin.push_back(static_cast<int32_t>(l.conn_in.size()));
    l.weight_count = l.conn_in.size() * static_cast<size_t>(kernel * kernel);
    l.bias_count = static_cast<size_t>(maps);
    return add(std::move(l));
}

const LayerType& conv_layer() {
    static const LayerType t{LayerKind::Conv, "conv", "KxK convolution with stride, padding and a connection table",
                             {}, read, write, init, forward, backward};
    return t;
}

}  // namespace lenet5
