// `train --model FILE.onnx` (host/io/onnx_import.h): an export comes back as exactly its checkpoint's
// network and weights; PyTorch's export of a small CNN (tests/data/onnx/mnist_cnn.onnx, made by
// bench/onnx/make_onnx_test_data.sh) gives PyTorch's outputs in the cpu engine, every variant matches cpu
// on it, and it trains, saves, evaluates, exports and resumes through the command line; what
// training cannot take is a one-line error.
#ifdef LENET5_HAVE_ONNX
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "cli_runner.h"
#include "common/error.h"
#include "engine/engine_factory.h"
#include "io/checkpoint.h"
#include "io/npy.h"
#include "io/onnx_export.h"
#include "io/onnx_import.h"
#include "io/onnx_reader.h"
#include "io/model_source.h"
#include "model/model_file.h"
#include "test_support.h"

namespace lenet5::test {
namespace {

const std::string kData = LENET5_SOURCE_DIR "/tests/data/onnx/";

struct ScratchDir {
    std::string path = ::testing::TempDir() + "lenet5_import_" + std::to_string(::getpid());
    ScratchDir() { std::filesystem::create_directories(path); }
    ~ScratchDir() { std::filesystem::remove_all(path); }
};

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(OnnxImport, AnExportIsItsCheckpointsNetworkWeightsAndRecipe) {
    ScratchDir dir;
    for (const std::string name : {"lenet5", "mlp", "cnn"}) {
        SCOPED_TRACE(name);
        const Model m = load_model(name);
        const std::vector<float> params = init_params(m.net, 3);
        save_model_checkpoint(m, params, dir.path + "/m.ck");
        export_checkpoint(dir.path + "/m.ck", dir.path + "/m.onnx");
        const Model back = open_model(dir.path + "/m.onnx");
        EXPECT_EQ(back.net.hash(), m.net.hash());  // tables and subsampling included
        EXPECT_EQ(back.weights, params);  // bit for bit
        EXPECT_EQ(back.recipe.batch, m.recipe.batch);
        EXPECT_EQ(back.recipe.lr, m.recipe.lr);
    }
}

TEST(OnnxImport, ModelFileTextRebuildsTheNetwork) {
    for (const std::string name : {"lenet5", "mlp", "cnn", "vgg"}) {
        const Network net = load_model(name).net;
        EXPECT_EQ(parse_model(model_file_text(net), name).net.describe(), net.describe()) << name;
    }
    Network scaled = parse_model("model s\ninput 1x32x32 scale=1 shift=0.25\nfc out units=10\n", "s.net").net;
    EXPECT_EQ(scaled.scaling.scale, 1.0f);
    EXPECT_EQ(scaled.scaling.shift, 0.25f);
    EXPECT_EQ(parse_model(model_file_text(scaled), "s").net.describe(), scaled.describe());
    EXPECT_NE(scaled.describe(), parse_model("model s\ninput 1x32x32\nfc out units=10\n", "s.net").net.describe());
}

// The default scaling is the one the engines always had: byte / 127.5 - 1, bit for bit.
TEST(OnnxImport, DefaultScalingIsBitForBitTheOriginal) {
    const InputScaling s;
    for (int b = 0; b < 256; ++b) EXPECT_EQ(s.value(b), static_cast<float>(b) / 127.5f - 1.0f) << b;
}

// The committed images as a data set: x holds byte / 255.
Dataset committed_images(const NpyArray& x) {
    Dataset d;
    d.count = static_cast<int>(x.shape[0]);
    d.rows = d.cols = 28;
    for (const float v : x.data) d.images.push_back(static_cast<uint8_t>(std::lround(v * 255.0f)));
    d.labels.assign(static_cast<size_t>(d.count), 0);
    return d;
}

TEST(OnnxImport, PyTorchsCnnGivesPyTorchsOutputsAndEveryVariantMatchesCpu) {
    const Model m = open_model(kData + "mnist_cnn.onnx");
    const Network& net = m.net;
    ASSERT_EQ(net.layers.size(), 6u);
    EXPECT_EQ(net.param_count, 14538u);
    EXPECT_EQ(net.scaling.scale, 1.0f);  // no scaling in the graph: the pixels in [0, 1]
    EXPECT_EQ(net.scaling.shift, 0.0f);
    EXPECT_EQ(net.loss, Loss::SoftmaxCrossEntropy);

    const NpyArray x = read_npy(kData + "mnist_cnn_x.npy"), y = read_npy(kData + "mnist_cnn_y_torch.npy");
    const Dataset images = committed_images(x);
    auto cpu = cpu_engine(net);
    cpu->upload(Split::Test, images);
    cpu->set_params(m.weights);
    cpu->forward(Split::Test, 0, images.count);
    const std::vector<float> logits = cpu->layer_output(net.layers.size() - 1);
    for (int s = 0; s < images.count; ++s) {
        const auto at = [&](const std::vector<float>& v) {
            return std::vector<float>(v.begin() + s * 10, v.begin() + (s + 1) * 10);
        };
        EXPECT_LT(relative_error(at(logits), at(y.data)), 1e-5) << "image " << s;
    }
    for (const std::string& variant : built_variants()) {
        if (variant == "cpu") continue;
        EngineRequest request;
        request.variant = variant;
        auto e = make_engine(net, request);
        expect_matches_cpu(*e, net, 5);
    }
}

TEST(OnnxImport, TrainsSavesEvaluatesExportsAndResumesThroughTheCommandLine) {
    const std::string data = mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    ScratchDir dir;
    const std::string model = kData + "mnist_cnn.onnx", ck = dir.path + "/cnn.ck", back = dir.path + "/back.onnx";
    const std::string common = " --variant omp --data " + data + " --train-limit 640 --test-limit 200";
    auto r = run_cli("train --model " + model + common + " --epochs 1 --save " + ck);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("lenet5: model mnist_cnn, variant omp"), std::string::npos) << r.out;
    r = run_cli("eval --model " + ck + " --variant cpu --data " + data + " --test-limit 200");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("(model mnist_cnn, epoch 1)"), std::string::npos) << r.out;
    ASSERT_EQ(run_cli("export --model " + ck + " --onnx " + back).status, 0);
    EXPECT_EQ(open_model(back).weights, load_checkpoint(ck).params);
    r = run_cli("train --resume " + ck + " --epochs 2" + common);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("\n    2 "), std::string::npos) << r.out;

    // From the file's weights the first epoch differs from fresh seeded ones; --init fresh is the seed's.
    const std::string fresh = dir.path + "/fresh.json", file = dir.path + "/file.json";
    ASSERT_EQ(run_cli("train --model " + model + common + " --epochs 1 --init fresh --json " + fresh).status, 0);
    ASSERT_EQ(run_cli("train --model " + model + common + " --epochs 1 --json " + file).status, 0);
    EXPECT_NE(slurp(fresh).substr(slurp(fresh).find("\"train_loss\"")), slurp(file).substr(slurp(file).find("\"train_loss\"")));
    EXPECT_EQ(run_cli("train --model " + model + " --init random").status, 2);
}

// A one-node edit of the committed CNN, or a hand-made graph.
std::string edited(const std::function<void(onnx::ModelProto&)>& edit) {
    onnx::ModelProto m;
    EXPECT_TRUE(m.ParseFromString(slurp(kData + "mnist_cnn.onnx")));
    edit(m);
    return m.SerializeAsString();
}

std::string import_error(const std::string& bytes) {
    return error_of([&] { import_onnx_for_training(parse_onnx(bytes, "m.onnx", ""), "m.onnx"); });
}

TEST(OnnxImport, WhatTrainingCannotTakeIsAOneLineError) {
    // An operator the reader does not know: the reader's error, naming node and operator.
    const std::string unknown = edited([](onnx::ModelProto& m) { m.mutable_graph()->mutable_node(1)->set_op_type("LeakyRelu"); });
    EXPECT_NE(import_error(unknown).find("(LeakyRelu): operator 'LeakyRelu' is not supported"), std::string::npos);
    // A wrong input shape for training: 3 maps.
    const std::string rgb = edited([](onnx::ModelProto& m) {
        m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(3);
        for (auto& t : *m.mutable_graph()->mutable_initializer())
            if (t.dims_size() == 4 && t.dims(1) == 1) {  // the first Conv's weight: 3 input maps
                t.set_dims(1, 3);
                const std::string raw = t.raw_data();
                t.set_raw_data(raw + raw + raw);
            }
    });
    EXPECT_EQ(import_error(rgb), "m.onnx: input 'image' is N x 3x28x28; training takes the images as N x 1 x H x W (H, W at least 28) or N x 784");
    // 7 outputs where MNIST has 10 classes.
    const std::string seven = edited([](onnx::ModelProto& m) {
        for (auto& t : *m.mutable_graph()->mutable_initializer()) {
            if (t.dims_size() == 2 && t.dims(0) == 10) t.set_dims(0, 7), t.set_raw_data(t.raw_data().substr(0, 7 * 32 * 4));
            else if (t.dims_size() == 1 && t.dims(0) == 10) t.set_dims(0, 7), t.set_raw_data(t.raw_data().substr(0, 7 * 4));
        }
    });
    EXPECT_EQ(import_error(seven), "m.onnx: the network has 7 outputs; MNIST and Fashion-MNIST have 10 classes");
    // A residual Add, which a chain of layers cannot hold.
    const std::string residual = edited([](onnx::ModelProto& m) {
        auto* n = m.mutable_graph()->add_node();
        n->set_op_type("Add");
        n->set_name("skip");
        n->add_input("logits");
        n->add_input("logits");
        n->add_output("sum");
        m.mutable_graph()->mutable_output(0)->set_name("sum");
    });
    EXPECT_EQ(import_error(residual), "m.onnx: node 'skip' (Add): adds two activations (a residual connection); lenet5 takes a chain of layers");
    // Weights that do not match the shapes: the metadata's model file against the graph's layers.
    const std::string mismatch = edited([](onnx::ModelProto& m) {
        auto* p = m.add_metadata_props();
        p->set_key("lenet5.model");
        p->set_value("model x\ninput 1x28x28 scale=1 shift=0\nfc out units=10\n");
    });
    EXPECT_EQ(import_error(mismatch), "m.onnx: its lenet5.model metadata has 1 layers, the graph 6");
    // A grouped convolution becomes a connection table: each output map reads its group's 4 maps.
    const std::string grouped = edited([](onnx::ModelProto& m) {
        for (auto& n : *m.mutable_graph()->mutable_node())
            if (n.op_type() == "Conv" && n.input(0) != "image")  // the second: 8 -> 16 maps, now 2 groups
                for (auto& a : *n.mutable_attribute())
                    if (a.name() == "group") a.set_i(2);
        for (auto& t : *m.mutable_graph()->mutable_initializer())
            if (t.dims_size() == 4 && t.dims(1) == 8) t.set_dims(1, 4), t.set_raw_data(t.raw_data().substr(0, t.raw_data().size() / 2));
    });
    const Model g = import_onnx_for_training(parse_onnx(grouped, "m.onnx", ""), "m.onnx");
    const LayerSpec& conv2 = *std::find_if(g.net.layers.begin() + 1, g.net.layers.end(),
                                           [](const LayerSpec& l) { return l.kind == LayerKind::Conv; });
    ASSERT_EQ(conv2.connections(), 16 * 4);
    for (int j = 0; j < conv2.connections(); ++j) EXPECT_EQ(conv2.conn_out[size_t(j)] / 8, conv2.conn_in[size_t(j)] / 4);

    // Through the command line: one line, exit 1, for a truncated file too.
    ScratchDir dir;
    const std::string cut = dir.path + "/cut.onnx";
    {
        const std::string whole = slurp(kData + "mnist_cnn.onnx");
        std::ofstream(cut, std::ios::binary) << whole.substr(0, whole.size() / 2);
    }
    for (const std::string& file : {cut, dir.path + "/missing.onnx"}) {
        const CliResult r = run_cli("train --model " + file + " --epochs 1 --train-limit 64");
        EXPECT_EQ(r.status, 1) << file;
        EXPECT_EQ(r.err.rfind("lenet5: error: " + file + ": ", 0), 0u) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
}

}  // namespace
}  // namespace lenet5::test
#endif
