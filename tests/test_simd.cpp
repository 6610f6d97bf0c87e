// The avx and omp variants against the cpu reference, at every SIMD level this
// machine can run (AVX-512 and AVX2, so both compiled paths are covered), over
// batch sizes that leave remainders after the vector width and the thread split.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "engine/engine_factory.h"
#include "common/aligned.h"
#include "common/error.h"
#include "engine/lane_groups.h"
#include "engine/preprocess.h"
#include "model/model_file.h"
#include "test_support.h"
#include "train/trainer.h"

#ifdef LENET5_HAVE_SIMD
#include "simd_ops.h"

using namespace lenet5;

namespace lenet5 {
// Names the level in test output (gtest prints the raw bytes of an enum otherwise).
void PrintTo(SimdLevel level, std::ostream* os) { *os << (level == SimdLevel::Avx512 ? "avx512" : "avx2"); }
}  // namespace lenet5

namespace {

class SimdLevels : public ::testing::TestWithParam<SimdLevel> {
protected:
    void SetUp() override {
        ops_ = simd_ops(GetParam());
        if (!ops_) GTEST_SKIP() << "this CPU cannot run the " << level_name(GetParam()) << " path";
    }
    static const char* level_name(SimdLevel l) { return l == SimdLevel::Avx512 ? "avx512" : "avx2"; }
    const HostOps& ops() const { return *ops_; }

private:
    const HostOps* ops_ = nullptr;
};

std::vector<float> random_vector(size_t n, Rng& rng, float scale = 1.0f) {
    std::vector<float> v(n);
    for (auto& x : v) x = rng.uniform(-scale, scale);
    return v;
}

// A batched layer over 7 samples (remainders after the register blocks) against
// cpu_ops() one sample at a time: outputs, input gradients and summed parameter gradients.
void expect_batch_matches_cpu(const LayerSpec& l, const std::vector<float>& p, const HostOps& ops, Rng& rng) {
    const int count = 7;
    const size_t in_n = static_cast<size_t>(l.in.size()), out_n = static_cast<size_t>(l.out.size());
    const std::vector<float> in = random_vector(count * in_n, rng), d = random_vector(count * out_n, rng);
    std::vector<float> out_ref(count * out_n), out(count * out_n), din_ref(count * in_n), din(count * in_n);
    std::vector<float> g_ref(p.size(), 0.5f), g(p.size(), 0.5f), d_got = d;
    for (size_t s = 0; s < count; ++s) {
        std::vector<float> ds(d.begin() + static_cast<std::ptrdiff_t>(s * out_n),
                              d.begin() + static_cast<std::ptrdiff_t>((s + 1) * out_n));
        cpu_ops().forward(l, p.data(), in.data() + s * in_n, out_ref.data() + s * out_n);
        cpu_ops().backward(l, p.data(), in.data() + s * in_n, out_ref.data() + s * out_n, ds.data(),
                           din_ref.data() + s * in_n, g_ref.data());
    }
    ops.forward_batch(l, p.data(), in.data(), out.data(), count);
    ops.backward_batch(l, p.data(), in.data(), out_ref.data(), d_got.data(), din.data(), g.data(), count);
    EXPECT_LT(test::relative_error(out, out_ref), 1e-5) << l.name << " forward_batch";
    EXPECT_LT(test::relative_error(din, din_ref), 1e-5) << l.name << " backward_batch din";
    EXPECT_LT(test::relative_error(g, g_ref), 1e-5) << l.name << " backward_batch gradients";
}

// A layer `ops` takes in lane groups (HostOps::forward_lanes), over a full group and one with
// three lanes empty, against cpu_ops() one sample at a time: outputs, input gradients (and
// none), summed parameter gradients; nothing written past the group's tensors.
void expect_lanes_match_cpu(const LayerSpec& l, const std::vector<float>& p, const HostOps& ops, Rng& rng) {
    const LaneGroups groups{ops.lanes};
    const size_t in_n = static_cast<size_t>(l.in.size()), out_n = static_cast<size_t>(l.out.size());
    const size_t L = static_cast<size_t>(ops.lanes), pad = 64;
    const float guard = 12345.0f;
    for (const int count : {ops.lanes, ops.lanes - 3}) {
        SCOPED_TRACE(l.name + ", " + std::to_string(count) + " lanes filled");
        const size_t n = static_cast<size_t>(count);
        const std::vector<float> in = random_vector(n * in_n, rng), d = random_vector(n * out_n, rng);
        std::vector<float> out_ref(n * out_n), din_ref(n * in_n), g_ref(p.size(), 0.5f);
        for (size_t s = 0; s < n; ++s) {
            std::vector<float> ds(d.begin() + static_cast<std::ptrdiff_t>(s * out_n),
                                  d.begin() + static_cast<std::ptrdiff_t>((s + 1) * out_n));
            cpu_ops().forward(l, p.data(), in.data() + s * in_n, out_ref.data() + s * out_n);
            cpu_ops().backward(l, p.data(), in.data() + s * in_n, out_ref.data() + s * out_n, ds.data(),
                               din_ref.data() + s * in_n, g_ref.data());
        }
        std::vector<float> gin(L * in_n), gout(L * out_n + pad, guard), gd(L * out_n), gdin(L * in_n + pad, guard);
        groups.to_lanes(in.data(), count, in_n, gin.data());
        groups.to_lanes(d.data(), count, out_n, gd.data());
        ops.forward_lanes(l, p.data(), gin.data(), gout.data());
        for (bool with_din : {true, false}) {
            std::vector<float> gd_got = gd, g(p.size(), 0.5f);
            ops.backward_lanes(l, p.data(), gin.data(), gout.data(), gd_got.data(), with_din ? gdin.data() : nullptr,
                               g.data(), nullptr, false);
            EXPECT_LT(test::relative_error(g, g_ref), 1e-5) << "gradients, din " << with_din;
        }
        std::vector<float> out(n * out_n), din(n * in_n);
        groups.from_lanes(gout.data(), count, out_n, out.data());
        groups.from_lanes(gdin.data(), count, in_n, din.data());
        EXPECT_LT(test::relative_error(out, out_ref), 1e-5) << "forward";
        EXPECT_LT(test::relative_error(din, din_ref), 1e-5) << "din";
        for (size_t k = 0; k < pad; ++k) {
            EXPECT_EQ(gout[L * out_n + k], guard) << "forward wrote past the group";
            EXPECT_EQ(gdin[L * in_n + k], guard) << "backward wrote past the group";
        }
    }
}

// Two layers in lane groups, backward as HostEngine runs them: the upper one with `below`
// (HostOps::backward_lanes may take on below's activation and bias gradients), then below
// with what it returned as `folded`; against cpu_ops() through both, one sample at a time:
// below's input gradient and every parameter gradient. Returns whether the upper one folded.
bool expect_pair_matches_cpu(const LayerSpec& below, const LayerSpec& l, const std::vector<float>& p,
                             const HostOps& ops, Rng& rng) {
    SCOPED_TRACE(below.name + " under " + l.name);
    const LaneGroups groups{ops.lanes};
    const size_t x_n = static_cast<size_t>(below.in.size()), h_n = static_cast<size_t>(below.out.size());
    const size_t y_n = static_cast<size_t>(l.out.size()), n = static_cast<size_t>(ops.lanes);
    const std::vector<float> x = random_vector(n * x_n, rng), d = random_vector(n * y_n, rng);
    std::vector<float> h(n * h_n), y(n * y_n), dx_ref(n * x_n), g_ref(p.size(), 0.5f);
    for (size_t s = 0; s < n; ++s) {
        std::vector<float> ds(d.begin() + static_cast<std::ptrdiff_t>(s * y_n),
                              d.begin() + static_cast<std::ptrdiff_t>((s + 1) * y_n)),
            dh(h_n);
        cpu_ops().forward(below, p.data(), x.data() + s * x_n, h.data() + s * h_n);
        cpu_ops().forward(l, p.data(), h.data() + s * h_n, y.data() + s * y_n);
        cpu_ops().backward(l, p.data(), h.data() + s * h_n, y.data() + s * y_n, ds.data(), dh.data(), g_ref.data());
        cpu_ops().backward(below, p.data(), x.data() + s * x_n, h.data() + s * h_n, dh.data(),
                           dx_ref.data() + s * x_n, g_ref.data());
    }
    std::vector<float> gx(n * x_n), gh(n * h_n), gy(n * y_n), gd(n * y_n), gdh(n * h_n), gdx(n * x_n);
    std::vector<float> g(p.size(), 0.5f), dx(n * x_n);
    groups.to_lanes(x.data(), ops.lanes, x_n, gx.data());
    groups.to_lanes(d.data(), ops.lanes, y_n, gd.data());
    ops.forward_lanes(below, p.data(), gx.data(), gh.data());
    ops.forward_lanes(l, p.data(), gh.data(), gy.data());
    const bool folded = ops.backward_lanes(l, p.data(), gh.data(), gy.data(), gd.data(), gdh.data(), g.data(), &below, false);
    EXPECT_FALSE(ops.backward_lanes(below, p.data(), gx.data(), gh.data(), gdh.data(), gdx.data(), g.data(), nullptr, folded));
    groups.from_lanes(gdx.data(), ops.lanes, x_n, dx.data());
    EXPECT_LT(test::relative_error(g, g_ref), 1e-5) << "gradients, folded " << folded;
    EXPECT_LT(test::relative_error(dx, dx_ref), 1e-5) << "din below, folded " << folded;
    return folded;
}

// Every layer of `net` on its own through `ops` against cpu_ops(): output, input
// gradient (with and without one) and parameter gradients, from random inputs; and
// the layers `ops` batches, over a batch, and those it takes in lane groups, over a group,
// also two at a time (expect_pair_matches_cpu); returns how many such pairs folded.
int expect_layers_match_cpu(const Network& net, const HostOps& ops) {
    Rng rng(11);
    std::vector<float> p = init_params(net, 3);
    for (const auto& l : net.layers)
        for (size_t i = 0; i < l.bias_count; ++i) p[l.bias_offset + i] = rng.uniform(-0.5f, 0.5f);
    for (const auto& l : net.layers) {
        const size_t in_n = static_cast<size_t>(l.in.size()), out_n = static_cast<size_t>(l.out.size());
        const std::vector<float> in = random_vector(in_n, rng), d = random_vector(out_n, rng);
        std::vector<float> out_ref(out_n), out(out_n);
        cpu_ops().forward(l, p.data(), in.data(), out_ref.data());
        ops.forward(l, p.data(), in.data(), out.data());
        EXPECT_LT(test::relative_error(out, out_ref), 1e-5) << net.name << " " << l.name << " forward";
        for (bool with_din : {true, false}) {
            std::vector<float> d_ref = d, d_got = d, din_ref(in_n), din(in_n);
            std::vector<float> g_ref(p.size(), 0.5f), g(p.size(), 0.5f);  // backward adds to gradients
            cpu_ops().backward(l, p.data(), in.data(), out_ref.data(), d_ref.data(),
                               with_din ? din_ref.data() : nullptr, g_ref.data());
            ops.backward(l, p.data(), in.data(), out_ref.data(), d_got.data(), with_din ? din.data() : nullptr,
                         g.data());
            if (with_din) {
                EXPECT_LT(test::relative_error(din, din_ref), 1e-5) << net.name << " " << l.name << " din";
            }
            EXPECT_LT(test::relative_error(g, g_ref), 1e-5) << net.name << " " << l.name << " gradients";
        }
        if (ops.batched && ops.batched(l)) expect_batch_matches_cpu(l, p, ops, rng);
        if (ops.lanes_supported && ops.lanes_supported(l)) expect_lanes_match_cpu(l, p, ops, rng);
    }
    int folds = 0;
    for (size_t k = 1; ops.lanes_supported && k < net.layers.size(); ++k)
        if (ops.lanes_supported(net.layers[k - 1]) && ops.lanes_supported(net.layers[k]))
            folds += expect_pair_matches_cpu(net.layers[k - 1], net.layers[k], p, ops, rng);
    return folds;
}

}  // namespace

// The host engine's activations and scratch (AlignedVector) start on a cache line, so that no
// lane vector of theirs straddles two; also after growing.
TEST(AlignedVector, StartsOnACacheLine) {
    AlignedVector<float> v;
    for (const size_t n : {1, 7, 1000, 300000}) {
        v.resize(n);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % kCacheLine, 0u) << n << " floats";
        const AlignedVector<float> copy = v;
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(copy.data()) % kCacheLine, 0u) << "a copy of " << n;
    }
}

TEST_P(SimdLevels, AvxMatchesCpu) {
    const Network net = lenet5_network();
    for (int batch : {1, 7, 17, 64}) {
        HostEngine avx(net, "avx", ops(), 1);
        test::expect_matches_cpu(avx, batch);
    }
}

TEST_P(SimdLevels, OmpMatchesCpuForOneTwoAndThreeThreads) {
    const Network net = lenet5_network();
    for (int threads : {1, 2, 3})
        // 12 on 2 threads and 17 on 3: parts that are not whole groups (each part's last group once
        // reached into the next part's samples).
        for (int batch : {1, 7, 12, 17, 64}) {
            SCOPED_TRACE(std::to_string(threads) + " threads");
            HostEngine omp(net, "omp", ops(), threads);
            test::expect_matches_cpu(omp, batch);
        }
}

TEST_P(SimdLevels, OmpIsBitIdenticalForTheSameThreadCount) {
    const Dataset data = random_dataset(150, 4);
    for (const Network& net : {lenet5_network(), load_model("mlp").net})
        for (int threads : {2, 3})
            for (int batch : {1, 64}) {
                auto run = [&] {
                    HostEngine omp(net, "omp", ops(), threads);
                    return test::record_step(omp, net, data, batch, 1);
                };
                const test::StepRecord a = run(), b = run();
                // bit for bit
                EXPECT_EQ(a.gradients, b.gradients) << net.name << ", " << threads << " threads, batch " << batch;
                EXPECT_EQ(a.params_after, b.params_after) << net.name << ", " << threads << " threads, batch " << batch;
            }
}

// More threads than lane groups: a whole group a part, on as many threads as there are groups,
// not every thread a few samples one at a time. So 12 threads train batch 64 bit for bit as 8 do.
TEST_P(SimdLevels, OmpRunsAWholeLaneGroupAThreadWhenThreadsOutnumberGroups) {
    const int lanes = ops().lanes;
    if (lanes == 0) GTEST_SKIP() << "no lane groups at this level";
    const Network net = lenet5_network();
    const Dataset data = random_dataset(150, 4);
    const int batch = 8 * lanes;
    auto run = [&](int threads) {
        HostEngine omp(net, "omp", ops(), threads);
        return test::record_step(omp, net, data, batch, 1);
    };
    const test::StepRecord eight = run(8), twelve = run(12);
    EXPECT_EQ(eight.gradients, twelve.gradients);  // bit for bit
    EXPECT_EQ(eight.params_after, twelve.params_after);
    HostEngine omp(net, "omp", ops(), 12);
    test::expect_matches_cpu(omp, batch);
}

// The built-in models beside LeNet-5: the seeds' MLP (sigmoid, squared error, fully
// connected only) and CNN (padded conv, ReLU, max pooling, a 6272x1024 layer), through
// the engine at batches that leave remainders after the thread split.
TEST_P(SimdLevels, BuiltInModelsMatchCpuOnAvxAndOmp) {
    for (const char* name : {"mlp", "cnn"}) {
        const Network net = load_model(name).net;
        for (int batch : {3, 8}) {
            HostEngine avx(net, "avx", ops(), 1);
            test::expect_matches_cpu(avx, net, batch);
            HostEngine omp(net, "omp", ops(), batch == 3 ? 2 : 3);
            test::expect_matches_cpu(omp, net, batch);
        }
    }
}

// Layer shapes LeNet-5 lacks: 3x3 kernels, odd widths, a sparse table, no
// activation, a fully connected first layer (no input gradient), the MLP of the seeds.
TEST_P(SimdLevels, EveryLayerOfOtherNetworksMatchesCpu) {
    // S2 and S4 take on the activation and bias gradients of C1 and C3, C3 those of S2.
    EXPECT_EQ(expect_layers_match_cpu(lenet5_network(), ops()), 3);
    expect_layers_match_cpu(NetworkBuilder("mixed", {3, 14, 22})
                                .conv("A", 5, 3, Activation::Tanh)
                                .subsample("B", 2, Activation::None)
                                .conv("C", 4, 3, Activation::Tanh,
                                      {{1, 0, 1, 0, 1}, {0, 1, 1, 0, 0}, {1, 1, 1, 1, 1}, {0, 0, 0, 1, 0}})
                                .conv("D", 9, 3, Activation::Tanh)
                                .fully_connected("E", 33, Activation::None)
                                .fully_connected("F", 10, Activation::None)
                                .build(),
                            ops());
    expect_layers_match_cpu(NetworkBuilder("mlp", {1, 28, 28})
                                .fully_connected("hidden", 200, Activation::Tanh)
                                .fully_connected("output", 10, Activation::None)
                                .build(),
                            ops());
}

// The layer set of issue 11: padding, strides, pooling and the activations, at shapes
// with remainders after the vector width (odd map widths), and shapes the vector code
// leaves to the reference (a stride of 2, a 3x3 pooling window, a window that does not
// tile its input), so that every dispatch is covered; then the built-in models.
TEST_P(SimdLevels, EveryLayerKindAndActivationMatchesCpu) {
    for (Activation act : {Activation::Tanh, Activation::Sigmoid, Activation::ReLU, Activation::None}) {
        SCOPED_TRACE(activation_name(act));
        expect_layers_match_cpu(NetworkBuilder("layer set", {2, 18, 22})
                                    .conv("pad1", 4, 3, act, {}, 1, 1)
                                    .pool("max", LayerKind::MaxPool, 2, 0, act)
                                    .conv("pad2", 5, 5, act, {}, 1, 2)
                                    .pool("avg", LayerKind::AvgPool, 2, 0, act)
                                    .conv("stride2", 3, 3, act, {}, 2, 1)
                                    .fully_connected("fc", 21, act)
                                    .fully_connected("out", 10, Activation::None)
                                    .build(),
                                ops());
        // Windows under a convolution by Winograd, which folds their activation's gradient.
        for (LayerKind window : {LayerKind::MaxPool, LayerKind::AvgPool})
            EXPECT_EQ(expect_layers_match_cpu(NetworkBuilder("pool, winograd", {3, 24, 24})
                                                  .pool("pool", window, 2, 0, act)
                                                  .conv("wino", 4, 5, act)
                                                  .fully_connected("out", 10, Activation::None)
                                                  .build(),
                                              ops()),
                      1);
        expect_layers_match_cpu(NetworkBuilder("fallbacks", {3, 15, 13})
                                    .pool("max3", LayerKind::MaxPool, 3, 1, act)
                                    .pool("odd", LayerKind::MaxPool, 2, 0, act)
                                    .pool("avg3", LayerKind::AvgPool, 3, 2, act)
                                    .fully_connected("out", 10, Activation::None)
                                    .build(),
                                ops());
    }
    expect_layers_match_cpu(load_model("mlp").net, ops());
    expect_layers_match_cpu(load_model("cnn").net, ops());
}

// 5x5 convolutions the lane code takes by Winograd (several connections per output map) with
// 36 input rows: their input gradient's columns span three register blocks (the first leaves out
// the column's leading zero rows, the last its trailing ones, the middle neither), where LeNet-5's
// C3 fits one. An output 9 wide takes F(4,5) (too narrow for two F(5,5) tiles) and leaves a tile
// with three columns past the map; one 14 wide takes F(5,5) (27 products a kernel row, 32 by
// F(4,5)) and leaves a tile with one column past the map (LeNet-5's C3, 10 wide, fits 2 exactly).
TEST_P(SimdLevels, WinogradLayersOfManyRowsMatchCpu) {
    expect_layers_match_cpu(NetworkBuilder("tall maps", {2, 36, 13})
                                .conv("tall", 4, 5, Activation::Tanh)
                                .fully_connected("out", 10, Activation::None)
                                .build(),
                            ops());
    expect_layers_match_cpu(NetworkBuilder("tall maps, 9 points", {2, 36, 18})
                                .conv("tall, 9 points", 4, 5, Activation::Tanh)
                                .fully_connected("out", 10, Activation::None)
                                .build(),
                            ops());
}

// 5x5 convolutions of one connection an output map, which the lane code takes by Winograd map
// by map (LaneWinogradAlone: the forward, and the weight gradient where no input gradient is
// asked): an output 21 wide from a padded input (its last tile has three columns past the map)
// and one 9 wide, under each activation.
TEST_P(SimdLevels, OneConnectionWinogradMatchesCpu) {
    for (Activation act : {Activation::Tanh, Activation::Sigmoid, Activation::ReLU, Activation::None}) {
        SCOPED_TRACE(activation_name(act));
        expect_layers_match_cpu(NetworkBuilder("one connection", {1, 13, 21})
                                    .conv("padded", 3, 5, act, {}, 1, 2)
                                    .fully_connected("out", 10, Activation::None)
                                    .build(),
                                ops());
        expect_layers_match_cpu(NetworkBuilder("one connection, narrow", {1, 20, 13})
                                    .conv("narrow", 2, 5, act)
                                    .fully_connected("out", 10, Activation::None)
                                    .build(),
                                ops());
    }
}

// Remainders are stored by their lane count (AVX2 in pieces of 4, 2 and 1): every layer of
// LeNet-5 and of a network whose rows end in 4, 2 and 5 lanes writes its output and input
// gradient up to their last float and not one float past it.
TEST_P(SimdLevels, LayersWriteNothingPastTheirOutputs) {
    const float guard = 12345.0f;
    const Network row_ends = NetworkBuilder("row ends", {2, 20, 20})
                                 .conv("pad1", 4, 3, Activation::Tanh, {}, 1, 1)
                                 .pool("max", LayerKind::MaxPool, 2, 0, Activation::Tanh)
                                 .conv("pad2", 5, 5, Activation::Tanh, {}, 1, 2)
                                 .subsample("sub", 2, Activation::Tanh)
                                 .fully_connected("out", 13, Activation::None)
                                 .build();
    for (const Network& net : {lenet5_network(), row_ends}) {
        Rng rng(5);
        const std::vector<float> p = init_params(net, 3);
        for (const auto& l : net.layers) {
            SCOPED_TRACE(net.name + " " + l.name);
            const size_t in_n = static_cast<size_t>(l.in.size()), out_n = static_cast<size_t>(l.out.size());
            const std::vector<float> in = random_vector(in_n, rng);
            std::vector<float> out(out_n + 64, guard), d = random_vector(out_n, rng), din(in_n + 64, guard);
            std::vector<float> g(p.size(), 0.0f);
            ops().forward(l, p.data(), in.data(), out.data());
            ops().backward(l, p.data(), in.data(), out.data(), d.data(), din.data(), g.data());
            for (size_t k = 0; k < 64; ++k) {
                EXPECT_EQ(out[out_n + k], guard) << "forward wrote output float " << out_n + k;
                EXPECT_EQ(din[in_n + k], guard) << "backward wrote input-gradient float " << in_n + k;
            }
            EXPECT_NE(out[out_n - 1], guard);
            EXPECT_NE(din[in_n - 1], guard);
        }
    }
}

// Max pooling passes the gradient to the first largest input of a window, as the
// reference does: with ties (ReLU outputs are often 0) every window must pick the same one.
TEST_P(SimdLevels, MaxPoolingBreaksTiesAsTheReference) {
    const Network net = NetworkBuilder("ties", {3, 6, 20}).pool("max", LayerKind::MaxPool, 2).build();
    const LayerSpec& l = net.layers[0];
    Rng rng(3);
    std::vector<float> in(static_cast<size_t>(l.in.size()));
    for (auto& x : in) x = static_cast<float>(static_cast<int>(rng.uniform(0.0f, 3.0f)));  // 0, 1 or 2
    std::vector<float> out(static_cast<size_t>(l.out.size())), d = random_vector(out.size(), rng);
    std::vector<float> din_ref(in.size()), din(in.size()), d_ref = d;
    cpu_ops().forward(l, nullptr, in.data(), out.data());
    cpu_ops().backward(l, nullptr, in.data(), out.data(), d_ref.data(), din_ref.data(), nullptr);
    ops().backward(l, nullptr, in.data(), out.data(), d.data(), din.data(), nullptr);
    EXPECT_EQ(din, din_ref);
}

// The vector sigmoid against the reference's formula, and ReLU exactly, from -100 to 100.
TEST_P(SimdLevels, SigmoidIsWithinOnePpmAndReluIsExact) {
    const int n = 400;
    for (Activation act : {Activation::Sigmoid, Activation::ReLU}) {
        const Network net = NetworkBuilder("act", {1, 1, n}).fully_connected("a", n, act).loss(Loss::SquaredError).build();
        const LayerSpec& l = net.layers[0];
        std::vector<float> p(net.param_count, 0.0f);
        for (int i = 0; i < n; ++i) p[l.weight_offset + static_cast<size_t>(i) * (n + 1)] = 1.0f;
        std::vector<float> in(n), out(n);
        double worst = 0;
        float worst_x = 0;
        for (int k = 0; k < 500; ++k) {
            for (int i = 0; i < n; ++i) in[static_cast<size_t>(i)] = -100.0f + 200.0f * static_cast<float>(k * n + i) / (500.0f * n);
            ops().forward(l, p.data(), in.data(), out.data());
            for (size_t i = 0; i < in.size(); ++i) {
                const double x = in[i], ref = act == Activation::ReLU ? (x > 0 ? x : 0) : 1 / (1 + std::exp(-x));
                // Below ~1e-38 the reference's float exp overflows (0) or leaves denormals.
                if (ref < 1e-37) continue;
                const double err = act == Activation::ReLU ? (out[i] == ref ? 0 : 1) : std::abs(out[i] - ref) / ref;
                if (err > worst) worst = err, worst_x = in[i];
            }
        }
        EXPECT_LT(worst, 1e-6) << activation_name(act) << " at x = " << worst_x;
    }
}

// A network that is all batched layers (the seeds' 784-200-10 MLP) through the engine:
// HostEngine's batched tail is then the whole network.
TEST_P(SimdLevels, OmpRunsANetworkOfOnlyBatchedLayers) {
    const Network net = NetworkBuilder("mlp", {1, 32, 32})
                            .fully_connected("hidden", 200, Activation::Tanh)
                            .fully_connected("output", 10, Activation::None)
                            .build();
    const Dataset data = random_dataset(40, 5);
    auto cpu = test::cpu_engine(net);
    HostEngine omp(net, "omp", ops(), 3);
    const test::StepRecord ref = test::record_step(*cpu, net, data, 17, 2);
    const test::StepRecord got = test::record_step(omp, net, data, 17, 2);
    EXPECT_LT(test::relative_error(got.gradients, ref.gradients), 1e-4);
    EXPECT_LT(test::relative_error(got.params_after, ref.params_after), 1e-4);
    EXPECT_NEAR(got.loss, ref.loss, 1e-4 * ref.loss);
}

// Parts run through the batched tail without barriers; each tail layer's input gradient has
// its own buffer (a shared ping-pong pair let one part's rows of C5's input gradient overwrite
// rows of the output layer's that another part was still reading, now and then). The head's
// lane groups go to whichever thread is free, so which thread runs which group changes from run
// to run (3 threads on this project's 2 cores); each group's gradients have their own buffer and
// scratch (a group on the shared scratch of thread 0 fails here). Repeated, since a race shows
// only sometimes.
TEST_P(SimdLevels, OmpStepsDoNotDependOnThreadTiming) {
    const Network net = lenet5_network();
    const Dataset data = random_dataset(140, 6);
    test::StepRecord first;
    for (int run = 0; run < 12; ++run) {
        HostEngine omp(net, "omp", ops(), 3);
        const test::StepRecord r = test::record_step(omp, net, data, 64, 1);
        if (run == 0) {
            first = r;
            continue;
        }
        ASSERT_EQ(r.gradients, first.gradients) << "run " << run;
        ASSERT_EQ(r.params_after, first.params_after) << "run " << run;
    }
}

// Batch 1 keeps a tail layer's gradient as its two vectors (d, x) and, without momentum or
// weight decay, applies it in one pass (HostOps::sgd_outer). Against the same engine made to
// write its gradients first (gradients() before each update): bit for bit the same
// parameters, gradients and velocity, also across a switch to momentum and back.
TEST_P(SimdLevels, OneSampleStepsWithoutMomentumAreBitIdenticalToWrittenGradients) {
    const Dataset data = random_dataset(12, 9);
    for (const Network& net : {load_model("mlp").net, lenet5_network()})
        for (int threads : {1, 2}) {
            HostEngine fused(net, "omp", ops(), threads), written(net, "omp", ops(), threads);
            std::vector<int32_t> order(12);
            for (int i = 0; i < 12; ++i) order[static_cast<size_t>(i)] = (i * 5) % 12;
            for (HostEngine* e : {&fused, &written}) {
                e->upload(Split::Train, data);
                e->set_params(init_params(net, 4));
                e->set_order(order);
            }
            for (int step = 0; step < 10; ++step) {
                const float momentum = step == 6 ? 0.9f : 0.0f, decay = step == 7 ? 1e-3f : 0.0f;
                for (HostEngine* e : {&fused, &written}) {
                    e->forward(Split::Train, step, 1);
                    e->backward();
                }
                const std::vector<float> g = written.gradients();
                fused.update(0.1f, momentum, decay);
                written.update(0.1f, momentum, decay);
                ASSERT_EQ(fused.params(), written.params()) << net.name << ", step " << step;
                if (step % 3 == 0) {
                    EXPECT_EQ(fused.gradients(), g) << net.name << ", step " << step;
                    EXPECT_EQ(fused.momentum_buffer(), written.momentum_buffer()) << net.name << ", step " << step;
                }
            }
            EXPECT_EQ(fused.momentum_buffer(), written.momentum_buffer()) << net.name;
            EXPECT_EQ(fused.take_counters().loss_sum, written.take_counters().loss_sum) << net.name;
        }
}

// backward_batch_set writes what backward_batch adds into zeroed gradients, bit for bit, for
// a small layer and one of 1.1M weights (the AVX-512 path runs such layers at 512 bits);
// the large one also matches cpu.
TEST_P(SimdLevels, BackwardBatchSetIsBitIdenticalToAddingIntoZeros) {
    ASSERT_NE(ops().backward_batch_set, nullptr);
    for (int in_n : {84, 1100}) {
        const Network net = NetworkBuilder("fc", {1, 1, in_n})
                                .fully_connected("wide", in_n == 84 ? 10 : 1000, Activation::ReLU)
                                .fully_connected("output", 10, Activation::None)
                                .build();
        const LayerSpec& l = net.layers[0];
        Rng rng(3);
        const std::vector<float> p = random_vector(net.param_count, rng, 0.05f);
        const int count = 7;
        const std::vector<float> in = random_vector(static_cast<size_t>(count * l.in.size()), rng);
        const std::vector<float> d = random_vector(static_cast<size_t>(count * l.out.size()), rng);
        std::vector<float> out(static_cast<size_t>(count * l.out.size()));
        ops().forward_batch(l, p.data(), in.data(), out.data(), count);
        std::vector<float> d_add = d, d_set = d, din_add(in.size()), din_set(in.size());
        std::vector<float> g_add(p.size(), 0.0f), g_set(p.size(), 0.0f);
        std::fill(g_set.begin(), g_set.begin() + static_cast<std::ptrdiff_t>(l.bias_offset + l.bias_count), 1.0f);
        ops().backward_batch(l, p.data(), in.data(), out.data(), d_add.data(), din_add.data(), g_add.data(), count);
        ops().backward_batch_set(l, p.data(), in.data(), out.data(), d_set.data(), din_set.data(), g_set.data(), count);
        EXPECT_EQ(g_set, g_add) << in_n;
        EXPECT_EQ(din_set, din_add) << in_n;
        if (in_n > 84) expect_batch_matches_cpu(l, p, ops(), rng);
    }
}

// The moves into and out of lane groups by transposes (HostOps::to_lanes, from_lanes) against
// the engine's scalar ones, bit for bit: every group size, sizes off the 8x8 blocks, and nothing
// written past the destination.
TEST_P(SimdLevels, LaneMovesAreBitIdenticalToTheEnginesScalarOnes) {
    ASSERT_TRUE(ops().to_lanes && ops().from_lanes);
    const int L = ops().lanes;
    LaneGroups scalar;
    scalar.lanes = L;
    Rng rng(7);
    for (int n = 1; n <= L; ++n)
        for (size_t size : {1, 5, 8, 13, 400}) {
            const std::vector<float> samples = random_vector(static_cast<size_t>(n) * size, rng);
            std::vector<float> want(size * static_cast<size_t>(L) + 16, 9.0f), got = want;
            scalar.to_lanes(samples.data(), n, size, want.data());
            ops().to_lanes(samples.data(), n, size, got.data());
            EXPECT_EQ(want, got) << "to_lanes, " << n << " samples of " << size;
            std::vector<float> back_want(samples.size() + 16, 9.0f), back_got = back_want;
            scalar.from_lanes(got.data(), n, size, back_want.data());
            ops().from_lanes(got.data(), n, size, back_got.data());
            EXPECT_EQ(back_want, back_got) << "from_lanes, " << n << " samples of " << size;
        }
}

// Images staged into a group by transposes (HostOps::images_to_lanes) against the engine's
// scalar staging, bit for bit: every byte value at several scalings, every group size, the image
// centred in a larger input, cropped by a smaller one, and a pixel table it cannot reproduce
// (then it declines and writes nothing).
TEST_P(SimdLevels, StagedImagesAreBitIdenticalToTheEnginesScalarStaging) {
    ASSERT_NE(ops().images_to_lanes, nullptr);
    const int L = ops().lanes, rows = 28, cols = 28;
    std::vector<std::vector<uint8_t>> images(static_cast<size_t>(L), std::vector<uint8_t>(rows * cols));
    Rng rng(11);
    for (size_t s = 0; s < images.size(); ++s)
        for (size_t i = 0; i < images[s].size(); ++i)  // every byte value in each image, then random ones
            images[s][i] = static_cast<uint8_t>(i < 256 ? (i + 37 * s) % 256 : rng.next() % 256);
    std::vector<const uint8_t*> ptrs;
    for (const auto& im : images) ptrs.push_back(im.data());
    for (const InputScaling scaling : {InputScaling{}, InputScaling{1.0f, 0.0f}, InputScaling{3.7f, -0.3f},
                                       InputScaling{-1.5f, 0.25f}}) {
        float pixel[256];
        for (int b = 0; b < 256; ++b) pixel[b] = scaling.value(b);
        for (const Shape input : {Shape{1, 32, 32}, Shape{1, 28, 28}, Shape{1, 24, 26}, Shape{1, 31, 37}})
            for (int n = 1; n <= L; ++n) {
                std::vector<float> want(static_cast<size_t>(input.size() * L) + 16, 9.0f), got = want;
                images_to_lanes(ptrs.data(), n, L, rows, cols, input, pixel, want.data());
                // The test, like the engine, computes value() for plain x86-64: three roundings.
                ASSERT_TRUE(ops().images_to_lanes(ptrs.data(), n, rows, cols, input, scaling, pixel, got.data()));
                EXPECT_EQ(want, got) << "scale " << scaling.scale << ", input " << input.h << "x" << input.w << ", "
                                     << n << " images";
            }
        pixel[200] = std::nextafter(pixel[200], 10.0f);
        std::vector<float> untouched(static_cast<size_t>(32 * 32 * L), 9.0f), got = untouched;
        EXPECT_FALSE(ops().images_to_lanes(ptrs.data(), L, rows, cols, Shape{1, 32, 32}, scaling, pixel, got.data()));
        EXPECT_EQ(untouched, got);
    }
}

// The vector tanh against std::tanh over the range that matters, through a fully
// connected layer with identity weights (out = tanh(in) exactly up to the tanh).
TEST_P(SimdLevels, TanhIsWithinOnePpmOfStdTanh) {
    const int n = 400;
    const Network net = NetworkBuilder("tanh", {1, 1, n}).fully_connected("t", n, Activation::Tanh).loss(Loss::SquaredError).build();
    const LayerSpec& l = net.layers[0];
    std::vector<float> p(net.param_count, 0.0f);
    for (int i = 0; i < n; ++i) p[l.weight_offset + static_cast<size_t>(i) * (n + 1)] = 1.0f;
    std::vector<float> in(n), out(n);
    double worst = 0;
    float worst_x = 0;
    // 360 000 points evenly from -12 to 12, then 40 000 tiny ones (magnitudes 2^0 .. 2^-99, both signs).
    auto point = [&](int k, int i) {
        if (k < 900) return -12.0f + 24.0f * static_cast<float>(k * n + i) / (900.0f * n);
        const float tiny = std::ldexp(1.0f + static_cast<float>(i) / n, 900 - k);
        return i % 2 ? tiny : -tiny;
    };
    for (int k = 0; k < 1000; ++k) {
        for (int i = 0; i < n; ++i) in[static_cast<size_t>(i)] = point(k, i);
        ops().forward(l, p.data(), in.data(), out.data());
        for (size_t i = 0; i < in.size(); ++i) {
            const double ref = std::tanh(static_cast<double>(in[i]));
            const double rel = std::abs(out[i] - ref) / std::max(std::abs(ref), 1e-30);
            if (rel > worst) worst = rel, worst_x = in[i];
        }
    }
    EXPECT_LT(worst, 1e-6) << "at x = " << worst_x;
    in.assign(n, std::numeric_limits<float>::quiet_NaN());
    ops().forward(l, p.data(), in.data(), out.data());
    EXPECT_TRUE(std::isnan(out[0]));
}

INSTANTIATE_TEST_SUITE_P(Simd, SimdLevels, ::testing::Values(SimdLevel::Avx512, SimdLevel::Avx2),
                         [](const ::testing::TestParamInfo<SimdLevel>& level) {
                             return std::string(level.param == SimdLevel::Avx512 ? "Avx512" : "Avx2");
                         });

TEST(Simd, FactoryBuildsAvxAndOmpAndHonoursLenet5Simd) {
    if (!simd_ops()) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
    const Network net = lenet5_network();
    EngineRequest r;
    r.variant = "avx";
    EXPECT_EQ(make_engine(net, r)->variant(), "avx");
    r.variant = "omp";
    r.threads = 2;
    auto omp = make_engine(net, r);
    EXPECT_EQ(omp->variant(), "omp");
    EXPECT_EQ(omp->device(), "host (2 threads)");

    const char* old = std::getenv("LENET5_SIMD");
    const std::string keep = old ? old : "";
    setenv("LENET5_SIMD", "avx2", 1);
    EXPECT_EQ(simd_level(), "avx2");
    EXPECT_EQ(simd_ops(), simd_ops(SimdLevel::Avx2));
    setenv("LENET5_SIMD", "sse", 1);
    EXPECT_THROW(simd_ops(), Error);
    if (old)
        setenv("LENET5_SIMD", keep.c_str(), 1);
    else
        unsetenv("LENET5_SIMD");
}

// A short run on real MNIST: avx and omp learn as well as cpu (same seed, same
// batches; the float rounding differs, so the accuracies may differ a little).
TEST(Simd, AvxAndOmpLearnRealMnistAsWellAsCpu) {
    const std::string dir = test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    if (!simd_ops()) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
    auto accuracy = [&](const std::string& variant) {
        TrainOptions o;
        o.engine.variant = variant;
        o.engine.threads = 2;
        o.data_dir = dir;
        o.epochs = 1;
        o.train_limit = 6000;
        o.test_limit = 1000;
        return train(o).epochs.at(0).test_accuracy;
    };
    const double cpu = accuracy("cpu");
    EXPECT_NEAR(accuracy("avx"), cpu, 0.01);
    EXPECT_NEAR(accuracy("omp"), cpu, 0.01);
}

#endif  // LENET5_HAVE_SIMD
