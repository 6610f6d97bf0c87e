// dropout, the kind docs/adding-a-layer.md adds (host/model/layers/dropout.cpp, cl_kernels/layers/dropout.cl):
// its model-file line, its reference (the share dropped, the scale, inference as identity, the backward
// from the same draws, finite differences), every variant against `cpu` on a network with two of them
// (the same draws everywhere), and ONNX's Dropout both ways.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"
#include "engine/engine_factory.h"
#include "model/layers/layer_type.h"
#include "model/model_file.h"
#include "test_support.h"

#ifdef LENET5_HAVE_ONNX
#include <onnx/onnx_pb.h>

#include "io/onnx_export.h"
#include "io/onnx_import.h"
#include "io/onnx_reader.h"
#endif

namespace lenet5::test {
namespace {

const std::string kNet =
    "model drop\ninput 1x28x28\n"
    "conv C1 maps=4 kernel=5 stride=2 act=relu\n"
    "dropout D0 rate=0.2\n"
    "maxpool P1 window=2\n"
    "fc F1 units=32 act=tanh\n"
    "dropout D1\n"
    "fc output units=10\n";

std::string parse_error(const std::string& text) {
    try {
        parse_model(text, "m.net");
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(Dropout, ModelFileLineKeepsTheShapeAndRoundTrips) {
    const Network net = parse_model(kNet, "m.net").net;
    const LayerSpec& d0 = net.layers[1];
    const LayerSpec& d1 = net.layers[4];
    EXPECT_EQ(d0.kind, LayerKind::Dropout);
    EXPECT_EQ(d0.attr, std::vector<float>{0.2f});
    EXPECT_EQ(d1.attr, std::vector<float>{0.5f});  // the default rate
    EXPECT_EQ(d0.out.size(), d0.in.size());
    EXPECT_EQ(d0.weight_count + d0.bias_count, 0u);
    EXPECT_EQ(parse_model(model_file_text(net), "again").net.describe(), net.describe());
    // The rate is part of the network (checkpoints of another rate do not load).
    std::string other = kNet;
    other.replace(other.find("rate=0.2"), 8, "rate=0.3");
    EXPECT_NE(parse_model(other, "m.net").net.hash(), net.hash());
}

TEST(Dropout, BadLinesNameWhatIsWrong) {
    const std::string head = "model m\ninput 1x28x28\nfc F1 units=8\n";
    EXPECT_NE(parse_error(head + "dropout D ratio=0.5\n").find("m.net:4: unknown setting 'ratio' for dropout"),
              std::string::npos);
    EXPECT_NE(parse_error(head + "dropout D rate=1\n").find("rate: 1 is out of range"), std::string::npos);
    EXPECT_NE(parse_error(head + "dropout D rate=x\n").find("rate: 'x' is not a number"), std::string::npos);
    EXPECT_NE(parse_error(head + "dropout rate=0.5\n").find("dropout needs a layer name first"), std::string::npos);
}

LayerSpec dropout_of(int n, float rate) {
    NetworkBuilder b("d", {n, 1, 1});
    add_by_settings(b, layer_type(LayerKind::Dropout), "D", Activation::None, {rate});
    return b.so_far().layers[0];
}

TEST(Dropout, TrainingDropsTheRateAndScalesTheRestInferencePassesThrough) {
    const int n = 20000;
    const float rate = 0.3f;
    const LayerSpec l = dropout_of(n, rate);
    std::vector<float> in(n), out(n), again(n), other(n);
    for (int i = 0; i < n; ++i) in[static_cast<size_t>(i)] = 1.0f + static_cast<float>(i % 7);
    const Draw draw{layer_draw_seed(1, 1), 3, 17, true};
    reference_forward(l, nullptr, in.data(), out.data(), draw);
    int dropped = 0;
    for (int i = 0; i < n; ++i) {
        const float y = out[static_cast<size_t>(i)];
        if (y == 0.0f) ++dropped;
        else EXPECT_FLOAT_EQ(y, in[static_cast<size_t>(i)] / (1.0f - rate)) << i;
    }
    EXPECT_NEAR(static_cast<double>(dropped) / n, rate, 0.015);
    reference_forward(l, nullptr, in.data(), again.data(), draw);
    EXPECT_EQ(out, again);  // the same draw, the same mask
    Draw next = draw;
    ++next.step;
    reference_forward(l, nullptr, in.data(), other.data(), next);
    EXPECT_NE(out, other);  // another step, another mask
    Draw sample = draw;
    ++sample.sample;
    reference_forward(l, nullptr, in.data(), other.data(), sample);
    EXPECT_NE(out, other);  // another sample too
    Draw inference = draw;
    inference.training = false;
    reference_forward(l, nullptr, in.data(), other.data(), inference);
    EXPECT_EQ(other, in);
}

// The backward is the forward's own factor: d(out)/d(in) by finite differences, unit by unit.
TEST(Dropout, BackwardMatchesFiniteDifferences) {
    const int n = 64;
    const LayerSpec l = dropout_of(n, 0.5f);
    const Draw draw{layer_draw_seed(5, 0), 1, 2, true};
    std::vector<float> in(n), out(n), dout(n), din(n), plus(n), minus(n);
    Rng rng(9);
    for (auto& v : in) v = rng.uniform(-1.0f, 1.0f);
    for (auto& v : dout) v = rng.uniform(-1.0f, 1.0f);
    reference_forward(l, nullptr, in.data(), out.data(), draw);
    std::vector<float> d = dout;
    reference_backward(l, nullptr, in.data(), out.data(), d.data(), din.data(), nullptr, draw);
    const float h = 1e-2f;
    for (int i = 0; i < n; ++i) {
        std::vector<float> x = in;
        x[static_cast<size_t>(i)] += h;
        reference_forward(l, nullptr, x.data(), plus.data(), draw);
        x[static_cast<size_t>(i)] -= 2 * h;
        reference_forward(l, nullptr, x.data(), minus.data(), draw);
        double numeric = 0;
        for (int o = 0; o < n; ++o)
            numeric += dout[static_cast<size_t>(o)] * (plus[static_cast<size_t>(o)] - minus[static_cast<size_t>(o)]) / (2 * h);
        EXPECT_NEAR(din[static_cast<size_t>(i)], numeric, 1e-3) << i;
    }
}

// Every variant draws what `cpu` draws: outputs, gradients and updates over two steps by the rule
// of the other variants' checks.
TEST(Dropout, EveryVariantMatchesCpu) {
    const Network net = parse_model(kNet, "m.net").net;
    for (const std::string& variant : built_variants()) {
        if (variant == "cpu") continue;
        SCOPED_TRACE(variant);
        EngineRequest request;
        request.variant = variant;
        request.threads = 2;
        const auto engine = make_engine(net, request);
        expect_matches_cpu(*engine, net, 16);
    }
}

#ifdef LENET5_HAVE_ONNX
TEST(Dropout, OnnxDropoutBothWays) {
    const Network net = parse_model(kNet, "m.net").net;
    const onnx::ModelProto model = onnx_model(net, init_params(net, 3));
    int nodes = 0;
    for (const auto& node : model.graph().node())
        if (node.op_type() == "Dropout") {
            ++nodes;
            ASSERT_EQ(node.input_size(), 2);  // the data, then the ratio as a scalar initializer
            for (const auto& init : model.graph().initializer()) {
                if (init.name() == node.input(1)) {
                    EXPECT_FLOAT_EQ(init.float_data(0), nodes == 1 ? 0.2f : 0.5f);
                }
            }
        }
    EXPECT_EQ(nodes, 2);
    // Without the model file `export` stores, the graph alone: the rates come from the ratio inputs.
    onnx::ModelProto bare = model;
    bare.clear_metadata_props();
    const Model back = import_onnx(parse_onnx(bare.SerializeAsString(), "bare.onnx", "."), "bare.onnx");
    ASSERT_EQ(back.net.layers.size(), net.layers.size());
    EXPECT_EQ(back.net.layers[1].kind, LayerKind::Dropout);
    EXPECT_EQ(back.net.layers[1].attr, std::vector<float>{0.2f});
    EXPECT_EQ(back.net.layers[4].attr, std::vector<float>{0.5f});
}
#endif

}  // namespace
}  // namespace lenet5::test
