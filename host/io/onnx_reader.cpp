#include "io/onnx_reader.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/error.h"
#include "io/read_whole_file.h"
#include "model/layers/layer_type.h"

namespace lenet5 {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxDim = int64_t(1) << 24;       // one dimension
constexpr int64_t kMaxElements = int64_t(1) << 31;  // one constant tensor
constexpr int64_t kMaxSample = int64_t(1) << 26;    // one activation, per sample (VGG16's largest: 3.2M)

// A constant: an initializer or a Constant node's value, as floats or int64 (Reshape's shape).
struct Constant {
    std::vector<int64_t> dims;
    std::vector<float> f;
    std::vector<int64_t> i;
    bool is_int = false;
};

std::string dims_text(const std::vector<int64_t>& dims) {
    std::string s;
    for (const int64_t d : dims) s += (s.empty() ? "" : "x") + std::to_string(d);
    return s.empty() ? "scalar" : s;
}

class Reader {
public:
    Reader(std::string name, std::string dir) : name_(std::move(name)), dir_(std::move(dir)) {}

    OnnxGraph read(const std::string& bytes) {
        onnx::ModelProto model;
        if (bytes.size() > static_cast<size_t>(INT32_MAX) || !model.ParseFromString(bytes))
            throw Error(name_ + ": not an ONNX model (the protobuf does not parse)");
        if (!model.has_graph()) throw Error(name_ + ": ONNX model has no graph");
        for (const auto& opset : model.opset_import())
            if ((opset.domain().empty() || opset.domain() == "ai.onnx") && opset.version() < 7)
                throw Error(name_ + ": ONNX opset " + std::to_string(opset.version()) + " is older than 7");
        for (const auto& p : model.metadata_props()) g_.metadata[p.key()] = p.value();
        const onnx::GraphProto& graph = model.graph();
        for (const auto& t : graph.initializer()) constants_[t.name()] = tensor(t, "initializer '" + t.name() + "'");
        read_input(graph);
        for (int k = 0; k < graph.node_size(); ++k) node(graph.node(k), k);
        if (graph.output_size() != 1)
            throw Error(name_ + ": the graph has " + std::to_string(graph.output_size()) + " outputs; infer needs one");
        g_.output_name = graph.output(0).name();
        g_.output = value_of(g_.output_name, "the graph's output");
        finish_graph(g_);
        return std::move(g_);
    }

private:
    [[noreturn]] void fail(const std::string& what) const { throw Error(name_ + ": " + what); }

    [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& what) const {
        fail("node '" + node_name_ + "' (" + n.op_type() + "): " + what);
    }

    std::vector<int64_t> checked_dims(const google::protobuf::RepeatedField<int64_t>& dims, const std::string& what) {
        std::vector<int64_t> out;
        int64_t total = 1;
        for (const int64_t d : dims) {
            if (d < 0 || d > kMaxDim) fail(what + " has dimension " + std::to_string(d));
            total *= d;
            if (total > kMaxElements) fail(what + " has more than 2^31 elements");
            out.push_back(d);
        }
        return out;
    }

    // The bytes of external data: `location` must name a file inside the model's folder.
    std::string external(const onnx::TensorProto& t, const std::string& what, size_t expect) {
        std::string location;
        long long offset = 0, length = -1;
        for (const auto& e : t.external_data()) {
            try {
                if (e.key() == "location") location = e.value();
                else if (e.key() == "offset") offset = std::stoll(e.value());
                else if (e.key() == "length") length = std::stoll(e.value());
            } catch (const std::exception&) {
                fail(what + ": external data " + e.key() + " '" + e.value() + "' is not a number");
            }
        }
        if (dir_.empty()) fail(what + " is stored as external data, which needs the model's folder");
        if (location.empty()) fail(what + ": external data has no location");
        const fs::path rel(location);
        if (rel.is_absolute()) fail(what + ": external data location '" + location + "' is absolute");
        for (const auto& part : rel)
            if (part == "..") fail(what + ": external data location '" + location + "' leaves the model's folder");
        std::error_code ec;
        const fs::path base = fs::canonical(dir_, ec);
        const fs::path file = fs::weakly_canonical(base / rel, ec);
        const std::string b = base.string(), f = file.string();
        if (ec || f.compare(0, b.size(), b) != 0 || (f.size() > b.size() && f[b.size()] != '/'))
            fail(what + ": external data location '" + location + "' leaves the model's folder");
        std::ifstream in(file, std::ios::binary);
        if (!in) fail(what + ": cannot open external data file " + f);
        in.seekg(0, std::ios::end);
        const long long size = static_cast<long long>(in.tellg());
        if (length < 0) length = size - offset;
        if (offset < 0 || offset > size || length != static_cast<long long>(expect) || offset + length > size)
            fail(what + ": external data (offset " + std::to_string(offset) + ", length " + std::to_string(length) +
                 ") does not hold its " + std::to_string(expect) + " bytes within " + f);
        std::string data(static_cast<size_t>(length), '\0');
        in.seekg(offset);
        in.read(data.data(), length);
        if (!in) fail(what + ": reading external data from " + f + " failed");
        return data;
    }

    Constant tensor(const onnx::TensorProto& t, const std::string& what) {
        Constant c;
        c.dims = checked_dims(t.dims(), what);
        size_t count = 1;
        for (const int64_t d : c.dims) count *= static_cast<size_t>(d);
        const int type = t.data_type();
        if (type != onnx::TensorProto::FLOAT && type != onnx::TensorProto::INT64)
            fail(what + " has data type " + std::to_string(type) + " (only float and int64 are supported)");
        c.is_int = type == onnx::TensorProto::INT64;
        const size_t bytes_needed = count * (c.is_int ? 8 : 4);
        std::string raw;
        const std::string* data = nullptr;
        if (t.data_location() == onnx::TensorProto::EXTERNAL) {
            raw = external(t, what, bytes_needed);
            data = &raw;
        } else if (t.has_raw_data()) {
            data = &t.raw_data();
            if (data->size() != bytes_needed)
                fail(what + " (" + dims_text(c.dims) + ") has " + std::to_string(data->size()) + " bytes of data, needs " +
                     std::to_string(bytes_needed));
        }
        const size_t listed = c.is_int ? static_cast<size_t>(t.int64_data_size()) : static_cast<size_t>(t.float_data_size());
        if (!data && listed != count)
            fail(what + " (" + dims_text(c.dims) + ") has " + std::to_string(listed) + " values");
        if (c.is_int) {
            c.i.resize(count);
            if (data && count) std::memcpy(c.i.data(), data->data(), bytes_needed);
            else std::copy(t.int64_data().begin(), t.int64_data().end(), c.i.begin());
        } else {
            c.f.resize(count);
            if (data && count) std::memcpy(c.f.data(), data->data(), bytes_needed);
            else std::copy(t.float_data().begin(), t.float_data().end(), c.f.begin());
        }
        return c;
    }

    int add_value(std::vector<int64_t> dims, const std::string& what) {
        int64_t total = 1;
        for (const int64_t d : dims) {
            if (d < 1 || d > kMaxDim) fail(what + " would have dimension " + std::to_string(d) + " (" + dims_text(dims) + ")");
            total *= d;
            if (total > kMaxSample) fail(what + " would have more than 2^26 elements per sample");
        }
        g_.values.push_back({std::move(dims)});
        return static_cast<int>(g_.values.size()) - 1;
    }

    void read_input(const onnx::GraphProto& graph) {
        for (const auto& in : graph.input()) {
            if (constants_.count(in.name())) continue;  // initializers may be listed as inputs
            if (g_.input >= 0) fail("the graph has more than one input (" + g_.input_name + ", " + in.name() + ")");
            if (!in.type().has_tensor_type() || in.type().tensor_type().elem_type() != onnx::TensorProto::FLOAT)
                fail("input '" + in.name() + "' is not a float tensor");
            const auto& shape = in.type().tensor_type().shape();
            if (shape.dim_size() < 2) fail("input '" + in.name() + "' needs a batch dimension and at least one more");
            std::vector<int64_t> dims;
            for (int d = 1; d < shape.dim_size(); ++d) {
                if (!shape.dim(d).has_dim_value()) fail("input '" + in.name() + "': dimension " + std::to_string(d) + " is not a number");
                dims.push_back(shape.dim(d).dim_value());
            }
            g_.input_name = in.name();
            g_.input = add_value(dims, "input '" + in.name() + "'");
            values_[in.name()] = g_.input;
        }
        if (g_.input < 0) fail("the graph has no input");
    }

    int value_of(const std::string& name, const std::string& what) {
        const auto it = values_.find(name);
        if (it == values_.end()) fail(what + " '" + name + "' is not computed by any node before it");
        return it->second;
    }

    // ---- attributes
    const onnx::AttributeProto* attr(const onnx::NodeProto& n, const char* key) {
        for (const auto& a : n.attribute())
            if (a.name() == key) return &a;
        return nullptr;
    }
    int64_t attr_int(const onnx::NodeProto& n, const char* key, int64_t def) {
        const auto* a = attr(n, key);
        if (!a) return def;
        if (a->type() != onnx::AttributeProto::INT) fail(n, std::string("attribute '") + key + "' is not an int");
        return a->i();
    }
    float attr_float(const onnx::NodeProto& n, const char* key, float def) {
        const auto* a = attr(n, key);
        if (!a) return def;
        if (a->type() != onnx::AttributeProto::FLOAT) fail(n, std::string("attribute '") + key + "' is not a float");
        return a->f();
    }
    std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const char* key, std::vector<int64_t> def) {
        const auto* a = attr(n, key);
        if (!a) return def;
        if (a->type() != onnx::AttributeProto::INTS) fail(n, std::string("attribute '") + key + "' is not a list of ints");
        return {a->ints().begin(), a->ints().end()};
    }
    std::string attr_string(const onnx::NodeProto& n, const char* key, const std::string& def) {
        const auto* a = attr(n, key);
        if (!a) return def;
        if (a->type() != onnx::AttributeProto::STRING) fail(n, std::string("attribute '") + key + "' is not a string");
        return a->s();
    }

    // ---- inputs
    bool is_constant(const onnx::NodeProto& n, int k) { return k < n.input_size() && constants_.count(n.input(k)); }
    const Constant& constant(const onnx::NodeProto& n, int k, const char* role) {
        if (k >= n.input_size() || n.input(k).empty()) fail(n, std::string("has no ") + role);
        const auto it = constants_.find(n.input(k));
        if (it == constants_.end()) fail(n, std::string(role) + " '" + n.input(k) + "' must be an initializer or a Constant");
        if (it->second.is_int) fail(n, std::string(role) + " '" + n.input(k) + "' is not float");
        return it->second;
    }
    int activation(const onnx::NodeProto& n, int k) {
        if (k >= n.input_size() || n.input(k).empty()) fail(n, "input " + std::to_string(k) + " is missing");
        if (constants_.count(n.input(k))) fail(n, "input '" + n.input(k) + "' is a constant; infer computes on the graph's input only");
        const auto it = values_.find(n.input(k));
        if (it == values_.end()) fail(n, "input '" + n.input(k) + "' is not computed by any node before it");
        return it->second;
    }
    const std::vector<int64_t>& dims(int v) const { return g_.values[v].dims; }

    void output(const onnx::NodeProto& n, OnnxOp op, std::vector<int64_t> out_dims) {
        if (n.output_size() < 1 || n.output(0).empty()) fail(n, "has no output");
        for (int k = 1; k < n.output_size(); ++k)
            if (!n.output(k).empty()) fail(n, "output " + std::to_string(k) + " ('" + n.output(k) + "') is not supported");
        op.name = node_name_;
        op.op_type = n.op_type();
        op.out = add_value(std::move(out_dims), "node '" + node_name_ + "' (" + n.op_type() + "): its output");
        values_[n.output(0)] = op.out;
        g_.ops.push_back(std::move(op));
    }

    // kernel_shape, strides, pads of a 2-D window over input `in` (C x H x W); the output's H x W.
    void window(const onnx::NodeProto& n, OnnxOp& op, int64_t kh, int64_t kw, int64_t& oh, int64_t& ow) {
        const auto& d = dims(op.in);
        const auto strides = attr_ints(n, "strides", {1, 1});
        const auto dil = attr_ints(n, "dilations", {1, 1});
        const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
        auto pads = attr_ints(n, "pads", {0, 0, 0, 0});
        if (strides.size() != 2 || pads.size() != 4 || dil.size() != 2) fail(n, "strides, pads or dilations are not 2-D");
        if (dil[0] != 1 || dil[1] != 1) fail(n, "dilations other than 1 are not supported");
        if (auto_pad == "VALID") pads = {0, 0, 0, 0};
        else if (auto_pad != "NOTSET") fail(n, "auto_pad " + auto_pad + " is not supported");
        if (attr_int(n, "ceil_mode", 0) != 0) fail(n, "ceil_mode 1 is not supported");
        for (const int64_t s : strides)
            if (s < 1 || s > kMaxDim) fail(n, "stride " + std::to_string(s) + " is not supported");
        for (const int64_t p : pads)
            if (p < 0 || p > kMaxDim) fail(n, "padding " + std::to_string(p) + " is not supported");
        if (kh < 1 || kw < 1 || kh > kMaxDim || kw > kMaxDim) fail(n, "kernel " + std::to_string(kh) + "x" + std::to_string(kw) + " is not supported");
        oh = (d[1] + pads[0] + pads[2] - kh) / strides[0] + 1;
        ow = (d[2] + pads[1] + pads[3] - kw) / strides[1] + 1;
        if (d[1] + pads[0] + pads[2] < kh || d[2] + pads[1] + pads[3] < kw)
            fail(n, "its " + std::to_string(kh) + "x" + std::to_string(kw) + " window does not fit the " + dims_text(d) + " input");
        op.kh = static_cast<int>(kh), op.kw = static_cast<int>(kw);
        op.sh = static_cast<int>(strides[0]), op.sw = static_cast<int>(strides[1]);
        op.pt = static_cast<int>(pads[0]), op.pl = static_cast<int>(pads[1]);
        op.pb = static_cast<int>(pads[2]), op.pr = static_cast<int>(pads[3]);
    }

    void need_maps(const onnx::NodeProto& n, int v) {
        if (dims(v).size() != 3) fail(n, "needs a 4-D input (N x C x H x W), got N x " + dims_text(dims(v)));
    }

    void conv(const onnx::NodeProto& n) {
        OnnxOp op;
        op.kind = OnnxOpKind::Conv;
        op.in = activation(n, 0);
        need_maps(n, op.in);
        const Constant& w = constant(n, 1, "weight");
        const auto& d = dims(op.in);
        if (w.dims.size() != 4) fail(n, "weight is " + dims_text(w.dims) + ", not 4-D");
        const int64_t groups = attr_int(n, "group", 1);
        if (groups < 1 || d[0] % groups || w.dims[0] % groups || w.dims[1] * groups != d[0])
            fail(n, "weight " + dims_text(w.dims) + " in " + std::to_string(groups) + " group(s) does not take the input's " +
                        std::to_string(d[0]) + " maps");
        if (w.dims[0] * d[0] * w.dims[2] * w.dims[3] > kMaxElements) fail(n, "the grouped weight is too large to expand");
        const auto ks = attr_ints(n, "kernel_shape", {w.dims[2], w.dims[3]});
        if (ks.size() != 2 || ks[0] != w.dims[2] || ks[1] != w.dims[3]) fail(n, "kernel_shape does not match the weight " + dims_text(w.dims));
        int64_t oh = 0, ow = 0;
        window(n, op, w.dims[2], w.dims[3], oh, ow);
        op.groups = static_cast<int>(groups);
        op.weight = groups == 1 ? w.f : dense_weights(w, groups, d[0]);
        op.bias.assign(static_cast<size_t>(w.dims[0]), 0.0f);
        if (n.input_size() > 2 && !n.input(2).empty()) {
            const Constant& b = constant(n, 2, "bias");
            if (b.f.size() != op.bias.size()) fail(n, "bias " + dims_text(b.dims) + " does not match " + std::to_string(w.dims[0]) + " output maps");
            op.bias = b.f;
        }
        output(n, std::move(op), {w.dims[0], oh, ow});
    }

    // A grouped convolution's weight [O][C/groups][kh][kw] as one over every input map, [O][C][kh][kw],
    // zero where an output map does not read an input map (LeNet-5's subsampling exports as one group
    // per map; the executors take one group).
    static std::vector<float> dense_weights(const Constant& w, int64_t groups, int64_t maps) {
        const int64_t out = w.dims[0], per = w.dims[1], taps = w.dims[2] * w.dims[3], out_per_group = out / groups;
        std::vector<float> dense(static_cast<size_t>(out * maps * taps), 0.0f);
        for (int64_t o = 0; o < out; ++o)
            for (int64_t i = 0; i < per; ++i)
                std::copy_n(w.f.begin() + (o * per + i) * taps, taps,
                            dense.begin() + (o * maps + o / out_per_group * per + i) * taps);
        return dense;
    }

    void pool(const onnx::NodeProto& n, bool max, bool global) {
        OnnxOp op;
        op.kind = max ? OnnxOpKind::MaxPool : OnnxOpKind::AvgPool;
        op.in = activation(n, 0);
        need_maps(n, op.in);
        const auto& d = dims(op.in);
        std::vector<int64_t> ks = global ? std::vector<int64_t>{d[1], d[2]} : attr_ints(n, "kernel_shape", {});
        if (ks.size() != 2) fail(n, "kernel_shape is missing or not 2-D");
        if (max && attr_int(n, "storage_order", 0) != 0) fail(n, "storage_order 1 is not supported");
        op.count_include_pad = !max && attr_int(n, "count_include_pad", 0) != 0;
        int64_t oh = 0, ow = 0;
        window(n, op, ks[0], ks[1], oh, ow);
        std::vector<int64_t> out{d[0], oh, ow};
        output(n, std::move(op), std::move(out));
    }

    // Gemm (Y = alpha A B' + beta C) and MatMul (Y = A B) with a constant B, as Dense.
    void dense(const onnx::NodeProto& n, bool gemm) {
        OnnxOp op;
        op.kind = OnnxOpKind::Dense;
        op.in = activation(n, 0);
        const auto& d = dims(op.in);
        if (d.size() != 1) fail(n, "needs a 2-D input (N x features), got N x " + dims_text(d));
        const Constant& b = constant(n, 1, "B");
        if (b.dims.size() != 2) fail(n, "B is " + dims_text(b.dims) + ", not 2-D");
        if (gemm && attr_int(n, "transA", 0) != 0) fail(n, "transA=1 is not supported");
        const bool trans = gemm && attr_int(n, "transB", 0) != 0;
        const float alpha = gemm ? attr_float(n, "alpha", 1.0f) : 1.0f, beta = gemm ? attr_float(n, "beta", 1.0f) : 1.0f;
        const int64_t in = trans ? b.dims[1] : b.dims[0], out = trans ? b.dims[0] : b.dims[1];
        if (in != d[0]) fail(n, "B " + dims_text(b.dims) + (trans ? " (transposed)" : "") + " does not take the input's " + std::to_string(d[0]) + " features");
        op.weight.resize(b.f.size());
        for (int64_t o = 0; o < out; ++o)
            for (int64_t i = 0; i < in; ++i)
                op.weight[o * in + i] = alpha * (trans ? b.f[o * in + i] : b.f[i * out + o]);
        op.bias.assign(static_cast<size_t>(out), 0.0f);
        if (gemm && n.input_size() > 2 && !n.input(2).empty()) {
            const Constant& c = constant(n, 2, "C");
            // C broadcasts to 1 x out: a scalar, [out] or [1, out].
            const bool scalar = c.f.size() == 1, row = c.f.size() == static_cast<size_t>(out) && (c.dims.size() == 1 || (c.dims.size() == 2 && c.dims[0] == 1));
            if (!scalar && !row) fail(n, "C " + dims_text(c.dims) + " is not a bias of " + std::to_string(out) + " values");
            for (int64_t o = 0; o < out; ++o) op.bias[o] = beta * c.f[scalar ? 0 : o];
        }
        output(n, std::move(op), {out});
    }

    // Constant `c` broadcast numpy-style against N x d (a leading 1 may stand for the batch), as
    // one value per element of a sample.
    std::vector<float> broadcast(const onnx::NodeProto& n, const Constant& c, const std::vector<int64_t>& d, int64_t total) {
        std::vector<int64_t> cd = c.dims;
        if (cd.size() == d.size() + 1 && cd[0] == 1) cd.erase(cd.begin());
        if (cd.size() > d.size()) fail(n, "constant " + dims_text(c.dims) + " does not broadcast to N x " + dims_text(d));
        cd.insert(cd.begin(), d.size() - cd.size(), 1);
        for (size_t k = 0; k < d.size(); ++k)
            if (cd[k] != 1 && cd[k] != d[k]) fail(n, "constant " + dims_text(c.dims) + " does not broadcast to N x " + dims_text(d));
        std::vector<float> out(static_cast<size_t>(total));
        for (int64_t e = 0; e < total; ++e) {
            int64_t rest = e, src = 0, stride = 1;
            for (size_t k = d.size(); k-- > 0;) {
                const int64_t idx = rest % d[k];
                rest /= d[k];
                if (cd[k] != 1) src += idx * stride;
                stride *= cd[k];
            }
            out[static_cast<size_t>(e)] = c.f[static_cast<size_t>(src)];
        }
        return out;
    }

    // Add, Sub, Mul, Div: of two activations (Add only), or of an activation and a constant (as an
    // Affine, which finish_graph folds into its neighbours where it can).
    void arithmetic(const onnx::NodeProto& n) {
        const std::string& t = n.op_type();
        if (n.input_size() != 2) fail(n, "needs two inputs");
        const bool c0 = is_constant(n, 0), c1 = is_constant(n, 1);
        if (c0 && c1) fail(n, "computes on two constants (fold them when exporting)");
        OnnxOp op;
        op.in = activation(n, c0 ? 1 : 0);
        const auto d = dims(op.in);
        if (!c0 && !c1) {
            if (t != "Add") fail(n, "of two activations is not supported (only Add is)");
            op.kind = OnnxOpKind::Add;
            op.in2 = activation(n, 1);
            if (dims(op.in2) != d) fail(n, "adds " + dims_text(d) + " to " + dims_text(dims(op.in2)) + " (no broadcasting between activations)");
            return output(n, std::move(op), d);
        }
        if (c0 && t == "Div") fail(n, "divides a constant by an activation, which is not supported");
        const int64_t total = g_.values[op.in].size();
        std::vector<float> c = broadcast(n, constant(n, c0 ? 0 : 1, "constant operand"), d, total);
        op.kind = OnnxOpKind::Affine;
        op.factor.assign(c.size(), 1.0f);
        op.addend.assign(c.size(), 0.0f);
        if (t == "Add") op.addend = c;
        else if (t == "Mul") op.factor = c;
        else if (t == "Div") {
            for (float& v : c)
                if (v == 0.0f) fail(n, "divides by zero");
            for (size_t e = 0; e < c.size(); ++e) op.factor[e] = 1.0f / c[e];
        } else if (c1) {  // x - c
            for (size_t e = 0; e < c.size(); ++e) op.addend[e] = -c[e];
        } else {  // c - x
            op.factor.assign(c.size(), -1.0f);
            op.addend = c;
        }
        output(n, std::move(op), d);
    }

    // Pad in constant mode over the height and width of each map (pads from the input, opset 11 on,
    // or the attribute before it).
    void pad(const onnx::NodeProto& n) {
        OnnxOp op;
        op.kind = OnnxOpKind::Pad;
        op.in = activation(n, 0);
        need_maps(n, op.in);
        if (attr_string(n, "mode", "constant") != "constant") fail(n, "mode '" + attr_string(n, "mode", "") + "' is not supported (only constant)");
        std::vector<int64_t> pads;
        if (n.input_size() > 1 && !n.input(1).empty()) {
            const auto it = constants_.find(n.input(1));
            if (it == constants_.end() || !it->second.is_int) fail(n, "pads must be an int64 initializer or Constant");
            pads = it->second.i;
        } else {
            pads = attr_ints(n, "pads", {});
        }
        if (n.input_size() > 3 && !n.input(3).empty()) fail(n, "axes are not supported");
        if (pads.size() != 8) fail(n, "pads must have 8 values (N, C, H, W at the start, then at the end)");
        if (pads[0] || pads[1] || pads[4] || pads[5]) fail(n, "pads the batch or the channels, which is not supported");
        for (const int64_t p : pads)
            if (p < 0 || p > kMaxDim) fail(n, "padding " + std::to_string(p) + " is not supported");
        if (n.input_size() > 2 && !n.input(2).empty()) {
            const Constant& v = constant(n, 2, "constant_value");
            if (v.f.size() != 1) fail(n, "constant_value is not a scalar");
            op.pad_value = v.f[0];
        } else {
            op.pad_value = attr_float(n, "value", 0.0f);
        }
        op.pt = int(pads[2]), op.pl = int(pads[3]), op.pb = int(pads[6]), op.pr = int(pads[7]);
        const auto& d = dims(op.in);
        output(n, std::move(op), {d[0], d[1] + pads[2] + pads[6], d[2] + pads[3] + pads[7]});
    }

    void reshape(const onnx::NodeProto& n, bool flatten) {
        OnnxOp op;
        op.kind = OnnxOpKind::Reshape;
        op.in = activation(n, 0);
        const int64_t size = g_.values[op.in].size();
        std::vector<int64_t> out{size};
        if (flatten) {
            if (attr_int(n, "axis", 1) != 1) fail(n, "only axis=1 (keep the batch) is supported");
        } else {
            if (n.input_size() < 2 || !constants_.count(n.input(1))) fail(n, "the shape must be an initializer or a Constant");
            const Constant& s = constants_.at(n.input(1));
            if (!s.is_int || s.dims.size() != 1 || s.i.empty()) fail(n, "the shape is not a 1-D int64 tensor");
            // allowzero=1 (PyTorch's newer exporter sets it) makes a 0 entry an empty dimension instead
            // of a copy of the input's; without 0 entries it changes nothing.
            if (attr_int(n, "allowzero", 0) != 0 && std::find(s.i.begin(), s.i.end(), 0) != s.i.end())
                fail(n, "allowzero=1 with a 0 entry (an empty tensor) is not supported");
            // The first entry keeps the batch: 0, -1 (with every other entry known) or any number
            // (the batch the model was exported with).
            out.assign(s.i.begin() + 1, s.i.end());
            if (s.i[0] < -1) fail(n, "shape entry " + std::to_string(s.i[0]) + " is not valid");
            int64_t known = 1, unknown = -1;
            const auto& d = dims(op.in);
            for (size_t k = 0; k < out.size(); ++k) {
                if (out[k] == 0) {
                    if (k >= d.size()) fail(n, "shape entry 0 copies a dimension the input lacks");
                    out[k] = d[k];
                }
                if (out[k] == -1) {
                    if (unknown >= 0 || s.i[0] == -1) fail(n, "the shape has more than one -1");
                    unknown = static_cast<int64_t>(k);
                } else if (out[k] < 1 || out[k] > kMaxDim) {
                    fail(n, "shape entry " + std::to_string(out[k]) + " is not valid");
                } else {
                    known *= out[k];
                    if (known > kMaxElements) fail(n, "the shape has more than 2^31 elements");
                }
            }
            if (unknown >= 0) {
                if (size % known) fail(n, "cannot reshape " + dims_text(d) + " per sample to " + dims_text(out));
                out[unknown] = size / known;
            } else if (known != size) {
                fail(n, "cannot reshape " + dims_text(d) + " per sample to " + dims_text(out));
            }
            if (out.empty()) out = {1};
        }
        output(n, std::move(op), out);
    }

    // A layer kind's own operator: its settings are the node's scalar constant inputs after the data,
    // in the kind's order (absent: the kind's defaults); inputs past them (a training mode)
    // are left to the engines, which run a layer in training or in inference as asked.
    void layer(const onnx::NodeProto& n, const LayerType& kind) {
        if (n.output_size() < 1) fail(n, "has no output");
        for (int o = 1; o < n.output_size(); ++o)
            if (!n.output(o).empty()) fail(n, "output " + std::to_string(o) + " is not supported (only the first)");
        OnnxOp op;
        op.kind = OnnxOpKind::Layer;
        op.layer = kind.kind;
        op.in = activation(n, 0);
        for (size_t i = 0; i < kind.settings.size(); ++i) {
            const LayerSetting& setting = kind.settings[i];
            const int k = static_cast<int>(i) + 1;
            float v = setting.fallback;
            if (k < n.input_size() && !n.input(k).empty()) {
                const Constant& c = constant(n, k, setting.key);
                if (c.f.size() != 1) fail(n, std::string(setting.key) + " '" + n.input(k) + "' is not one number");
                v = c.f[0];
                if (!(v >= setting.lo && v <= setting.hi))
                    fail(n, std::string(setting.key) + " " + std::to_string(v) + " is out of range (" +
                                std::to_string(setting.lo) + " to " + std::to_string(setting.hi) + ")");
            }
            op.settings.push_back(v);
        }
        std::vector<int64_t> d = dims(op.in);
        output(n, std::move(op), std::move(d));
    }

    void node(const onnx::NodeProto& n, int k) {
        node_name_ = n.name().empty() ? "#" + std::to_string(k) : n.name();
        if (!n.domain().empty() && n.domain() != "ai.onnx") fail(n, "operator domain '" + n.domain() + "' is not supported");
        const std::string& t = n.op_type();
        if (t == "Constant") {
            const auto* v = attr(n, "value");
            if (!v || v->type() != onnx::AttributeProto::TENSOR) fail(n, "only a 'value' tensor attribute is supported");
            if (n.output_size() != 1) fail(n, "needs one output");
            constants_[n.output(0)] = tensor(v->t(), "node '" + node_name_ + "' (Constant)");
        } else if (t == "Identity") {
            if (n.output_size() < 1) fail(n, "has no output");
            if (is_constant(n, 0)) constants_[n.output(0)] = constants_.at(n.input(0));
            else values_[n.output(0)] = activation(n, 0);
        } else if (const LayerType* kind = layer_type_for_onnx(t)) {
            layer(n, *kind);
        } else if (t == "Relu" || t == "Sigmoid" || t == "Tanh") {
            OnnxOp op;
            op.kind = OnnxOpKind::Act;
            op.act = t == "Relu" ? OnnxAct::Relu : t == "Sigmoid" ? OnnxAct::Sigmoid : OnnxAct::Tanh;
            op.in = activation(n, 0);
            std::vector<int64_t> d = dims(op.in);
            output(n, std::move(op), std::move(d));
        } else if (t == "Conv") conv(n);
        else if (t == "MaxPool") pool(n, true, false);
        else if (t == "AveragePool") pool(n, false, false);
        else if (t == "GlobalAveragePool") pool(n, false, true);
        else if (t == "Gemm") dense(n, true);
        else if (t == "MatMul") dense(n, false);
        else if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div") arithmetic(n);
        else if (t == "Pad") pad(n);
        else if (t == "Flatten") reshape(n, true);
        else if (t == "Reshape") reshape(n, false);
        else if (t == "Softmax") {
            OnnxOp op;
            op.kind = OnnxOpKind::Softmax;
            op.in = activation(n, 0);
            const int64_t axis = attr_int(n, "axis", -1);
            std::vector<int64_t> d = dims(op.in);
            if (d.size() != 1 || (axis != 1 && axis != -1)) fail(n, "only a softmax over each sample's vector (2-D input, axis 1) is supported");
            output(n, std::move(op), std::move(d));
        } else {
            fail(n, "operator '" + t + "' is not supported");
        }
    }

    std::string name_, dir_, node_name_;
    OnnxGraph g_;
    std::map<std::string, Constant> constants_;
    std::map<std::string, int> values_;
};

}  // namespace

OnnxGraph parse_onnx(const std::string& bytes, const std::string& name, const std::string& dir) {
    return Reader(name, dir).read(bytes);
}

OnnxGraph read_onnx(const std::string& path) {
    const fs::path dir = fs::path(path).parent_path();
    return parse_onnx(read_whole_file(path), path, dir.empty() ? "." : dir.string());
}

}  // namespace lenet5
