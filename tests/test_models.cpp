// Model files: the built-in models' shapes, the settings they carry, and a one-line error
// with file and line for every kind of malformed file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli_runner.h"
#include "common/error.h"
#include "model/model_file.h"
#include "test_support.h"
#include "train/trainer.h"

using namespace lenet5;

namespace {

std::string error_of(const std::string& text) {
    try {
        parse_model(text, "m.net");
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

const std::string kHead = "model m\ninput 1x28x28\n";

}  // namespace

TEST(Models, BuiltInModelsHaveTheSeedsShapes) {
    ASSERT_EQ(builtin_models().size(), 4u);
    EXPECT_EQ(builtin_models()[0].first, "lenet5");  // the default comes first

    const Network mlp = load_model("mlp").net;
    ASSERT_EQ(mlp.layers.size(), 2u);
    EXPECT_EQ(mlp.param_count, 784u * 200 + 200 + 200 * 10 + 10);
    EXPECT_EQ(mlp.layers[0].activation, Activation::Sigmoid);
    EXPECT_EQ(mlp.layers[1].activation, Activation::Sigmoid);
    EXPECT_EQ(mlp.loss, Loss::SquaredError);

    const Network cnn = load_model("cnn").net;
    ASSERT_EQ(cnn.layers.size(), 4u);
    const LayerSpec& c1 = cnn.layers[0];
    EXPECT_EQ(c1.pad, 2);
    EXPECT_EQ(c1.out.c, 32);
    EXPECT_EQ(c1.out.h, 28);  // padded: 28x28 stays 28x28
    EXPECT_EQ(cnn.layers[1].kind, LayerKind::MaxPool);
    EXPECT_EQ(cnn.layers[1].out.h, 14);
    EXPECT_EQ(cnn.layers[2].in.size(), 32 * 14 * 14);
    EXPECT_EQ(cnn.layers[2].weight_count, 25088u * 1024u / 4u);
    EXPECT_EQ(cnn.param_count, 32u * 25 + 32 + 6272u * 1024 + 1024 + 1024 * 10 + 10);
    EXPECT_EQ(cnn.loss, Loss::SoftmaxCrossEntropy);
}

TEST(Models, RecipeSetsDefaultsAndFlagsOverride) {
    const Model mlp = load_model("mlp");
    TrainOptions o;
    TrainSettings s = resolve_settings(o, mlp.recipe);
    EXPECT_EQ(s.batch, 1);
    EXPECT_EQ(s.epochs, 1);
    EXPECT_FLOAT_EQ(s.lr, 0.1f);
    EXPECT_FLOAT_EQ(s.momentum, 0.0f);
    EXPECT_FLOAT_EQ(s.weight_decay, 0.0f);
    o.batch = 32;
    o.lr = 0.5f;
    s = resolve_settings(o, mlp.recipe);
    EXPECT_EQ(s.batch, 32);
    EXPECT_FLOAT_EQ(s.lr, 0.5f);
    EXPECT_EQ(s.epochs, 1);  // still the model's
    // A model without a train line gets LeNet-5's defaults.
    const TrainOptions no_flags;
    s = resolve_settings(no_flags, parse_model(kHead + "fc out units=10\n", "m.net").recipe);
    EXPECT_EQ(s.batch, 64);
    EXPECT_EQ(s.epochs, 10);
}

// models/lenet5-fast.net (issue 48): the built-in lenet5's network, layer for layer, with a recipe
// for time to accuracy; only what a recipe may change differs.
TEST(Models, Lenet5FastIsTheClassicNetworkWithItsRecipe) {
    const Model fast = load_model(LENET5_SOURCE_DIR "/models/lenet5-fast.net");
    const Network classic = load_model("lenet5").net;
    const Network& net = fast.net;
    EXPECT_EQ(net.name, "lenet5-fast");
    EXPECT_EQ(net.param_count, classic.param_count);
    EXPECT_EQ(net.param_count, 60850u);  // as test_network.cpp counts lenet5
    EXPECT_EQ(net.loss, classic.loss);
    EXPECT_EQ(net.input.c, classic.input.c);
    EXPECT_EQ(net.input.h, classic.input.h);
    EXPECT_EQ(net.input.w, classic.input.w);
    ASSERT_EQ(net.layers.size(), classic.layers.size());
    for (size_t i = 0; i < net.layers.size(); ++i) {
        const LayerSpec &a = net.layers[i], &b = classic.layers[i];
        SCOPED_TRACE(b.name);
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.kind, b.kind);
        EXPECT_EQ(a.activation, b.activation);
        EXPECT_EQ(a.out.size(), b.out.size());
        EXPECT_EQ(a.out.c, b.out.c);
        EXPECT_EQ(a.out.h, b.out.h);
        EXPECT_EQ(a.kernel, b.kernel);
        EXPECT_EQ(a.stride, b.stride);
        EXPECT_EQ(a.pad, b.pad);
        EXPECT_EQ(a.conn_out, b.conn_out);  // C3's Table I, connection for connection
        EXPECT_EQ(a.conn_in, b.conn_in);
        EXPECT_EQ(a.weight_offset, b.weight_offset);
        EXPECT_EQ(a.weight_count, b.weight_count);
        EXPECT_EQ(a.bias_offset, b.bias_offset);
        EXPECT_EQ(a.bias_count, b.bias_count);
    }
    EXPECT_EQ(net.layers[2].connections(), 60);  // C3
    // The recipe: inputs normalised to mean 0 and deviation 1 ((b / 255 - 0.1307) / 0.3081), and
    // the train line.
    EXPECT_FLOAT_EQ(net.scaling.scale, 3.2457f);
    EXPECT_FLOAT_EQ(net.scaling.shift, -0.4242f);
    const TrainRecipe& r = fast.recipe;
    EXPECT_EQ(r.batch, 256);
    EXPECT_EQ(r.epochs, 4);
    EXPECT_EQ(r.schedule, Schedule::OneCycle);
    EXPECT_FLOAT_EQ(r.lr.value_or(0), 0.25f);
    EXPECT_FLOAT_EQ(r.warmup.value_or(0), 1.2f);
    EXPECT_FALSE(r.lr_decay.has_value());
    EXPECT_FLOAT_EQ(r.momentum.value_or(0), 0.9f);
    EXPECT_TRUE(r.nesterov);
    EXPECT_FLOAT_EQ(r.label_smoothing.value_or(0), 0.1f);
    EXPECT_FLOAT_EQ(r.weight_decay.value_or(0), 5e-4f);
    // What train runs with it, no flags given.
    const TrainSettings s = resolve_settings(TrainOptions{}, r);
    EXPECT_EQ(s.batch, 256);
    EXPECT_EQ(s.epochs, 4);
    EXPECT_EQ(s.schedule, Schedule::OneCycle);
    EXPECT_FLOAT_EQ(s.lr, 0.25f);
    EXPECT_FLOAT_EQ(s.warmup, 1.2f);
    EXPECT_TRUE(s.nesterov);
    EXPECT_FLOAT_EQ(s.label_smoothing, 0.1f);
}

TEST(Models, LayerSetParses) {
    const Model m = parse_model(kHead +
                                    "conv a maps=4 kernel=3 stride=2 pad=1 act=relu  # a comment\n"
                                    "avgpool b window=3 stride=1 act=tanh\n"
                                    "conv c maps=2 kernel=3 act=sigmoid table\n"
                                    "  X.\n  .X\n  XX\n  X.\n"
                                    "maxpool d window=2\n"
                                    "fc out units=10 act=sigmoid\n"
                                    "loss squared\n"
                                    "train batch=8 lr=0.01 lr-decay=0.5 momentum=0.5 weight-decay=0 epochs=3\n",
                                "m.net");
    const Network& n = m.net;
    ASSERT_EQ(n.layers.size(), 5u);
    EXPECT_EQ(n.layers[0].out.h, 14);
    EXPECT_EQ(n.layers[1].out.h, 12);
    EXPECT_EQ(n.layers[2].connections(), 5);
    EXPECT_EQ(n.layers[2].conn_out[0], 0);
    EXPECT_EQ(n.layers[3].out.h, 5);
    EXPECT_EQ(n.loss, Loss::SquaredError);
    EXPECT_EQ(*m.recipe.batch, 8);
    EXPECT_FLOAT_EQ(*m.recipe.lr_decay, 0.5f);
}

TEST(Models, EveryMalformedFileNamesFileLineAndProblem) {
    const std::pair<std::string, std::string> cases[] = {
        {"", "m.net: empty model file"},
        {"input 1x28x28\n", "m.net:1: the first line must be `model NAME`"},
        {"model m\nmodel n\n", "m.net:2: model is given twice"},
        {"model m\nfc a units=10\n", "m.net:2: the input line must come before the layers"},
        {"model m\ninput 1x28\n", "m.net:2: input: '1x28' is not CxHxW"},
        {"model m\ninput 3x28x28\n", "m.net:2: input: 3x28x28 has 3 channels"},
        {"model m\ninput 1x8x8\n", "smaller than the 28x28 images"},
        {"model m\ninput 1x28x28x\n", "is not CxHxW"},
        {"model m\ninput 1x99999999999999999999x28\n", "is not a whole number"},
        {kHead, "m.net: no layers"},
        {kHead + "dense a units=3\n", "m.net:3: unknown line 'dense'"},
        {kHead + "fc units=10\n", "m.net:3: fc needs a layer name first"},
        {kHead + "fc a\n", "m.net:3: fc needs units=N"},
        {kHead + "fc a units=ten\n", "m.net:3: units: 'ten' is not a whole number"},
        {kHead + "fc a units=0\n", "m.net:3: units: 0 is out of range"},
        {kHead + "fc a units=10 units=11\n", "'units' is given twice"},
        {kHead + "fc a units=10 colour=red\n", "m.net:3: unknown setting 'colour' for fc"},
        {kHead + "fc a units=10 act=swish\n", "act: 'swish' is not an activation"},
        {kHead + "fc a units=10 act=\n", "'act=' is not key=value"},
        {kHead + "fc a units=10 act=relu\n", "the softmax loss needs the last layer without activation"},
        {kHead + "conv a maps=2 kernel=29\nfc o units=10\n", "m.net:3: layer a: kernel larger than its (padded) input"},
        {kHead + "conv a maps=2 kernel=3 pad=3\nfc o units=10\n", "0 <= padding < kernel"},
        {kHead + "conv a maps=2 kernel=3 table\n", "m.net:3: the table of a needs 1 rows"},
        {kHead + "conv a maps=2 kernel=3 table\n  X\nfc o units=10\n", "m.net:4: a table row of a needs 2 of X or ."},
        {kHead + "conv a maps=2 kernel=3 table\n  X.\nfc o units=10\n", "leaves output map 1 without inputs"},
        {kHead + "conv a maps=2 kernel=3 table=yes\n", "table takes no value"},
        {kHead + "subsample s window=3\n", "m.net:3: layer s: input not divisible by window"},
        {kHead + "maxpool p window=40\n", "window larger than its input"},
        {kHead + "fc a units=65536\nfc b units=65536\n", "m.net:4: layer b has too many weights"},
        {kHead + "conv a maps=60000 kernel=1\nconv b maps=60000 kernel=1\n", "m.net:4: layer b has too many connections"},
        {kHead + "fc o units=10\nloss hinge\n", "m.net:4: loss: 'hinge' is not softmax or squared"},
        {kHead + "fc o units=10\ntrain batch=0\n", "m.net:4: batch: 0 is out of range"},
        {kHead + "fc o units=10\ntrain lr=-1\n", "lr: -1 is out of range"},
        {kHead + "fc o units=10\ntrain lr=nan\n", "lr: 'nan' is not a number"},
        {kHead + "fc o units=10\ntrain speed=9\n", "unknown setting 'speed' for train"},
        {kHead + "fc o units=10\ntrain epochs=1\ntrain epochs=2\n", "m.net:5: train is given twice"},
    };
    for (const auto& [text, words] : cases) {
        const std::string msg = error_of(text);
        EXPECT_NE(msg.find(words), std::string::npos) << "expected '" << words << "' in: " << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    }
}

TEST(Models, LoadModelRefusesUnknownNamesAndNonFiles) {
    EXPECT_THROW(load_model("resnet"), UsageError);
    try {
        load_model("/nonexistent/x.net");
        ADD_FAILURE() << "a missing file loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/x.net: cannot open the model file"), std::string::npos)
            << e.what();
    }
    try {
        load_model("/dev/null/");  // not a regular file
        ADD_FAILURE() << "a directory loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/dev/null/"), std::string::npos) << e.what();
    }
}

TEST(Models, ChecksThatEveryLabelHasAnOutput) {
    const Network five = parse_model(kHead + "fc o units=5\n", "m.net").net;
    Dataset d = random_dataset(20, 1);
    try {
        check_classes(five, d, "data/mnist");
        ADD_FAILURE() << "5 outputs accepted labels up to 9";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("model m has 5 outputs, but data/mnist has labels up to"), std::string::npos)
            << e.what();
    }
    EXPECT_NO_THROW(check_classes(load_model("mlp").net, d, "data/mnist"));
}

// ---- the command line --------------------------------------------------------

namespace {

using lenet5::test::run_cli;

// A scratch folder of this test process, removed at the end.
struct ScratchDir {
    std::string path = ::testing::TempDir() + "lenet5_models_" + std::to_string(::getpid());
    ScratchDir() { std::filesystem::create_directories(path); }
    ~ScratchDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST(ModelsCli, ListsTheBuiltInModelsWithTheirParameterCounts) {
    const auto r = run_cli("models");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("lenet5: 60850 parameters"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("mlp: 159010 parameters, squared loss; batch 1, lr 0.1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("cnn: 6434634 parameters"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("P1 maxpool 32x14x14"), std::string::npos) << r.out;
}

TEST(ModelsCli, BadModelsAndDataSetsGetOneLineErrors) {
    ScratchDir dir;
    const std::string bad = dir.path + "/bad.net";
    std::ofstream(bad) << "model bad\ninput 1x28x28\nfc out units=ten\n";
    auto r = run_cli("train --variant cpu --model " + bad);
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "lenet5: error: " + bad + ":3: units: 'ten' is not a whole number\n");
    r = run_cli("train --model resnet");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("'resnet' is not a built-in model (lenet5, mlp, cnn, vgg)"), std::string::npos) << r.err;
    r = run_cli("train --dataset cifar");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("'cifar' is not a data set (mnist, fashion)"), std::string::npos) << r.err;
}

// The MLP's recipe applies, its checkpoint carries the model to eval and --resume.
TEST(ModelsCli, MlpTrainsSavesEvaluatesAndResumesWithItsRecipe) {
    const std::string data = lenet5::test::mnist_dir();
    if (data.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    ScratchDir dir;
    const std::string ck = dir.path + "/mlp.ck", json = dir.path + "/run.json";
    const std::string common = " --variant cpu --data " + data + " --train-limit 3000 --test-limit 500";
    auto r = run_cli("train --model mlp" + common + " --save " + ck + " --json " + json);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("lenet5: model mlp, variant cpu"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("batch 1, lr 0.1, momentum 0, weight decay 0"), std::string::npos) << r.out;
    EXPECT_NE(lenet5::test::slurp(json).find("\"model\": \"mlp\""), std::string::npos);
    r = run_cli("eval --model " + ck + " --variant cpu --data " + data + " --test-limit 500");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("(model mlp, epoch 1)"), std::string::npos) << r.out;
    r = run_cli("train --resume " + ck + " --epochs 2" + common);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("lenet5: model mlp"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n    2 "), std::string::npos) << r.out;  // trained epoch 2
    r = run_cli("train --resume " + ck + " --model lenet5 --epochs 2" + common);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("checkpoint is for another network"), std::string::npos) << r.err;
}

TEST(ModelsCli, FashionMnistTrainsFromDebiansPackage) {
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")) {
        if (std::getenv("LENET5_REQUIRE_MNIST")) ADD_FAILURE() << "dataset-fashion-mnist is not installed (setup.sh installs it)";
        GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    }
    const auto r = run_cli("train --dataset fashion --variant cpu --epochs 1 --train-limit 500 --test-limit 200");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("500 training / 200 test images (fashion)"), std::string::npos) << r.out;
}
