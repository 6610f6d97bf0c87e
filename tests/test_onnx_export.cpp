// `lenet5 export`: each built-in model, trained a few steps and saved as a checkpoint, is
// exported through the command line, passes ONNX's own checker, and runs in onnxruntime
// (bench/peers/onnxruntime_run.js) to the outputs of the `cpu` engine's forward (relative
// error <= 1e-4 per output vector) and to the predictions of `lenet5 eval` (the same
// confusion matrix) on a slice of the test set; `lenet5 infer` runs the export and the
// checkpoint on every variant to onnxruntime's outputs (1e-5) and predictions. Without node or onnxruntime-node the
// onnxruntime checks are skipped, except in CI (CI=true), where they fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>

#include "io/checkpoint.h"
#include "cli_runner.h"
#include "common/error.h"
#include "model/model_file.h"
#include "test_support.h"

#ifdef LENET5_HAVE_ONNX
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include "io/atomic_file.h"
#include "io/npy.h"
#include "io/onnx_export.h"
#endif

namespace lenet5::test {
namespace {

std::string temp_path(const std::string& name) {
    return ::testing::TempDir() + "lenet5_export_" + std::to_string(::getpid()) + "_" + name;
}

#ifdef LENET5_HAVE_ONNX


// The parameters after a few SGD steps from the seeded initialisation, on the cpu engine.
std::vector<float> trained_params(const Network& net, const Dataset& data) {
    auto e = cpu_engine(net);
    e->upload(Split::Train, data);
    e->set_params(init_params(net, 7));
    std::vector<int32_t> order(static_cast<size_t>(data.count));
    std::iota(order.begin(), order.end(), 0);
    e->set_order(order);
    for (int step = 0; step < 2; ++step) {
        e->forward(Split::Train, step * 4, 4);
        e->backward();
        e->update(0.05f, 0.9f, 0.0f);
    }
    return e->params();
}

std::string save_trained_checkpoint(const Model& m, const Dataset& data, const std::string& path) {
    save_model_checkpoint(m, trained_params(m.net, data), path);
    return path;
}

onnx::ModelProto read_model(const std::string& path) {
    onnx::ModelProto model;
    EXPECT_TRUE(model.ParseFromString(slurp(path))) << path;
    return model;
}

// The images as the graph takes them: [N, 1, rows, cols], byte / 255.
NpyArray pixels(const Dataset& data, int count) {
    NpyArray a;
    a.shape = {count, 1, data.rows, data.cols};
    for (size_t i = 0; i < static_cast<size_t>(count * data.rows * data.cols); ++i)
        a.data.push_back(static_cast<float>(data.images[i]) / 255.0f);
    return a;
}

bool in_ci() {
    const char* ci = std::getenv("CI");
    return ci && std::string(ci) == "true";
}

// Runs the onnxruntime peer on `input`; the outputs, or nothing when node or onnxruntime-node
// is missing (`why` then says which).
std::optional<NpyArray> run_onnxruntime(const std::string& model, const NpyArray& input, std::string& why) {
    if (std::system("node --version >/dev/null 2>&1") != 0) {
        why = "node is not installed";
        return std::nullopt;
    }
    const std::string in = temp_path("in.npy"), out = temp_path("out.npy"), err = temp_path("ort_err.txt");
    write_file_atomic(in, npy_bytes(input));
    const std::string cmd = "node " LENET5_SOURCE_DIR "/bench/peers/onnxruntime_run.js --model " + model +
                            " --input " + in + " --output " + out + " --batch 16 --repeats 0 >/dev/null 2>" + err;
    const int raw = std::system(cmd.c_str());
    const int status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    const std::string messages = slurp(err);
    std::optional<NpyArray> outputs;
    if (status == 3) why = "onnxruntime-node is not installed (bench/peers/install_onnxruntime.sh): " + messages;
    else if (status == 0) outputs = read_npy(out);
    EXPECT_TRUE(status == 0 || status == 3) << "onnxruntime_run.js exited " << status << ": " << messages;
    for (const std::string& f : {in, out, err}) std::remove(f.c_str());
    return outputs;
}

// The arg-max of each row (the first maximum wins ties, as our loss functions count).
std::vector<int> predictions(const std::vector<float>& rows, int classes) {
    std::vector<int> p;
    for (size_t r = 0; r * static_cast<size_t>(classes) < rows.size(); ++r) {
        const float* v = rows.data() + r * static_cast<size_t>(classes);
        p.push_back(static_cast<int>(std::max_element(v, v + classes) - v));
    }
    return p;
}

std::vector<std::string> infer_variants() {
    std::vector<std::string> v{"cpu", "avx", "omp"};
#ifdef LENET5_HAVE_OPENCL
    for (const char* name : {"gpu", "gpu-constant", "gpu-local"}) v.push_back(name);
#endif
    return v;
}

// ||a - b|| / ||b|| of each `per` values, the largest.
double worst_relative(const std::vector<float>& a, const std::vector<float>& b, size_t per) {
    double worst = 0;
    for (size_t s = 0; s * per < b.size(); ++s) {
        const std::vector<float> x(a.begin() + std::ptrdiff_t(s * per), a.begin() + std::ptrdiff_t((s + 1) * per));
        const std::vector<float> y(b.begin() + std::ptrdiff_t(s * per), b.begin() + std::ptrdiff_t((s + 1) * per));
        worst = std::max(worst, relative_error(x, y));
    }
    return worst;
}

// `images`: the test-set slice run through both (few for the CNN, whose scalar forward is slow).
void check_export(const Model& m, int images) {
    const std::string dir = mnist_dir();
    const Dataset test_set = dir.empty() ? random_dataset(images, 5) : load_mnist(dir, Split::Test, images);
    const Network& net = m.net;
    const std::string& name = net.name;
    const std::string ck = save_trained_checkpoint(m, test_set, temp_path(name + ".ck"));
    const std::string file = temp_path(name + ".onnx");

    const CliResult exported = run_cli("export --model " + ck + " --onnx " + file);
    ASSERT_EQ(exported.status, 0) << exported.err;
    EXPECT_NE(exported.out.find("model " + name), std::string::npos) << exported.out;
    const onnx::ModelProto model = read_model(file);
    EXPECT_NO_THROW(onnx::checker::check_model(model));
    ASSERT_EQ(model.graph().input_size(), 1);
    ASSERT_EQ(model.graph().output_size(), 1);
    EXPECT_EQ(model.graph().output(0).name(), net.loss == Loss::SoftmaxCrossEntropy ? "logits" : "outputs");

    // The cpu engine's forward: the reference outputs.
    auto cpu = cpu_engine(net);
    cpu->upload(Split::Test, test_set);
    Checkpoint c = load_checkpoint(ck);
    cpu->set_params(c.params);
    cpu->forward(Split::Test, 0, images);
    const std::vector<float> ref = cpu->layer_output(net.layers.size() - 1);

    std::string why;
    const auto got = run_onnxruntime(file, pixels(test_set, images), why);
    if (!got) {
        if (in_ci()) FAIL() << "CI must run onnxruntime: " << why;
        if (!why.empty()) GTEST_SKIP() << why;
        return;
    }
    ASSERT_EQ(got->shape, (std::vector<int64_t>{images, net.classes}));
    const size_t k = static_cast<size_t>(net.classes);
    for (size_t i = 0; i < static_cast<size_t>(images); ++i) {
        const std::vector<float> a(got->data.begin() + static_cast<std::ptrdiff_t>(i * k),
                                   got->data.begin() + static_cast<std::ptrdiff_t>((i + 1) * k));
        const std::vector<float> b(ref.begin() + static_cast<std::ptrdiff_t>(i * k),
                                   ref.begin() + static_cast<std::ptrdiff_t>((i + 1) * k));
        EXPECT_LE(relative_error(a, b), 1e-4) << name << " image " << i;
    }

    // `lenet5 infer` runs the export, and the checkpoint itself, on every variant to onnxruntime's outputs.
    const std::string in = temp_path(name + "_x.npy"), out = temp_path(name + "_y.npy");
    write_file_atomic(in, npy_bytes(pixels(test_set, images)));
    for (const std::string& variant : infer_variants())
        for (const std::string& source : {"--onnx " + file, "--model " + ck}) {
            SCOPED_TRACE(name + " on " + variant + " from " + source);
            const CliResult r = run_cli("infer " + source + " --input " + in + " --output " + out + " --batch 16 --variant " + variant);
            ASSERT_EQ(r.status, 0) << r.err;
            const NpyArray y = read_npy(out);
            ASSERT_EQ(y.shape, got->shape);
            EXPECT_LE(worst_relative(y.data, got->data, k), 1e-5);
            EXPECT_EQ(predictions(y.data, net.classes), predictions(got->data, net.classes));
        }
    for (const std::string& f : {in, out}) std::remove(f.c_str());

    // `lenet5 eval` on the same slice: its confusion matrix is onnxruntime's predictions.
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched: the comparison with lenet5 eval needs its test set";
    const std::string json = temp_path(name + "_eval.json");
    const CliResult ev = run_cli("eval --model " + ck + " --variant cpu --data " + dir + " --test-limit " +
                                 std::to_string(images) + " --json " + json);
    ASSERT_EQ(ev.status, 0) << ev.err;
    std::vector<std::vector<int64_t>> confusion(k, std::vector<int64_t>(k, 0));
    const std::vector<int> p = predictions(got->data, net.classes);
    for (size_t i = 0; i < p.size(); ++i) ++confusion[test_set.labels[i]][static_cast<size_t>(p[i])];
    EXPECT_EQ(nlohmann::json::parse(slurp(json)).at("confusion").get<std::vector<std::vector<int64_t>>>(), confusion)
        << name;
    for (const std::string& f : {ck, file, json}) std::remove(f.c_str());
}

TEST(OnnxExport, LeNet5MatchesCpuAndEvalInOnnxruntime) { check_export(load_model("lenet5"), 64); }
TEST(OnnxExport, MlpMatchesCpuAndEvalInOnnxruntime) { check_export(load_model("mlp"), 64); }
TEST(OnnxExport, CnnMatchesCpuAndEvalInOnnxruntime) { check_export(load_model("cnn"), 16); }
// Dropout layers (a layer kind's own ONNX operator, Dropout with its ratio): identity in inference,
// in onnxruntime as in every engine.
TEST(OnnxExport, DropoutIsIdentityInOnnxruntime) {
    check_export(load_model(LENET5_SOURCE_DIR "/tests/data/dropout_small.net"), 64);
}

// Window layers after a fully connected one (the tensor is reshaped back to maps), average pooling.
TEST(OnnxExport, WindowLayersAfterFullyConnectedMatch) {
    check_export(parse_model("model mixed\ninput 1x28x28\nfc F1 units=36 act=relu\n"
                             "conv C1 maps=4 kernel=1 act=tanh\navgpool P1 window=1\nfc output units=10\n",
                             "mixed.net"),
                 16);
}

// C3's connection table: the 16 x 6 kernels of its Conv are zero exactly where Table I has no
// connection (36 of them), and the subsampling layers are depthwise Convs.
TEST(OnnxExport, ConnectionTableIsZeroKernelsAndSubsamplingIsDepthwise) {
    const Network net = lenet5_network();
    const onnx::ModelProto model = onnx_model(net, init_params(net, 3));
    EXPECT_NO_THROW(onnx::checker::check_model(model));
    const LayerSpec& c3 = net.layers[2];
    for (const auto& t : model.graph().initializer()) {
        if (t.name() != "C3_W") continue;
        ASSERT_EQ(t.float_data_size(), 16 * 6 * 25);
        int zero_kernels = 0;
        for (int o = 0; o < 16; ++o)
            for (int i = 0; i < 6; ++i) {
                bool zero = true;
                for (int x = 0; x < 25; ++x) zero = zero && t.float_data((o * 6 + i) * 25 + x) == 0.0f;
                const bool connected = std::find(c3.conn_in.begin() + c3.conn_begin[static_cast<size_t>(o)],
                                                 c3.conn_in.begin() + c3.conn_begin[static_cast<size_t>(o) + 1],
                                                 i) != c3.conn_in.begin() + c3.conn_begin[static_cast<size_t>(o) + 1];
                EXPECT_EQ(zero, !connected) << "C3 output " << o << " input " << i;
                zero_kernels += zero;
            }
        EXPECT_EQ(zero_kernels, 36);
    }
    std::map<std::string, int64_t> groups;  // the Conv nodes with a group attribute
    for (const auto& n : model.graph().node())
        for (const auto& a : n.attribute())
            if (n.op_type() == "Conv" && a.name() == "group") groups[n.name()] = a.i();
    EXPECT_EQ(groups, (std::map<std::string, int64_t>{{"S2_out", 6}, {"S4_out", 16}}));
}

TEST(OnnxExport, RefusesNetworksImagesCannotFeed) {
    for (const Shape input : {Shape{3, 28, 28}, Shape{1, 20, 20}}) {
        const Network net = NetworkBuilder("odd", input).fully_connected("out", 10, Activation::None).build();
        EXPECT_THROW(onnx_model(net, init_params(net, 1)), Error) << input.c << "x" << input.h << "x" << input.w;
    }
}

#endif  // LENET5_HAVE_ONNX

TEST(OnnxExport, HelpNamesTheCommand) {
    EXPECT_NE(run_cli("--help").out.find("\n  export "), std::string::npos);
    EXPECT_EQ(run_cli("export --help").out.rfind("usage: lenet5 export --model CHECKPOINT --onnx OUT", 0), 0u);
}

TEST(OnnxExport, BadCheckpointIsOneLineError) {
    const std::string bad = temp_path("bad.ck");
    {
        std::ofstream(bad) << "not a checkpoint";
    }
    const CliResult r = run_cli("export --model " + bad + " --onnx " + temp_path("bad.onnx"));
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err.rfind("lenet5: error: ", 0), 0u) << r.err;
#ifndef LENET5_HAVE_ONNX
    EXPECT_NE(r.err.find("no ONNX support"), std::string::npos) << r.err;
#endif
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(access(temp_path("bad.onnx").c_str(), F_OK), 0);
    std::remove(bad.c_str());
    EXPECT_EQ(run_cli("export --model " + bad).status, 2);
}

}  // namespace
}  // namespace lenet5::test
