#include "app/infer_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/rng.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/npy.h"
#include "io/onnx_import.h"
#include "io/onnx_reader.h"
#include "model/model_file.h"

namespace lenet5 {

namespace {

// What infer runs: a network with its weights, and one input's shape as the source states it.
struct Source {
    std::string path;
    Model model;
    std::vector<float> params;
    std::vector<int64_t> dims, out_dims;  // one input and one output, without the batch
};

std::string dims_text(const std::vector<int64_t>& dims) {
    std::string s;
    for (const int64_t d : dims) s += (s.empty() ? "" : " x ") + std::to_string(d);
    return s;
}

int64_t product(const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (const int64_t d : dims) n *= d;
    return n;
}

// An ONNX file, or a checkpoint as `export` writes it: the pixels in [0, 1] of 1 x 28 x 28 images.
Source open_source(const InferOptions& o) {
    Source s;
    if (!o.onnx_path.empty()) {
        const OnnxGraph g = read_onnx(o.onnx_path);
        s = {o.onnx_path, import_onnx(g, o.onnx_path), {}, g.values[static_cast<size_t>(g.input)].dims,
             g.values[static_cast<size_t>(g.output)].dims};
        s.params = s.model.weights;
        return s;
    }
    const Checkpoint c = load_checkpoint(o.model_path);
    s = {o.model_path, checkpoint_model(c, o.model_path), c.params, {1, 28, 28}, {}};
    const Shape &in = s.model.net.input, &out = s.model.net.layers.back().out;
    s.out_dims = out.h == 1 && out.w == 1 ? std::vector<int64_t>{out.c} : std::vector<int64_t>{out.c, out.h, out.w};
    if (in.c != 1 || in.h < 28 || in.w < 28)
        throw Error(o.model_path + ": its network's input is " + std::to_string(in.c) + "x" + std::to_string(in.h) + "x" +
                    std::to_string(in.w) + ", not 28x28 images (as export writes it)");
    return s;
}

NpyArray load_images(const InferOptions& o, const Source& src) {
    NpyArray x;
    if (o.random > 0) {
        x.shape = {o.random};
        x.shape.insert(x.shape.end(), src.dims.begin(), src.dims.end());
        x.data.resize(size_t(o.random) * size_t(product(src.dims)));
        Rng rng(o.seed);
        for (float& v : x.data) v = rng.uniform(-1.0f, 1.0f);
        return x;
    }
    x = read_npy(o.input_path);
    const std::vector<int64_t> per_sample(x.shape.begin() + (x.shape.empty() ? 0 : 1), x.shape.end());
    if (x.shape.empty() || x.shape[0] < 1 || per_sample != src.dims)
        throw Error(o.input_path + ": shape " + dims_text(x.shape) + " is not N x " + dims_text(src.dims) +
                    " (the input of " + src.path + ")");
    return x;
}

// One input as the network takes it: each value v as the network's scaling takes a pixel v in [0, 1]
// (v * scale + shift), an image smaller than the input centred in it on the background, as
// image_to_input (engine/preprocess.h) places MNIST's images.
void to_network_input(const float* x, const std::vector<int64_t>& dims, const Network& net, float* out) {
    const InputScaling& sc = net.scaling;
    const int64_t n = product(dims);
    if (n == net.input.size()) {
        for (int64_t i = 0; i < n; ++i) out[i] = x[i] * sc.scale + sc.shift;  // exact for scale 1, shift 0
        return;
    }
    const int rows = int(dims[dims.size() - 2]), cols = int(dims.back());  // one map (onnx_import's padding)
    const int top = (net.input.h - rows) / 2, left = (net.input.w - cols) / 2;
    std::fill(out, out + net.input.size(), sc.shift);
    for (int y = 0; y < rows; ++y)
        for (int c = 0; c < cols; ++c) out[(top + y) * net.input.w + left + c] = x[y * cols + c] * sc.scale + sc.shift;
}

void softmax(float* v, int64_t n) {
    const float mx = *std::max_element(v, v + n);
    float sum = 0.0f;
    for (int64_t k = 0; k < n; ++k) sum += v[k] = std::exp(v[k] - mx);
    for (int64_t k = 0; k < n; ++k) v[k] /= sum;
}

size_t argmax(const float* v, int64_t n) { return size_t(std::max_element(v, v + n) - v); }

}  // namespace

int run_infer(const InferOptions& o, std::ostream& out) {
    const Source src = open_source(o);
    const Network& net = src.model.net;
    const NpyArray x = load_images(o, src);
    const int images = int(x.shape[0]), batch = std::min(o.batch, images);
    EngineRequest request = o.engine;
    request.batch = batch;
    request.inference = true;
    const auto engine = make_engine(net, request);
    engine->set_params(src.params);

    const int64_t in_size = product(src.dims), net_in = net.input.size(), out_size = net.layers.back().out.size();
    std::vector<float> inputs(size_t(images) * size_t(net_in));
    for (int s = 0; s < images; ++s)
        to_network_input(x.data.data() + size_t(s) * in_size, src.dims, net, inputs.data() + size_t(s) * net_in);
    NpyArray y;
    y.shape = {images};
    y.shape.insert(y.shape.end(), src.out_dims.begin(), src.out_dims.end());
    y.data.resize(size_t(images) * size_t(out_size));
    std::vector<double> layer_ms(net.layers.size(), 0.0);
    auto pass = [&](std::vector<double>* ms) {
        const auto start = std::chrono::steady_clock::now();
        for (int first = 0; first < images; first += batch)
            engine->infer(inputs.data() + size_t(first) * net_in, std::min(batch, images - first),
                          y.data.data() + size_t(first) * out_size, ms);
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / images;
    };
    if (o.repeats > 1) pass(nullptr);  // warm-up: first launches, page faults
    std::vector<double> per_image;
    for (int r = 0; r < o.repeats; ++r) per_image.push_back(pass(&layer_ms));
    std::vector<double> sorted = per_image;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];

    if (src.model.outputs_softmax)
        for (int s = 0; s < images; ++s) softmax(y.data.data() + size_t(s) * out_size, out_size);
    if (!o.output_path.empty()) write_file_atomic(o.output_path, npy_bytes(y));
    std::vector<size_t> top1;
    for (int s = 0; s < images; ++s) top1.push_back(argmax(y.data.data() + size_t(s) * out_size, out_size));

    out << "lenet5: " << src.path << " on " << engine->variant() << ", " << engine->device() << ": " << images
        << " images at batch " << batch << ", " << median << " ms per image"
        << (o.repeats > 1 ? " (median of " + std::to_string(o.repeats) + " passes)" : "") << "; top-1 of the first:";
    for (int s = 0; s < std::min(images, 10); ++s) out << " " << top1[size_t(s)];
    out << "\n";

    if (!o.json_path.empty()) {
        nlohmann::json layers = nlohmann::json::array();
        for (size_t k = 0; k < net.layers.size(); ++k) {
            const LayerSpec& l = net.layers[k];
            layers.push_back({{"name", l.name},
                              {"op", kind_name(l.kind)},
                              {"act", activation_name(l.activation)},
                              {"ms_per_image", layer_ms[k] / (double(images) * o.repeats)}});
        }
        const nlohmann::json j = {{"model", src.path},          {"variant", engine->variant()},
                                  {"device", engine->device()},  {"images", images},
                                  {"batch", batch},              {"repeats", o.repeats},
                                  {"ms_per_image", median},      {"ms_per_image_all", per_image},
                                  {"layers", layers},            {"top1", top1}};
        write_file_atomic(o.json_path, j.dump(1) + "\n");
    }
    return 0;
}

}  // namespace lenet5
