// The registry: every layer kind's home, in LayerKind's order. A new kind adds its line here
// (docs/adding-a-layer.md).
#include "common/error.h"
#include "model/layers/layer_type.h"

namespace lenet5 {

const LayerType& conv_layer();
const LayerType& subsample_layer();
const LayerType& fully_connected_layer();
const LayerType& maxpool_layer();
const LayerType& avgpool_layer();
const LayerType& dropout_layer();

const std::vector<const LayerType*>& layer_types() {
    static const std::vector<const LayerType*> types = [] {
        std::vector<const LayerType*> t{&conv_layer(),    &subsample_layer(), &fully_connected_layer(),
                                        &maxpool_layer(), &avgpool_layer(),   &dropout_layer()};
        for (size_t k = 0; k < t.size(); ++k)
            if (static_cast<size_t>(t[k]->kind) != k) throw Error(std::string("layer registry: ") + t[k]->word + " is out of LayerKind's order");
        return t;
    }();
    return types;
}

const LayerType& layer_type(LayerKind kind) { return *layer_types().at(static_cast<size_t>(kind)); }

const LayerType* layer_type_named(const std::string& word) {
    for (const LayerType* t : layer_types())
        if (word == t->word) return t;
    return nullptr;
}

const LayerType* layer_type_for_onnx(const std::string& op) {
    for (const LayerType* t : layer_types())
        if (t->onnx_op && op == t->onnx_op) return t;
    return nullptr;
}

std::string layer_words(const char* separator) {
    std::string s;
    for (const LayerType* t : layer_types()) s += (s.empty() ? "" : separator) + std::string(t->word);
    return s;
}

std::string layer_onnx_ops(const char* separator) {
    std::string s;
    for (const LayerType* t : layer_types())
        if (t->onnx_op) s += (s.empty() ? "" : separator) + std::string(t->onnx_op);
    return s;
}

NetworkBuilder& add_by_settings(NetworkBuilder& b, const LayerType& kind, const std::string& name, Activation act,
                                std::vector<float> attr) {
    LayerSpec l = b.next(name, kind.kind, act);
    l.attr = std::move(attr);
    l.out = l.in;
    return b.add(std::move(l));
}

void read_settings(const LayerType& self, LayerLine& line, NetworkBuilder& b, const std::string& name) {
    std::vector<float> attr;
    for (const LayerSetting& s : self.settings) attr.push_back(line.number(s.key, s.lo, s.hi, s.fallback));
    add_by_settings(b, self, name, line.activation(Activation::None), std::move(attr));
}

void write_settings(const LayerType& self, const LayerSpec& l, std::ostream& line) {
    for (size_t k = 0; k < self.settings.size(); ++k) line << ' ' << self.settings[k].key << '=' << l.attr.at(k);
}

}  // namespace lenet5
