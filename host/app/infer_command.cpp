#include "app/infer_command.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "io/atomic_file.h"
#include "common/error.h"
#include "io/npy.h"
#include "io/checkpoint.h"
#include "io/onnx_export.h"
#include "io/onnx_reader.h"
#include "model/model_file.h"
#include "common/rng.h"

namespace lenet5 {

namespace {

std::string dims_text(const std::vector<int64_t>& dims) {
    std::string s;
    for (const int64_t d : dims) s += (s.empty() ? "" : " x ") + std::to_string(d);
    return s;
}

NpyArray load_images(const InferOptions& o, const InferGraph& g) {
    const auto& dims = g.values[g.input].dims;
    const int64_t size = g.values[g.input].size();
    NpyArray x;
    if (o.random > 0) {
        x.shape = {o.random};
        x.shape.insert(x.shape.end(), dims.begin(), dims.end());
        x.data.resize(size_t(o.random) * size_t(size));
        Rng rng(o.seed);
        for (float& v : x.data) v = rng.uniform(-1.0f, 1.0f);
        return x;
    }
    x = read_npy(o.input_path);
    const std::vector<int64_t> per_sample(x.shape.begin() + (x.shape.empty() ? 0 : 1), x.shape.end());
    if (x.shape.empty() || x.shape[0] < 1 || per_sample != dims)
        throw Error(o.input_path + ": shape " + dims_text(x.shape) + " is not N x " + dims_text(dims) + " (the input of " +
                    (o.onnx_path.empty() ? o.model_path : o.onnx_path) + ")");
    return x;
}

// A checkpoint's network as `export` writes it, read back as `--onnx` reads a file: whatever export
// writes, infer runs, and a checkpoint gives exactly its export's outputs.
InferGraph checkpoint_graph(const std::string& path) {
    const Checkpoint c = load_checkpoint(path);
    const Network net = checkpoint_model(c, path).net;
    std::string bytes;
    if (!onnx_model(net, c.params).SerializeToString(&bytes)) throw Error(path + ": cannot build its ONNX model");
    return parse_onnx(bytes, path, "");
}

size_t argmax(const float* v, int64_t n) { return size_t(std::max_element(v, v + n) - v); }

}  // namespace

int run_infer(const InferOptions& o, std::ostream& out) {
    const InferGraph g = o.onnx_path.empty() ? checkpoint_graph(o.model_path) : read_onnx(o.onnx_path);
    const std::string& source = o.onnx_path.empty() ? o.model_path : o.onnx_path;
    const NpyArray x = load_images(o, g);
    const int images = int(x.shape[0]);
    InferRequest request = o.engine;
    request.batch = std::min(request.batch, images);
    auto runner = make_infer_runner(g, request);

    const int64_t in_size = g.values[g.input].size(), out_size = g.values[g.output].size();
    NpyArray y;
    y.shape = {images};
    y.shape.insert(y.shape.end(), g.values[g.output].dims.begin(), g.values[g.output].dims.end());
    y.data.resize(size_t(images) * size_t(out_size));
    auto pass = [&] {
        const auto start = std::chrono::steady_clock::now();
        for (int first = 0; first < images; first += request.batch) {
            const int count = std::min(request.batch, images - first);
            runner->run(x.data.data() + size_t(first) * in_size, count, y.data.data() + size_t(first) * out_size);
        }
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / images;
    };
    if (o.repeats > 1) pass();  // warm-up: first launches, page faults
    const std::vector<double> warm = runner->op_ms();
    std::vector<double> per_image;
    for (int r = 0; r < o.repeats; ++r) per_image.push_back(pass());
    std::vector<double> sorted = per_image;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];

    if (!o.output_path.empty()) write_file_atomic(o.output_path, npy_bytes(y));
    std::vector<size_t> top1;
    for (int s = 0; s < images; ++s) top1.push_back(argmax(y.data.data() + size_t(s) * out_size, out_size));

    out << "lenet5: " << source << " on " << runner->variant() << ", " << runner->device() << ": " << images
        << " images at batch " << request.batch << ", " << median << " ms per image"
        << (o.repeats > 1 ? " (median of " + std::to_string(o.repeats) + " passes)" : "") << "; top-1 of the first:";
    for (int s = 0; s < std::min(images, 10); ++s) out << " " << top1[size_t(s)];
    out << "\n";

    if (!o.json_path.empty()) {
        nlohmann::json layers = nlohmann::json::array();
        const std::vector<double> ms = runner->op_ms();
        for (size_t k = 0; k < g.ops.size(); ++k) {
            const InferOp& op = g.ops[k];
            if (op.kind == InferOpKind::Reshape) continue;
            layers.push_back({{"name", op.name},
                              {"op", op.op_type},
                              {"act", act_name(op.act)},
                              {"ms_per_image", (ms[k] - warm[k]) / (double(images) * o.repeats)}});
        }
        const nlohmann::json j = {{"model", source},        {"variant", runner->variant()},
                                  {"device", runner->device()},  {"images", images},
                                  {"batch", request.batch},      {"repeats", o.repeats},
                                  {"ms_per_image", median},      {"ms_per_image_all", per_image},
                                  {"layers", layers},            {"top1", top1}};
        write_file_atomic(o.json_path, j.dump(1) + "\n");
    }
    return 0;
}

}  // namespace lenet5
