// The gradient exchange (grad_exchange.h) in one process: its sums against the old exact sum of
// the workers' gradients, bfloat16 rounding, local SGD (--sync-every), and the options' errors.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>

#include "cli_runner.h"
#include "test_support.h"
#include "train/bf16.h"
#include "train/worker_engine.h"

using namespace lenet5;
using lenet5::test::run_cli;

namespace {

std::unique_ptr<WorkerEngine> cpu_workers(const Network& net, std::vector<double> shares, ExchangeOptions options = {}) {
    std::vector<std::unique_ptr<Engine>> engines;
    for (size_t i = 0; i < shares.size(); ++i) engines.push_back(lenet5::test::cpu_engine(net));
    return std::make_unique<WorkerEngine>(net, std::move(engines), std::move(shares), 64, options);
}

std::vector<int32_t> identity(int n) {
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    return order;
}

// Each worker's own gradients of its slice of samples [0, batch), as engines alone computed them.
std::vector<std::vector<float>> slice_gradients(const Network& net, const Dataset& data, const std::vector<int>& n,
                                                const std::vector<float>& params) {
    std::vector<std::vector<float>> g;
    int first = 0;
    for (int count : n) {
        auto e = lenet5::test::cpu_engine(net);
        e->upload(Split::Train, data);
        e->set_params(params);
        e->set_order(identity(data.count));
        e->forward(Split::Train, first, count);
        e->backward();
        g.push_back(e->gradients());
        first += count;
    }
    return g;
}

float as_bf16(float x) { return from_bf16(to_bf16(x)); }

}  // namespace

TEST(Bf16, RoundsToNearestTiesToEven) {
    EXPECT_EQ(to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(to_bf16(-2.0f), 0xc000);
    // bf16 keeps 7 mantissa bits: 1 + 2^-7 is the next value after 1.
    EXPECT_EQ(to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);                                // a tie: to the even 1
    EXPECT_EQ(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);                            // a tie: to the even 1 + 2^-6
    EXPECT_EQ(to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);        // above the tie: up
    EXPECT_EQ(to_bf16(1.0f + std::ldexp(1.0f, -8) - std::ldexp(1.0f, -20)), 0x3f80);        // below it: down
    EXPECT_EQ(to_bf16(-(1.0f + 3 * std::ldexp(1.0f, -8))), 0xbf82);                         // symmetric
    EXPECT_EQ(to_bf16(FLT_MAX), 0x7f80);                                                    // overflows to infinity
    EXPECT_EQ(to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
    EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
    EXPECT_EQ(from_bf16(0x3f81), 1.0f + std::ldexp(1.0f, -7));
    for (float x : {0.1f, -3.7e-5f, 12345.678f, 1e-30f})  // within half an ulp of bf16 (2^-8 relative)
        EXPECT_LE(std::fabs(as_bf16(x) - x), std::fabs(x) * std::ldexp(1.0f, -8)) << x;
}

// LeNet-5's buckets, and one over 2^18 floats, whose passes spread over the cores in blocks.
std::vector<Network> small_and_large_buckets() {
    return {lenet5_network(), NetworkBuilder("wide", {1, 28, 28})
                                  .fully_connected("F1", 400, Activation::Tanh)
                                  .fully_connected("out", 10, Activation::None)
                                  .build()};
}

// The exchange's sum is the old WorkerEngine's, bit for bit: 0 + w0 g0 + w1 g1 + ... in worker
// order, each weight the float of its slice over the batch.
void expect_the_old_exact_sum(const Network& net) {
    const Dataset data = random_dataset(70, 5);
    const std::vector<float> params = init_params(net, 3);
    for (const std::vector<double>& shares : std::vector<std::vector<double>>{{0.3, 0.7}, {0.25, 0.25, 0.5}}) {
        const std::vector<int> n = split_counts(64, shares);
        const auto g = slice_gradients(net, data, n, params);
        std::vector<float> old(net.param_count, 0.0f);
        for (size_t i = 0; i < g.size(); ++i) {
            const float w = static_cast<float>(n[i]) / 64.0f;
            for (size_t k = 0; k < old.size(); ++k) old[k] += w * g[i][k];
        }
        auto workers = cpu_workers(net, shares);
        workers->upload(Split::Train, data);
        workers->set_params(params);
        workers->set_order(identity(data.count));
        workers->forward(Split::Train, 0, 64);
        workers->backward();
        EXPECT_EQ(workers->gradients(), old) << shares.size() << " workers";
    }
}

TEST(Exchange, SumsEqualTheOldExactSumBitForBit) {
    for (const Network& net : small_and_large_buckets()) {
        SCOPED_TRACE(net.name);
        expect_the_old_exact_sum(net);
    }
}

// bf16: each worker's weighed gradients rounded to bfloat16, summed in fp32.
void expect_rounded_contributions(const Network& net) {
    const Dataset data = random_dataset(70, 5);
    const std::vector<float> params = init_params(net, 3);
    const std::vector<int> n = split_counts(64, {0.5, 0.5});
    const auto g = slice_gradients(net, data, n, params);
    std::vector<float> expected(net.param_count);
    for (size_t k = 0; k < expected.size(); ++k) {
        expected[k] = as_bf16(0.5f * g[0][k]);
        expected[k] += as_bf16(0.5f * g[1][k]);
    }
    ExchangeOptions bf16;
    bf16.precision = GradPrecision::Bf16;
    auto workers = cpu_workers(net, {1, 1}, bf16);
    workers->upload(Split::Train, data);
    workers->set_params(params);
    workers->set_order(identity(data.count));
    workers->forward(Split::Train, 0, 64);
    workers->backward();
    const auto got = workers->gradients();
    EXPECT_EQ(got, expected);
    EXPECT_NE(got, g[0]);  // rounded: not simply one worker's
}

TEST(Exchange, Bf16RoundsEachContributionAndSumsInFp32) {
    for (const Network& net : small_and_large_buckets()) {
        SCOPED_TRACE(net.name);
        expect_rounded_contributions(net);
    }
}

// --sync-every K: each worker steps on its own slice's gradients (its own momentum too), and every
// K steps the parameters become the workers' average.
TEST(Exchange, SyncEveryKAveragesTheParametersEveryKSteps) {
    const Network net = lenet5_network();
    const Dataset data = random_dataset(200, 7);
    const std::vector<float> params = init_params(net, 3);
    ExchangeOptions local;
    local.sync_every = 2;
    auto workers = cpu_workers(net, {1, 1}, local);
    std::unique_ptr<Engine> alone[2] = {lenet5::test::cpu_engine(net), lenet5::test::cpu_engine(net)};
    for (Engine* e : {static_cast<Engine*>(workers.get()), alone[0].get(), alone[1].get()}) {
        e->upload(Split::Train, data);
        e->set_params(params);
        e->set_order(identity(data.count));
    }
    const int batch = 32;
    for (int step = 1; step <= 5; ++step) {
        const int first = (step - 1) * batch;
        workers->forward(Split::Train, first, batch);
        workers->backward();
        workers->update(0.05f, 0.9f, 5e-4f);
        for (int i = 0; i < 2; ++i) {
            alone[i]->forward(Split::Train, first + i * batch / 2, batch / 2);
            alone[i]->backward();
            alone[i]->update(0.05f, 0.9f, 5e-4f);
        }
        const auto a = alone[0]->params(), b = alone[1]->params();
        if (step % 2) {  // between syncs: the first worker's own parameters
            EXPECT_EQ(workers->params(), a) << "step " << step;
            EXPECT_NE(a, b);
            if (step < 5) continue;
            workers->sync_params();  // at the end of an epoch: averaged now
        }
        std::vector<float> mean(a.size());
        for (size_t k = 0; k < a.size(); ++k) {
            mean[k] = 0.5f * a[k];
            mean[k] += 0.5f * b[k];
        }
        EXPECT_EQ(workers->params(), mean) << "step " << step;
        for (auto& e : alone) {  // the average, each keeping its momentum
            const auto v = e->momentum_buffer();
            e->set_params(mean);
            e->set_momentum_buffer(v);
        }
    }
    // Right after a sync, sync_params() changes nothing.
    const auto synced = workers->params();
    workers->sync_params();
    EXPECT_EQ(workers->params(), synced);
}

TEST(Exchange, OptionsRefuseWhatTheyCannotDo) {
    struct Case {
        const char* args;
        const char* message;
    };
    for (const Case& c : {Case{"--sync-every 0", "lenet5: error: --sync-every: 0 is out of range"},
                          Case{"--grad-precision fp16", "lenet5: error: --grad-precision: 'fp16' is not fp32 or bf16"},
                          Case{"--sync-every 4", "lenet5: error: --sync-every needs several workers"},
                          Case{"--grad-precision bf16 --workers cpu", "lenet5: error: --grad-precision bf16 needs several workers"},
                          Case{"--workers cpu,cpu --grad-precision bf16 --sync-every 2",
                               "lenet5: error: --grad-precision bf16 rounds the gradients that --sync-every 2 does not exchange"}}) {
        const auto r = run_cli(std::string("train --variant cpu --data /nonexistent ") + c.args);
        EXPECT_EQ(r.status, 2) << c.args;
        EXPECT_EQ(r.err.rfind(c.message, 0), 0u) << c.args << ": " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    // The defaults are accepted anywhere.
    const std::string dir = lenet5::test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched";
    const auto ok = run_cli("train --variant cpu --train-limit 64 --test-limit 10 --epochs 1 --grad-precision fp32 "
                            "--sync-every 1 --data " + dir);
    EXPECT_EQ(ok.status, 0) << ok.err;
}
