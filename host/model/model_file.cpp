#include "model/model_file.h"

#ifdef LENET5_HAVE_ONNX
#endif

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"
#include "model/layers/layer_type.h"

namespace lenet5 {
namespace {

// Sizes past these are refused before anything is allocated: far beyond the seeds' networks,
// well below what would exhaust memory.
constexpr size_t kMaxActivations = 1u << 26;  // one layer's outputs per sample
constexpr size_t kMaxParams = 1u << 30;
constexpr size_t kMaxFileBytes = 1u << 20;

struct Line {
    int number = 0;
    std::vector<std::string> words;
};

// The non-empty lines, comments stripped, split on whitespace.
std::vector<Line> split_lines(const std::string& text) {
    std::vector<Line> lines;
    std::istringstream in(text);
    std::string raw;
    for (int n = 1; std::getline(in, raw); ++n) {
        const size_t hash = raw.find('#');
        if (hash != std::string::npos) raw.erase(hash);
        Line line{n, {}};
        std::istringstream words(raw);
        for (std::string w; words >> w;) line.words.push_back(w);
        if (!line.words.empty()) lines.push_back(std::move(line));
    }
    return lines;
}

class Parser {
public:
    Parser(std::string source, const Line& line) : source_(std::move(source)), line_(line) {}

    [[noreturn]] void fail(const std::string& what) const {
        throw Error(source_ + ":" + std::to_string(line_.number) + ": " + what);
    }

    // The key=value words from index `first` on; a bare word is a flag (value "").
    std::map<std::string, std::string> settings(size_t first) const {
        std::map<std::string, std::string> s;
        for (size_t i = first; i < line_.words.size(); ++i) {
            const std::string& w = line_.words[i];
            const size_t eq = w.find('=');
            const std::string key = w.substr(0, eq), value = eq == std::string::npos ? "" : w.substr(eq + 1);
            if (key.empty() || (eq != std::string::npos && value.empty())) fail("'" + w + "' is not key=value");
            if (!s.emplace(key, value).second) fail("'" + key + "' is given twice");
        }
        return s;
    }

    static long to_int(const std::string& text, bool& ok) {
        errno = 0;
        char* end = nullptr;
        const long v = std::strtol(text.c_str(), &end, 10);
        ok = !text.empty() && *end == '\0' && errno != ERANGE;
        return v;
    }

    long integer(const std::string& key, const std::string& text, long lo, long hi) const {
        bool ok = false;
        const long v = to_int(text, ok);
        if (!ok) fail(key + ": '" + text + "' is not a whole number");
        if (v < lo || v > hi) fail(key + ": " + text + " is out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")");
        return v;
    }

    float number(const std::string& key, const std::string& text, float lo, float hi) const {
        errno = 0;
        char* end = nullptr;
        const float v = std::strtof(text.c_str(), &end);
        if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) fail(key + ": '" + text + "' is not a number");
        if (v < lo || v > hi) fail(key + ": " + text + " is out of range");
        return v;
    }

    const Line& line() const { return line_; }

private:
    std::string source_;
    const Line& line_;
};

// Takes the keys it is asked for out of `s`; whatever is left at the end is unknown.
struct Settings {
    const Parser& p;
    std::map<std::string, std::string> s;

    std::optional<std::string> take(const std::string& key) {
        auto it = s.find(key);
        if (it == s.end()) return std::nullopt;
        std::string v = it->second;
        s.erase(it);
        if (v.empty()) p.fail(key + " needs a value (" + key + "=...)");
        return v;
    }
    long required(const std::string& key, long lo, long hi) {
        const auto v = take(key);
        if (!v) p.fail(p.line().words[0] + " needs " + key + "=N");
        return p.integer(key, *v, lo, hi);
    }
    long optional(const std::string& key, long lo, long hi, long fallback) {
        const auto v = take(key);
        return v ? p.integer(key, *v, lo, hi) : fallback;
    }
    Activation activation(Activation fallback) {
        const auto v = take("act");
        if (!v) return fallback;
        for (Activation a : {Activation::None, Activation::Tanh, Activation::Sigmoid, Activation::ReLU})
            if (*v == activation_name(a)) return a;
        p.fail("act: '" + *v + "' is not an activation (none, tanh, sigmoid, relu)");
    }
    bool flag(const std::string& key) {
        auto it = s.find(key);
        if (it == s.end()) return false;
        if (!it->second.empty()) p.fail(key + " takes no value");
        s.erase(it);
        return true;
    }
    void finish() const {
        if (!s.empty()) p.fail("unknown setting '" + s.begin()->first + "' for " + p.line().words[0]);
    }
};

// A layer line as its kind's home reads it (layers/layer_type.h's LayerLine); a table's rows are
// the lines after it.
struct LineOfLayer final : LayerLine {
    Settings settings;
    const std::vector<Line>& lines;
    size_t& n;
    const std::string& source;

    LineOfLayer(Settings s, const std::vector<Line>& all, size_t& at, const std::string& src)
        : settings(std::move(s)), lines(all), n(at), source(src) {}
    long integer(const std::string& key, long lo, long hi, std::optional<long> fallback) override {
        if (!fallback) return settings.required(key, lo, hi);
        return settings.optional(key, lo, hi, *fallback);
    }
    float number(const std::string& key, float lo, float hi, float fallback) override {
        const auto v = settings.take(key);
        return v ? settings.p.number(key, *v, lo, hi) : fallback;
    }
    Activation activation(Activation fallback) override { return settings.activation(fallback); }
    bool flag(const std::string& key) override { return settings.flag(key); }
    std::string next_row(const std::string& missing) override {
        if (n + 1 >= lines.size()) fail(missing);
        const Line& row = lines[++n];
        return row.words.size() == 1 ? row.words[0] : "";
    }
    [[noreturn]] void fail(const std::string& what) const override { settings.p.fail(what); }
    [[noreturn]] void fail_row(const std::string& what) const override { Parser(source, lines[n]).fail(what); }
};

Shape parse_shape(const Parser& p, const std::string& text) {
    Shape s;
    int* dims[3] = {&s.c, &s.h, &s.w};
    size_t start = 0;
    for (int d = 0; d < 3; ++d) {
        const size_t x = text.find('x', start);
        if ((d < 2) == (x == std::string::npos)) p.fail("input: '" + text + "' is not CxHxW (e.g. 1x28x28)");
        const std::string part = text.substr(start, d < 2 ? x - start : std::string::npos);
        *dims[d] = static_cast<int>(p.integer("input", part, 1, d ? kMaxLayerDim : kMaxLayerMaps));
        start = x + 1;
    }
    if (s.c != 1) p.fail("input: " + text + " has " + std::to_string(s.c) + " channels; the images have 1");
    if (s.h < 28 || s.w < 28) p.fail("input: " + text + " is smaller than the 28x28 images");
    return s;
}

void check_sizes(const Parser& p, const Network& net) {
    const LayerSpec& l = net.layers.back();
    if (static_cast<size_t>(l.out.size()) > kMaxActivations) p.fail("layer " + l.name + " has too many outputs");
    if (net.param_count > kMaxParams) p.fail("the network has more than " + std::to_string(kMaxParams) + " parameters");
}

Model parse_lines(const std::vector<Line>& lines, const std::string& source) {
    Model m;
    std::optional<NetworkBuilder> builder;
    std::optional<Loss> loss;
    std::string name;
    bool trained = false;
    for (size_t n = 0; n < lines.size(); ++n) {
        const Line& line = lines[n];
        const Parser p(source, line);
        const std::string& word = line.words[0];
        try {
            if (word == "model") {
                if (line.words.size() != 2) p.fail("model takes one name");
                if (!name.empty()) p.fail("model is given twice");
                name = line.words[1];
                continue;
            }
            if (name.empty()) p.fail("the first line must be `model NAME`");
            if (word == "input") {
                if (line.words.size() < 2 || line.words[1].find('=') != std::string::npos) p.fail("input takes one shape CxHxW");
                if (builder) p.fail("input is given twice");
                Settings s{p, p.settings(2)};
                InputScaling scaling;
                if (auto v = s.take("scale")) scaling.scale = p.number("scale", *v, -1e6f, 1e6f);
                if (auto v = s.take("shift")) scaling.shift = p.number("shift", *v, -1e6f, 1e6f);
                s.finish();
                builder.emplace(name, parse_shape(p, line.words[1]));
                builder->scaling(scaling);
                continue;
            }
            if (word == "loss") {
                if (line.words.size() != 2) p.fail("loss takes one of softmax, squared");
                if (loss) p.fail("loss is given twice");
                if (line.words[1] == "softmax") loss = Loss::SoftmaxCrossEntropy;
                else if (line.words[1] == "squared") loss = Loss::SquaredError;
                else p.fail("loss: '" + line.words[1] + "' is not softmax or squared");
                continue;
            }
            if (word == "train") {
                if (trained) p.fail("train is given twice");
                trained = true;
                Settings s{p, p.settings(1)};
                TrainRecipe& r = m.recipe;
                if (auto v = s.take("batch")) r.batch = static_cast<int>(p.integer("batch", *v, 1, 1 << 20));
                if (auto v = s.take("epochs")) r.epochs = static_cast<int>(p.integer("epochs", *v, 1, 100000));
                if (auto v = s.take("lr")) r.lr = p.number("lr", *v, 1e-9f, 10.0f);
                if (auto v = s.take("lr-decay")) r.lr_decay = p.number("lr-decay", *v, 1e-9f, 1.0f);
                if (auto v = s.take("momentum")) r.momentum = p.number("momentum", *v, 0.0f, 0.999f);
                if (auto v = s.take("weight-decay")) r.weight_decay = p.number("weight-decay", *v, 0.0f, 0.999f);
                if (auto v = s.take("schedule")) {
                    r.schedule = parse_schedule(*v);
                    if (!r.schedule) p.fail("schedule: '" + *v + "' is not step, onecycle or cosine");
                }
                if (auto v = s.take("warmup")) r.warmup = p.number("warmup", *v, 0.0f, 100000.0f);
                r.nesterov = s.flag("nesterov");
                if (auto v = s.take("label-smoothing")) r.label_smoothing = p.number("label-smoothing", *v, 0.0f, 0.999f);
                if (auto v = s.take("optimizer")) {
                    r.optimizer = parse_optimizer(*v);
                    if (!r.optimizer) p.fail("optimizer: '" + *v + "' is not sgd, adam or adamw");
                }
                if (auto v = s.take("beta1")) r.beta1 = p.number("beta1", *v, 0.0f, 0.999999f);
                if (auto v = s.take("beta2")) r.beta2 = p.number("beta2", *v, 0.0f, 0.999999f);
                if (auto v = s.take("eps")) r.eps = p.number("eps", *v, 1e-30f, 1.0f);
                s.finish();
                const bool adam = r.optimizer && *r.optimizer != Optimizer::Sgd;
                if (adam && (r.momentum || r.nesterov)) p.fail("momentum and nesterov apply to optimizer=sgd");
                if (!adam && (r.beta1 || r.beta2 || r.eps)) p.fail("beta1, beta2 and eps apply to optimizer=adam or adamw");
                if (r.lr_decay && r.schedule && *r.schedule != Schedule::Step)
                    p.fail("lr-decay applies to schedule=step, not " + std::string(schedule_name(*r.schedule)));
                if (r.warmup && r.epochs && *r.warmup >= static_cast<float>(*r.epochs))
                    p.fail("warmup is not shorter than the run (epochs=" + std::to_string(*r.epochs) + ")");
                continue;
            }
            const LayerType* type = layer_type_named(word);
            if (!type) p.fail("unknown line '" + word + "' (model, input, " + layer_words() + ", loss, train)");
            if (!builder) p.fail("the input line must come before the layers");
            if (line.words.size() < 2 || line.words[1].find('=') != std::string::npos) p.fail(word + " needs a layer name first");
            LineOfLayer layer{Settings{p, p.settings(2)}, lines, n, source};
            type->read(*type, layer, *builder, line.words[1]);
            layer.settings.finish();
            check_sizes(p, builder->so_far());
        } catch (const Error& e) {
            const std::string what = e.what();
            if (what.rfind(source + ":", 0) == 0) throw;
            p.fail(what);  // a NetworkBuilder complaint: give it the file and line
        }
    }
    if (name.empty()) throw Error(source + ": empty model file (no `model NAME` line)");
    if (!builder) throw Error(source + ": no `input CxHxW` line");
    if (builder->so_far().layers.empty()) throw Error(source + ": no layers");
    if (loss) builder->loss(*loss);
    try {
        m.net = builder->build();
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
    if (m.recipe.label_smoothing.value_or(0.0f) != 0.0f && m.net.loss != Loss::SoftmaxCrossEntropy)
        throw Error(source + ": train label-smoothing needs the softmax loss; this model's is " + loss_name(m.net.loss));
    return m;
}

}  // namespace

std::string model_file_text(const Network& net) {
    std::ostringstream t;
    t.precision(9);  // a float's every digit: the text rebuilds the same scaling
    t << "model " << net.name << "\ninput " << net.input.c << 'x' << net.input.h << 'x' << net.input.w;
    if (!net.scaling.is_default()) t << " scale=" << net.scaling.scale << " shift=" << net.scaling.shift;
    t << '\n';
    for (const LayerSpec& l : net.layers) {
        const LayerType& type = layer_type(l.kind);
        t << type.word << ' ' << l.name << " act=" << activation_name(l.activation);
        type.write(type, l, t);  // last: a conv's table rows follow its line
        t << '\n';
    }
    t << "loss " << (net.loss == Loss::SquaredError ? "squared" : "softmax") << '\n';
    return t.str();
}

Model parse_model(const std::string& text, const std::string& source) {
    Model m = parse_lines(split_lines(text), source);
    m.text = text;
    return m;
}

Model load_model(const std::string& name_or_path) {
    for (const auto& [name, text] : builtin_models())
        if (name == name_or_path) return parse_model(text, "models/" + name + ".net");
    if (name_or_path.find('/') == std::string::npos && name_or_path.find('.') == std::string::npos) {
        std::string names;
        for (const auto& m : builtin_models()) names += (names.empty() ? "" : ", ") + m.first;
        throw UsageError("--model: '" + name_or_path + "' is not a built-in model (" + names + ") nor a file path");
    }
    struct stat st {};
    if (::stat(name_or_path.c_str(), &st) != 0) throw Error(name_or_path + ": cannot open the model file: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw Error(name_or_path + ": not a regular file");
    if (static_cast<size_t>(st.st_size) > kMaxFileBytes) throw Error(name_or_path + ": too large for a model file (over 1 MiB)");
    std::ifstream in(name_or_path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) throw Error(name_or_path + ": cannot read the model file");
    return parse_model(text.str(), name_or_path);
}

Network lenet5_network() { return load_model("lenet5").net; }

}  // namespace lenet5
