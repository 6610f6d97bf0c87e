// What a layer kind's home (host/model/layers/<kind>.cpp) provides, and the registry the engines find it
// through. A home holds the kind's spec (shapes and parameters through NetworkBuilder, its model-file
// line, its ONNX operator), its reference forward and backward (what `cpu` runs, and what every
// other variant falls back to), and names its generic OpenCL kernels (cl_kernels/layers/). Engines
// run any registered kind through those; their fast paths (SIMD lanes, Winograd, fused steps,
// convolution algorithms) cover the kinds they name and fall back to these otherwise.
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/rng.h"
#include "model/network.h"

namespace lenet5 {

// Where a layer's random numbers come from: the run's seed, the layer, the training step and the
// sample's place in the step, so that every variant draws the same ones (layer_draw_key).
struct Draw {
    uint32_t seed = 0;    // the run's seed and the layer's index, mixed (layer_draw_seed)
    uint32_t step = 0;    // the engine's training forwards so far
    uint32_t sample = 0;  // the sample's position in the epoch's order
    bool training = false;  // false: inference
};

// One 32-bit hash step (lowbias32, by Chris Wellons): cl_kernels/layers/common_draw.h has the same.
inline uint32_t mix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    return h ^ (h >> 16);
}
inline uint32_t layer_draw_seed(uint64_t run_seed, size_t layer) {
    return mix32(static_cast<uint32_t>(run_seed) ^ mix32(static_cast<uint32_t>(run_seed >> 32) ^
                                                         mix32(static_cast<uint32_t>(layer) + 0x9e3779b9u)));
}
// Uniform in [0, 1) with 24 bits, for unit `unit` of the draw's sample.
inline float draw_uniform(const Draw& d, uint32_t unit) {
    const uint32_t h = mix32(mix32(mix32(d.seed ^ d.step) ^ d.sample) ^ unit);
    return static_cast<float>(h >> 8) * (1.0f / 16777216.0f);
}

// A model-file layer line's settings after the layer's name (model_file.cpp implements it): each
// read takes its key out; a key left over at the end is refused by name.
class LayerLine {
public:
    virtual ~LayerLine() = default;
    virtual long integer(const std::string& key, long lo, long hi, std::optional<long> fallback) = 0;
    virtual float number(const std::string& key, float lo, float hi, float fallback) = 0;
    virtual Activation activation(Activation fallback) = 0;
    virtual bool flag(const std::string& key) = 0;
    // The next line's one word (a table row; "" for a line of several), or fail(missing) at the end.
    virtual std::string next_row(const std::string& missing) = 0;
    [[noreturn]] virtual void fail(const std::string& what) const = 0;      // naming the layer's line
    [[noreturn]] virtual void fail_row(const std::string& what) const = 0;  // naming the last row read
};

// A setting of a kind described by its settings alone (LayerSpec::attr holds them in this order): a
// model-file key=value, and the ONNX node's scalar input of the same place after its data.
struct LayerSetting {
    const char* key;
    float lo, hi, fallback;
};

struct LayerType {
    LayerKind kind;
    const char* word;     // its model-file word (`conv`), also in describe() and reports
    const char* summary;  // one line for `lenet5 models --help` and the docs
    std::vector<LayerSetting> settings;  // empty for the kinds with fields of their own in LayerSpec
    // Its model-file line: the layer `name` from the line's settings, added to `b`; and the line's
    // settings after the name and act= (a table's rows may follow, each on a line). read_settings and write_settings do it for a kind described by
    // `settings` that keeps its input's shape and has no parameters.
    void (*read)(const LayerType& self, LayerLine& line, NetworkBuilder& b, const std::string& name);
    void (*write)(const LayerType& self, const LayerSpec& l, std::ostream& line);
    // Seeded initial parameters into `params` (the flat buffer); null: it has none to draw.
    void (*init)(const LayerSpec& l, float* params, Rng& rng);
    // The reference, one sample: out = activation(layer(in)); and backward: `dout` holds dLoss/d(out)
    // on entry (it may be overwritten), the parameter gradients are added into `grads` (flat layout),
    // and unless `din` is null, din = dLoss/d(in).
    void (*forward)(const LayerSpec& l, const float* params, const float* in, float* out, const Draw& draw);
    void (*backward)(const LayerSpec& l, const float* params, const float* in, const float* out, float* dout,
                     float* din, float* grads, const Draw& draw);
    // Forward and backward read `draw` (random numbers): the engines then give each sample its own.
    bool draws = false;
    // Its generic OpenCL kernels, cl_kernels/layers/<word>.cl (`<word>_forward`, `<word>_backward`,
    // batch_generic_layer's arguments), or null where the batch-level engine has kernels of its own.
    const char* cl_file = nullptr;
    // The ONNX operator it reads and writes as (for kinds described by `settings`), or null where
    // io/onnx_import.cpp and io/onnx_export.cpp map it themselves.
    const char* onnx_op = nullptr;
};

// Output positions of a window of `kernel` sliding by `stride` over `in` (padded by `pad` each side).
inline int sliding_positions(int in, int kernel, int stride, int pad) {
    return in + 2 * pad < kernel ? 0 : (in + 2 * pad - kernel) / stride + 1;
}

// 3 * the weights' variance times fan_in: 1 (LeCun) for tanh and the rest, 2 (He) for ReLU.
inline float init_gain(Activation a) { return a == Activation::ReLU ? 6.0f : 3.0f; }

// Sizes past these are refused before anything is allocated (model files): far beyond the seeds'
// networks, well below what would exhaust memory.
constexpr long kMaxLayerDim = 4096;    // one side of a map, a kernel, a stride
constexpr long kMaxLayerMaps = 65536;  // maps or units of one layer

// Adds a layer of a kind described by its settings (attr, in the kind's order): it keeps its input's
// shape and has no parameters. read_settings reads one from its model-file line; ONNX import too.
NetworkBuilder& add_by_settings(NetworkBuilder& b, const LayerType& kind, const std::string& name, Activation act,
                                std::vector<float> attr);
void read_settings(const LayerType& self, LayerLine& line, NetworkBuilder& b, const std::string& name);
void write_settings(const LayerType& self, const LayerSpec& l, std::ostream& line);

// The registry (registry.cpp): every kind, in LayerKind's order.
const std::vector<const LayerType*>& layer_types();
const LayerType& layer_type(LayerKind kind);
const LayerType* layer_type_named(const std::string& word);   // null when no kind has that word
const LayerType* layer_type_for_onnx(const std::string& op);  // null when no kind reads that operator
std::string layer_words(const char* separator = ", ");         // "conv, subsample, ..." for messages
std::string layer_onnx_ops(const char* separator = ", ");      // the operators the kinds read

// The reference's forward and backward of layer `l` (what cpu_ops() runs).
inline void reference_forward(const LayerSpec& l, const float* p, const float* in, float* out, const Draw& d = {}) {
    layer_type(l.kind).forward(l, p, in, out, d);
}
inline void reference_backward(const LayerSpec& l, const float* p, const float* in, const float* out, float* dout,
                               float* din, float* g, const Draw& d = {}) {
    layer_type(l.kind).backward(l, p, in, out, dout, din, g, d);
}

}  // namespace lenet5
