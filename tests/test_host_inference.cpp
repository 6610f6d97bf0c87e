// Engine::infer on the host engines (engine/host_inference.h): cpu's equals its own training
// forward bit for bit; avx and omp, whose convolutions take Winograd, a GEMM per tap, rows or
// im2col, match cpu's; and changed parameters (set_params, update, the exchange) are seen.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/rng.h"
#include "engine/engine_factory.h"
#include "engine/host_inference.h"
#include "engine/preprocess.h"
#include "model/model_file.h"
#include "test_support.h"
#ifdef LENET5_HAVE_SIMD
#include "simd_ops.h"
#endif

namespace lenet5 {
namespace {

using Path = HostInference::Path;

// 3x22x22 images through a layer for each path of avx and omp (see vgg_like_paths).
Network vgg_like() {
    return NetworkBuilder("vgg-like", {3, 22, 22})
        .conv("C1", 16, 3, Activation::ReLU, {}, 1, 1)   // 3 input maps: rows
        .conv("C2", 24, 3, Activation::ReLU, {}, 1, 1)   // 3x3 over 16: Winograd, partial edge tiles
        .pool("P1", LayerKind::MaxPool, 2)               // 24x11x11
        .conv("C3", 20, 5, Activation::Tanh, {}, 1, 2)   // 5x5 over 24: a GEMM per tap
        .conv("C4", 18, 3, Activation::ReLU)             // Winograd without padding: 18x9x9
        .conv("C5", 32, 3, Activation::ReLU, {}, 2, 1)   // stride 2: im2col, 32x5x5
        .pool("P2", LayerKind::AvgPool, 2, 1)            // overlapping windows: 32x4x4
        .fully_connected("F1", 40, Activation::ReLU)
        .fully_connected("F2", 30, Activation::Tanh)
        .fully_connected("output", 10, Activation::None)
        .build();
}

Network model_named(const std::string& name) { return name == "vgg-like" ? vgg_like() : load_model(name).net; }

// init_params with every value (biases too) moved by a little noise, so no bias is zero.
std::vector<float> noisy_params(const Network& net, uint64_t seed) {
    std::vector<float> p = init_params(net, seed);
    Rng rng(seed + 1);
    for (auto& v : p) v += rng.uniform(-0.05f, 0.05f);
    return p;
}

std::vector<float> random_inputs(const Network& net, int count, uint64_t seed) {
    std::vector<float> x(static_cast<size_t>(count) * static_cast<size_t>(net.input.size()));
    Rng rng(seed);
    for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
    return x;
}

std::vector<float> infer(Engine& e, const Network& net, const std::vector<float>& inputs, int count) {
    std::vector<float> out(static_cast<size_t>(count) * static_cast<size_t>(net.layers.back().out.size()));
    e.infer(inputs.data(), count, out.data(), nullptr);
    return out;
}

// Sample s's outputs.
std::vector<float> sample(const std::vector<float>& outputs, const Network& net, int s) {
    const size_t O = static_cast<size_t>(net.layers.back().out.size());
    return {outputs.begin() + static_cast<std::ptrdiff_t>(s * O), outputs.begin() + static_cast<std::ptrdiff_t>((s + 1) * O)};
}

std::unique_ptr<Engine> host_engine(const Network& net, const std::string& variant) {
    EngineRequest r;
    r.variant = variant;
    r.threads = 3;  // omp: more threads than the small batches have samples, and an odd split
    return make_engine(net, r);
}

// Skips unless this build and CPU run `variant`.
bool runs(const std::string& variant) {
    if (variant == "cpu") return true;
    const auto built = built_variants();
    if (std::find(built.begin(), built.end(), variant) == built.end()) return false;
#ifdef LENET5_HAVE_SIMD
    return simd_ops() != nullptr;
#else
    return false;
#endif
}

TEST(HostInference, VggLikeNetworkTakesEveryPath) {
    const Network net = vgg_like();
    const HostInference fast(net, cpu_ops(), true, 2, 1);
    const std::vector<Path> want{Path::Rows,   Path::Winograd, Path::Pool,  Path::Shifted, Path::Winograd,
                                 Path::Im2col, Path::Pool,     Path::Dense, Path::Dense,   Path::Dense};
    ASSERT_EQ(net.layers.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(fast.path(k), want[k]) << net.layers[k].name;
    const HostInference reference(net, cpu_ops(), false, 1, 1);
    for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(reference.path(k), Path::PerSample) << net.layers[k].name;
}

TEST(HostInference, PartialTablesAndSubsamplingRunPerSample) {
    const Network net = lenet5_network();  // C1 S2 C3 S4 C5 F6 output
    const HostInference fast(net, cpu_ops(), true, 2, 1);
    const std::vector<Path> want{Path::Rows,    Path::PerSample, Path::PerSample, Path::PerSample,
                                 Path::Shifted, Path::Dense,     Path::Dense};
    ASSERT_EQ(net.layers.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(fast.path(k), want[k]) << net.layers[k].name;
}

// cpu's infer runs the training forward's operations: the same logits bit for bit.
TEST(HostInference, CpuEqualsItsTrainingForward) {
    for (const std::string name : {"lenet5", "mlp", "cnn", "vgg"}) {
        const Network net = load_model(name).net;
        auto e = test::cpu_engine(net);
        e->set_params(noisy_params(net, 3));
        const int n = 5;
        const Dataset data = random_dataset(n, 9);
        e->upload(Split::Test, data);
        e->forward(Split::Test, 0, n);
        const std::vector<float> trained = e->layer_output(net.layers.size() - 1);
        std::vector<float> inputs(static_cast<size_t>(n) * static_cast<size_t>(net.input.size()));
        for (int s = 0; s < n; ++s)
            image_to_input(data.image(s), data.rows, data.cols, net.input, net.scaling,
                           inputs.data() + static_cast<size_t>(s) * static_cast<size_t>(net.input.size()));
        EXPECT_EQ(infer(*e, net, inputs, n), trained) << name;
    }
}

TEST(HostInference, LayerTimesAreAddedPerLayer) {
    const Network net = vgg_like();
    for (const std::string variant : {"cpu", "avx", "omp"}) {
        if (!runs(variant)) continue;
        auto e = host_engine(net, variant);
        e->set_params(noisy_params(net, 1));
        const auto x = random_inputs(net, 2, 4);
        std::vector<float> out(2 * 10);
        std::vector<double> ms(net.layers.size(), 0.0);
        e->infer(x.data(), 2, out.data(), &ms);
        const std::vector<double> first = ms;
        e->infer(x.data(), 2, out.data(), &ms);
        for (size_t k = 0; k < ms.size(); ++k) {
            EXPECT_GT(first[k], 0.0) << variant << " " << net.layers[k].name;
            EXPECT_GT(ms[k], first[k]) << variant << " " << net.layers[k].name << ": added, not overwritten";
        }
        std::vector<double> wrong(net.layers.size() + 1, 0.0);
        EXPECT_THROW(e->infer(x.data(), 2, out.data(), &wrong), Error) << variant;
    }
}

class FastVariants : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// avx and omp against cpu, per sample within 1e-5 (relative L2), at batches 1, 5 and 2: planned
// for one sample, planned again for five, then fewer samples than planned.
TEST_P(FastVariants, MatchCpu) {
    const auto& [model, variant] = GetParam();
    if (!runs(variant)) GTEST_SKIP() << variant << " is not built or this CPU cannot run it";
    const Network net = model_named(model);
    const std::vector<float> params = noisy_params(net, 11);
    auto ref = test::cpu_engine(net);
    auto fast = host_engine(net, variant);
    ref->set_params(params);
    fast->set_params(params);
    for (const int count : {1, 5, 2}) {
        const auto x = random_inputs(net, count, 20 + static_cast<uint64_t>(count));
        const auto want = infer(*ref, net, x, count), got = infer(*fast, net, x, count);
        for (int s = 0; s < count; ++s)
            EXPECT_LT(relative_error(sample(got, net, s), sample(want, net, s)), 1e-5)
                << model << " " << variant << ": sample " << s << " of " << count;
    }
}

INSTANTIATE_TEST_SUITE_P(Models, FastVariants,
                         ::testing::Combine(::testing::Values("lenet5", "mlp", "cnn", "vgg", "vgg-like"),
                                            ::testing::Values("avx", "omp")),
                         [](const auto& param_info) {
                             std::string name = std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param);
                             for (auto& c : name)
                                 if (c == '-') c = '_';
                             return name;
                         });

class Mutation : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (!runs(GetParam())) GTEST_SKIP() << GetParam() << " is not built or this CPU cannot run it";
        engine_ = host_engine(net_, GetParam());
        engine_->set_params(noisy_params(net_, 5));
        before_ = infer(*engine_, net_, x_, 3);  // loads the filters the fast paths keep
    }
    // The engine's next infer equals a fresh engine's on its current parameters, and differs
    // from the one before the change.
    void expect_sees_new_params() {
        auto fresh = host_engine(net_, GetParam());
        fresh->set_params(engine_->params());
        const auto got = infer(*engine_, net_, x_, 3);
        EXPECT_EQ(got, infer(*fresh, net_, x_, 3));
        EXPECT_GT(relative_error(got, before_), 1e-3) << "the change moved no output";
    }
    const Network net_ = vgg_like();
    const std::vector<float> x_ = random_inputs(net_, 3, 8);
    std::unique_ptr<Engine> engine_;
    std::vector<float> before_;
};

TEST_P(Mutation, SetParamsIsSeen) {
    engine_->set_params(noisy_params(net_, 6));
    expect_sees_new_params();
}

TEST_P(Mutation, UpdateIsSeen) {
    Rng rng(2);
    std::vector<float> g(net_.param_count);
    for (auto& v : g) v = rng.uniform(-1.0f, 1.0f);
    engine_->set_gradients(g);
    engine_->update(0.05f, 0.9f, 0.0f);
    expect_sees_new_params();
}

// The gradient exchange writes the parameters in place (local SGD), then says so with stored().
TEST_P(Mutation, ParametersStoredByTheExchangeAreSeen) {
    ExchangePort* port = engine_->exchange_port();
    ASSERT_NE(port, nullptr);
    float* p = port->flat(FlatBuffer::Params);
    for (size_t i = 0; i < net_.param_count; ++i) p[i] *= -0.5f;
    port->stored(FlatBuffer::Params);
    expect_sees_new_params();
}

INSTANTIATE_TEST_SUITE_P(Variants, Mutation, ::testing::Values("cpu", "avx", "omp"));

// An engine made for inference holds no gradients or momentum (VGG16's would be 553 MB each, and one
// more per thread) and refuses every training call with one line naming it.
TEST(HostInference, AnInferenceEngineRefusesTraining) {
    const Network net = lenet5_network();
    for (const std::string variant : {"cpu", "omp"}) {
        if (!runs(variant)) continue;
        EngineRequest r;
        r.variant = variant;
        r.inference = true;
        test::expect_refuses_training(*make_engine(net, r), init_params(net, 1));
    }
}

}  // namespace
}  // namespace lenet5
