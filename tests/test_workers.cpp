// Several workers in one process (worker_engine.h): the --workers syntax, the split of a
// batch, and training that matches one worker with the same global batch.
#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "engine/engine_factory.h"
#include "common/error.h"
#include "test_support.h"
#include "train/worker_engine.h"
#include "train/worker_threads.h"

using namespace lenet5;
using lenet5::test::relative_error;

namespace {

std::unique_ptr<WorkerEngine> workers_of(const Network& net, const std::vector<std::string>& variants,
                                         std::vector<double> shares) {
    std::vector<std::unique_ptr<Engine>> engines;
    for (const auto& v : variants) {
        EngineRequest r;
        r.variant = v;
        engines.push_back(make_engine(net, r));
    }
    return std::make_unique<WorkerEngine>(net, std::move(engines), std::move(shares), 64);
}

// The gradients of one step of `batch` samples from the same parameters.
std::vector<float> step_gradients(Engine& e, const Network& net, const Dataset& data, int batch) {
    e.upload(Split::Train, data);
    e.set_params(init_params(net, 3));
    std::vector<int32_t> order(static_cast<size_t>(data.count));
    std::iota(order.begin(), order.end(), 0);
    e.set_order(order);
    e.forward(Split::Train, 0, batch);
    e.backward();
    return e.gradients();
}

}  // namespace

TEST(Workers, ParsesTheSpecAndRefusesMalformedOnes) {
    auto w = parse_workers("1:gpu-local,omp,2");
    ASSERT_EQ(w.size(), 3u);
    EXPECT_EQ(w[0].device, 1);
    EXPECT_EQ(w[0].variant, "gpu-local");
    EXPECT_EQ(w[1].device, -1);
    EXPECT_EQ(w[1].variant, "omp");
    EXPECT_EQ(w[2].device, 2);
    EXPECT_EQ(w[2].variant, "gpu-local");  // a device alone
    w = parse_workers("0:gpu@3,cpu@1");
    EXPECT_DOUBLE_EQ(w[0].share, 3.0);
    EXPECT_DOUBLE_EQ(w[1].share, 1.0);
    for (const char* bad : {"", "omp,", ",omp", "x:gpu", "1:", "gpu@0", "gpu@-1", "gpu@two", "gpu@2,omp", "auto"})
        EXPECT_THROW(parse_workers(bad), UsageError) << bad;
}

TEST(Workers, SplitNeverDropsOrRepeatsASample) {
    for (int count : {1, 2, 7, 64, 1000})
        for (const std::vector<double>& shares :
             std::vector<std::vector<double>>{{1.0}, {0.5, 0.5}, {0.9, 0.1}, {0.2, 0.3, 0.5}, {0.01, 0.99}}) {
            const auto n = split_counts(count, shares);
            ASSERT_EQ(n.size(), shares.size());
            EXPECT_EQ(std::accumulate(n.begin(), n.end(), 0), count);
            for (size_t i = 0; i < n.size(); ++i) {
                EXPECT_GE(n[i], 0);
                EXPECT_LE(std::abs(n[i] - count * shares[i]), 1.0) << count << " worker " << i;
            }
        }
}

// The kept threads: each given worker runs once per call, on a thread of its own that stays the
// same from call to call, while the caller runs its part; errors come back, the caller's first.
TEST(Workers, KeptThreadsRunEachGivenWorkerAndReturnErrors) {
    lenet5::WorkerThreads threads(3);
    std::vector<std::thread::id> first(3), again(3);
    std::vector<int> runs(3, 0);
    bool meanwhile = false;
    threads.run({0, 2}, [&](size_t i) { first[i] = std::this_thread::get_id(), ++runs[i]; }, [&] { meanwhile = true; });
    EXPECT_EQ(runs, (std::vector<int>{1, 0, 1}));
    EXPECT_TRUE(meanwhile);
    EXPECT_NE(first[0], std::this_thread::get_id());
    EXPECT_NE(first[0], first[2]);
    threads.run({0, 1, 2}, [&](size_t i) { again[i] = std::this_thread::get_id(), ++runs[i]; }, nullptr);
    EXPECT_EQ(runs, (std::vector<int>{2, 1, 2}));
    EXPECT_EQ(again[0], first[0]);
    EXPECT_EQ(again[2], first[2]);
    auto fail = [](size_t i) {
        if (i > 0) throw lenet5::Error("worker " + std::to_string(i));
    };
    try {
        threads.run({0, 1, 2}, fail, nullptr);
        FAIL() << "no error";
    } catch (const lenet5::Error& e) {
        EXPECT_STREQ(e.what(), "worker 1");
    }
    try {
        threads.run({2}, fail, [] { throw lenet5::Error("caller"); });
        FAIL() << "no error";
    } catch (const lenet5::Error& e) {
        EXPECT_STREQ(e.what(), "caller");
    }
    threads.run({1}, [&](size_t i) { ++runs[i]; }, nullptr);  // still serving after errors
    EXPECT_EQ(runs[1], 2);
}

TEST(Workers, TwoWorkersGiveOneWorkersGradients) {
    const Network net = lenet5_network();
    const Dataset data = random_dataset(70, 5);
    auto one = lenet5::test::cpu_engine(net);
    const auto ref = step_gradients(*one, net, data, 64);
    for (const std::vector<double>& shares : std::vector<std::vector<double>>{{0.5, 0.5}, {0.3, 0.7}}) {
        auto two = workers_of(net, {"cpu", "cpu"}, shares);
        EXPECT_LT(relative_error(step_gradients(*two, net, data, 64), ref), 1e-5) << shares[0];
    }
    // Each sample's activations come back in batch order across the workers.
    auto two = workers_of(net, {"cpu", "cpu"}, {0.25, 0.75});
    step_gradients(*two, net, data, 64);
    one->forward(Split::Train, 0, 64);
    EXPECT_EQ(two->layer_output(net.layers.size() - 1), one->layer_output(net.layers.size() - 1));
}

#ifdef LENET5_HAVE_OPENCL
// A host worker beside an OpenCL device (PoCL here).
TEST(Workers, AHostAndAnOpenCLWorkerGiveOneWorkersGradients) {
    for (const char* name : {"mlp"}) {
        const Network net = load_model(name).net;
        const Dataset data = random_dataset(20, 6);
        auto one = lenet5::test::cpu_engine(net);
        const auto ref = step_gradients(*one, net, data, 16);
        auto two = workers_of(net, {"cpu", "gpu-local"}, {0.5, 0.5});
        EXPECT_LT(relative_error(step_gradients(*two, net, data, 16), ref), 1e-5) << name;
    }
}
#endif

// Measured shares split the batch, or, where splitting does not beat the faster worker alone
// (a busy machine may not run the two threads at once), give it every sample.
TEST(Workers, MeasuredSharesSplitOrLeaveAWorkerIdle) {
    const Network net = lenet5_network();
    auto two = workers_of(net, {"cpu", "cpu"}, {});
    const Dataset data = random_dataset(70, 5);
    const auto ref = step_gradients(*lenet5::test::cpu_engine(net), net, data, 64);
    EXPECT_LT(relative_error(step_gradients(*two, net, data, 64), ref), 1e-5);
    const auto& s = two->shares();
    ASSERT_EQ(s.size(), 2u);
    EXPECT_NEAR(s[0] + s[1], 1.0, 1e-12);
    const bool split = s[0] > 0.1 && s[1] > 0.1, one = s[0] == 1.0 || s[1] == 1.0;
    EXPECT_TRUE(split || one) << s[0] << " " << s[1];
    EXPECT_NE(two->device().find("(shares measured)"), std::string::npos) << two->device();
    EXPECT_EQ(two->device().find("idle") != std::string::npos, one) << two->device();
}

// On the real MNIST: an epoch with two workers ends at one worker's loss and accuracy, and a
// run resumed from a checkpoint with explicit shares is bit-identical to a straight one.
TEST(Workers, AnEpochMatchesOneWorkerAndResumes) {
    const std::string dir = lenet5::test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    TrainOptions o = lenet5::test::quick_options("cpu", dir, 1024, 300, 64, 1);
    const TrainResult single = train(o);
    o.engine.workers = "cpu@1,cpu@1";
    const TrainResult two = train(o);
    EXPECT_NEAR(two.epochs[0].train_loss, single.epochs[0].train_loss, 1e-4 * single.epochs[0].train_loss);
    EXPECT_NEAR(two.epochs[0].test_accuracy, single.epochs[0].test_accuracy, 0.003);
    ASSERT_EQ(two.epochs[0].workers.size(), 2u);
    EXPECT_GT(two.epochs[0].workers[1].second.forward_ms, 0.0);

    const std::string ck = ::testing::TempDir() + "lenet5_workers_" + std::to_string(::getpid()) + ".ck";
    o.epochs = 2;
    const TrainResult straight = train(o);
    o.epochs = 1;
    o.save_path = ck;
    train(o);
    o.save_path.clear();
    o.resume_path = ck;
    o.epochs = 2;
    const TrainResult resumed = train(o);
    std::remove(ck.c_str());
    EXPECT_EQ(resumed.params, straight.params);
}
