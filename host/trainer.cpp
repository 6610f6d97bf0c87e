#include "trainer.h"

#include <chrono>
#include <cmath>

#include "error.h"
#include "mnist.h"
#include "rng.h"

namespace lenet5 {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Test passes use larger batches than training: there is no update between them.
constexpr int kEvalBatch = 1000;

// The shuffle of each epoch depends only on the seed and the epoch number, so a
// resumed run sees the same orders as a straight one.
std::vector<int32_t> epoch_order(int samples, uint64_t seed, int epoch) {
    Rng rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch));
    return shuffled_order(samples, rng);
}
}  // namespace

EvalResult evaluate(Engine& engine, int test_samples) {
    engine.take_counters();
    for (int first = 0; first < test_samples; first += kEvalBatch)
        engine.forward(Split::Test, first, std::min(kEvalBatch, test_samples - first));
    const Counters c = engine.take_counters();
    EvalResult r;
    r.samples = static_cast<int>(c.samples);
    r.loss = c.samples ? c.loss_sum / static_cast<double>(c.samples) : 0.0;
    r.accuracy = c.samples ? static_cast<double>(c.correct) / static_cast<double>(c.samples) : 0.0;
    return r;
}

TrainResult train(const TrainOptions& o, const TrainObserver& observer) {
    if (!o.save_path.empty() || !o.resume_path.empty())
        throw Error("--save and --resume are not implemented yet in this version");
    const Network net = lenet5_network();
    const std::string dir = resolve_data_dir(o.data_dir);
    const Dataset train_set = load_mnist(dir, Split::Train, o.train_limit);
    const Dataset test_set = load_mnist(dir, Split::Test, o.test_limit);

    auto engine = make_engine(net, o.engine);
    engine->upload(Split::Train, train_set);
    engine->upload(Split::Test, test_set);
    engine->set_params(init_params(net, o.seed));

    TrainResult result;
    result.info = {engine->variant(), engine->device(), engine->platform(), train_set.count, test_set.count};
    if (observer.on_start) observer.on_start(result.info);

    const int steps = (train_set.count + o.batch - 1) / o.batch;
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
        engine->take_times();
        engine->take_counters();
        const auto t0 = Clock::now();
        engine->set_order(epoch_order(train_set.count, o.seed, epoch));
        for (int step = 0; step < steps; ++step) {
            const int first = step * o.batch;
            engine->forward(Split::Train, first, std::min(o.batch, train_set.count - first));
            engine->backward();
            engine->update(o.lr, o.momentum);
            if (observer.on_step) observer.on_step(epoch, step + 1, steps);
        }
        const Counters c = engine->take_counters();  // waits for the device
        EpochResult r;
        r.epoch = epoch;
        r.wall_ms = ms_since(t0);
        r.times = engine->take_times();
        r.train_loss = c.loss_sum / static_cast<double>(c.samples);
        r.train_accuracy = static_cast<double>(c.correct) / static_cast<double>(c.samples);
        if (!std::isfinite(r.train_loss))
            throw Error("training diverged in epoch " + std::to_string(epoch) + " (loss is not finite); try a smaller --lr");
        const auto t1 = Clock::now();
        const EvalResult test = evaluate(*engine, test_set.count);
        r.eval_ms = ms_since(t1);
        r.test_loss = test.loss;
        r.test_accuracy = test.accuracy;
        engine->take_times();  // the test pass is not part of the epoch's phases
        result.epochs.push_back(r);
        if (observer.on_epoch) observer.on_epoch(r);
    }
    return result;
}

}  // namespace lenet5
