// Training behaviour of the reference: determinism and real accuracy on MNIST.
#include <gtest/gtest.h>

#include "test_support.h"
#include "train/trainer.h"

using namespace lenet5;

TEST(Training, SameSeedGivesBitIdenticalParameters) {
    const Network net = lenet5_network();
    const Dataset data = random_dataset(150, 3);
    auto run = [&](uint64_t seed) {
        auto e = test::cpu_engine(net);
        return test::record_step(*e, net, data, 64, seed).params_after;
    };
    const auto a = run(1), b = run(1), c = run(2);
    EXPECT_EQ(a, b);  // bit for bit
    EXPECT_NE(a, c);
}

TEST(Training, CpuLearnsRealMnist) {
    const std::string dir = test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    const TrainOptions o = test::quick_options("cpu", dir, 6000, 1000, 64, 1);
    const TrainResult r = train(o);
    ASSERT_EQ(r.epochs.size(), 1u);
    EXPECT_EQ(r.info.train_samples, 6000);
    EXPECT_EQ(r.info.test_samples, 1000);
    // 94 steps of batch 64 take LeNet-5 far past chance (10%); measured 91.3% here.
    EXPECT_GE(r.epochs[0].test_accuracy, 0.88);
    EXPECT_GT(r.epochs[0].times.forward_ms, 0.0);
    EXPECT_GT(r.epochs[0].times.backward_ms, 0.0);
    EXPECT_GT(r.epochs[0].times.update_ms, 0.0);
    EXPECT_GE(r.epochs[0].wall_ms, r.epochs[0].times.forward_ms + r.epochs[0].times.backward_ms);
}

TEST(Training, ShuffleOrdersArePermutationsThatDifferPerEpoch) {
    Rng a(5), b(5);
    const auto o1 = shuffled_order(1000, a), o2 = shuffled_order(1000, a), o1again = shuffled_order(1000, b);
    EXPECT_EQ(o1, o1again);
    EXPECT_NE(o1, o2);
    std::vector<int32_t> sorted = o1;
    std::sort(sorted.begin(), sorted.end());
    for (int32_t i = 0; i < 1000; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
}
