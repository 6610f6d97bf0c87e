// train --target-accuracy and --eval-every (trainer.h): the run stops at the first evaluation at or
// above the target, also inside an epoch and with several workers, saves where it stopped, and
// says when the target was never met. --mpirun's ranks: test_mpi.cpp; the command line: test_cli.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include "io/checkpoint.h"
#include "test_support.h"

using namespace lenet5;

namespace {

// 640 images at batch 32: 20 steps an epoch, evaluated every 4 steps.
TrainOptions options(const std::string& dir, const std::string& workers = "") {
    TrainOptions o = test::quick_options("cpu", dir, 640, 200, 32, 2);
    o.engine.workers = workers;
    o.eval_every = 4;
    return o;
}

// The first evaluation inside an epoch whose accuracy is above every earlier one: a target that the
// run first meets there. -1 if there is none.
int mid_epoch_record(const std::vector<Evaluation>& evals, int steps_per_epoch) {
    double best = 0;
    for (size_t k = 0; k < evals.size(); ++k) {
        if (k > 0 && evals[k].test_accuracy > best && evals[k].step % steps_per_epoch != 0) return static_cast<int>(k);
        best = std::max(best, evals[k].test_accuracy);
    }
    return -1;
}

// A run with the target the straight run (no target) first meets at a mid-epoch evaluation stops
// right there, with the straight run's evaluations up to it, and saves where it stopped: resuming
// from that checkpoint ends on the straight run's parameters.
void expect_stops_at_first_evaluation_at_target(const std::string& workers) {
    const std::string dir = test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    TrainOptions o = options(dir, workers);
    const TrainResult straight = train(o);
    ASSERT_EQ(straight.evaluations.size(), 10u);  // steps 4, 8, ..., 40
    EXPECT_FALSE(straight.time_to_accuracy.has_value());
    const int k = mid_epoch_record(straight.evaluations, 20);
    ASSERT_GE(k, 1) << "no mid-epoch evaluation improves on the ones before it";
    const Evaluation& at = straight.evaluations[static_cast<size_t>(k)];

    const std::string ck = ::testing::TempDir() + "lenet5_tta_" + std::to_string(::getpid()) + ".ck";
    o.target_accuracy = at.test_accuracy;
    o.save_path = ck;
    const TrainResult stopped = train(o);
    ASSERT_TRUE(stopped.time_to_accuracy.has_value());
    const TimeToAccuracy& t = *stopped.time_to_accuracy;
    EXPECT_TRUE(t.reached);
    EXPECT_EQ(t.target, at.test_accuracy);
    EXPECT_EQ(t.at.step, at.step);
    EXPECT_DOUBLE_EQ(t.at.epoch, static_cast<double>(at.step) / 20);
    EXPECT_EQ(t.at.test_accuracy, at.test_accuracy);
    EXPECT_GT(t.at.train_seconds, 0.0);
    EXPECT_GT(t.at.wall_seconds, t.at.train_seconds);  // the evaluations took time too
    ASSERT_EQ(stopped.evaluations.size(), static_cast<size_t>(k) + 1);
    for (size_t e = 0; e <= static_cast<size_t>(k); ++e)
        EXPECT_EQ(stopped.evaluations[e].test_accuracy, straight.evaluations[e].test_accuracy) << e;
    // The last epoch's row is the part of it that ran.
    const int epochs = static_cast<int>((at.step + 19) / 20);
    ASSERT_EQ(stopped.epochs.size(), static_cast<size_t>(epochs));
    EXPECT_EQ(stopped.epochs.back().steps, at.step - 20 * (epochs - 1));
    EXPECT_EQ(stopped.epochs.back().test_accuracy, at.test_accuracy);

    const Checkpoint c = load_checkpoint(ck);
    EXPECT_EQ(c.epoch, static_cast<uint32_t>(epochs - 1));
    EXPECT_EQ(c.step, static_cast<uint32_t>(at.step - 20 * (epochs - 1)));
    EXPECT_EQ(c.params, stopped.params);
    o.target_accuracy = 0;
    o.save_path.clear();
    o.resume_path = ck;
    const TrainResult resumed = train(o);
    std::remove(ck.c_str());
    EXPECT_EQ(resumed.params, straight.params);
}

}  // namespace

TEST(TrainingTarget, StopsAtTheFirstEvaluationAtOrAboveTheTarget) { expect_stops_at_first_evaluation_at_target(""); }

TEST(TrainingTarget, TwoWorkersStopAtTheFirstEvaluationAtOrAboveTheTarget) {
    expect_stops_at_first_evaluation_at_target("cpu@1,cpu@1");
}

// A target met at an epoch's end stops after that epoch; one never met runs every epoch and says
// where it ended and the best accuracy it saw.
TEST(TrainingTarget, StopsAtAnEpochsEndOrRunsToTheEndWhenNeverMet) {
    const std::string dir = test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    TrainOptions o = options(dir);
    o.eval_every = 0;
    o.target_accuracy = 1.0;
    const TrainResult never = train(o);
    ASSERT_EQ(never.epochs.size(), 2u);
    ASSERT_EQ(never.evaluations.size(), 2u);
    ASSERT_TRUE(never.time_to_accuracy.has_value());
    const TimeToAccuracy& t = *never.time_to_accuracy;
    EXPECT_FALSE(t.reached);
    EXPECT_EQ(t.at.step, 40);
    EXPECT_EQ(t.at.epoch, 2.0);
    EXPECT_EQ(t.best_accuracy, std::max(never.epochs[0].test_accuracy, never.epochs[1].test_accuracy));
    EXPECT_LT(t.best_accuracy, 1.0);

    o.target_accuracy = never.epochs[0].test_accuracy;
    const TrainResult first = train(o);
    ASSERT_EQ(first.epochs.size(), 1u);
    EXPECT_TRUE(first.time_to_accuracy->reached);
    EXPECT_EQ(first.time_to_accuracy->at.step, 20);
    EXPECT_EQ(first.time_to_accuracy->at.epoch, 1.0);
}
