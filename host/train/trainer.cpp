#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "common/error.h"
#include "common/hash.h"
#include "common/rng.h"
#include "io/checkpoint.h"
#include "io/mnist.h"
#include "io/model_source.h"
#include "train/mpi_world.h"
#include "train/training_engine.h"

namespace lenet5 {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Test passes use larger batches than training: there is no update between them.
constexpr int kEvalBatch = 1000;
// The loss is checked for NaN/inf every this many steps, and at small batches every this many
// samples: a short wait for the device that also keeps the progress bar honest on a queued GPU.
// (At one sample a step, a wait every 50 steps would leave the device idle at each, and the OpenCL
// engine's persistent runs of steps short.)
constexpr int kCheckEvery = 50, kCheckSamples = 3200;

// The shuffle of each epoch depends only on the seed and the epoch number, so a
// resumed run sees the same orders as a straight one.
uint64_t epoch_rng_state(uint64_t seed, int epoch) {
    return seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch);
}

void add(Counters& total, const Counters& c) {
    total.loss_sum += c.loss_sum;
    total.correct += c.correct;
    total.samples += c.samples;
}

void add(PhaseTimes& total, const PhaseTimes& t) {
    total.forward_ms += t.forward_ms;
    total.backward_ms += t.backward_ms;
    total.update_ms += t.update_ms;
    total.transfer_ms += t.transfer_ms;
    total.reduce_ms += t.reduce_ms;
}

// Adds the engine's phase, worker and kernel times since they were last taken to the epoch's (an
// epoch with evaluations inside it is timed in parts).
void add_times(Engine& engine, EpochResult& r) {
    add(r.times, engine.take_times());
    // (Not `[name, t]`: a C++17 lambda cannot capture a structured binding, and clang refuses it.)
    for (const auto& worker : engine.take_worker_times()) {
        auto it = std::find_if(r.workers.begin(), r.workers.end(),
                               [&](const auto& w) { return w.first == worker.first; });
        if (it == r.workers.end()) r.workers.push_back(worker);
        else add(it->second, worker.second);
    }
    for (const KernelTime& k : engine.take_kernel_times()) add_kernel_time(r.kernels, k.name, k.launches, k.ms);
}

// The rules no flag parser can check alone: they involve the model or several settings.
void check_settings(const TrainSettings& s, const TrainOptions& o, const Network& net) {
    if (o.lr_decay && s.schedule != Schedule::Step)
        throw UsageError(std::string("--lr-decay applies to the step schedule, not --schedule ") + schedule_name(s.schedule));
    if (s.warmup >= static_cast<float>(s.epochs)) {
        std::ostringstream what;
        what << "--warmup " << s.warmup << " is not shorter than the run (" << s.epochs << " epochs)";
        throw UsageError(what.str());
    }
    if (s.optimizer != Optimizer::Sgd && (o.momentum || o.nesterov))
        throw UsageError(std::string(o.momentum ? "--momentum" : "--nesterov") + " applies to sgd, not --optimizer " +
                         optimizer_name(s.optimizer));
    if (s.optimizer == Optimizer::Sgd && (o.beta1 || o.beta2 || o.eps))
        throw UsageError(std::string(o.beta1 ? "--beta1" : o.beta2 ? "--beta2" : "--eps") +
                         " applies to --optimizer adam or adamw, not sgd");
    if (s.label_smoothing != 0.0f && net.loss != Loss::SoftmaxCrossEntropy)
        throw UsageError("--label-smoothing needs a softmax cross-entropy loss; model " + net.name + " uses " +
                         loss_name(net.loss));
}

template <class T>
uint64_t hash_of(const std::vector<T>& v) { return fnv1a(v.data(), v.size() * sizeof(T)); }

// What the ranks of an mpirun must share to train together: a rank that differed would hang the
// others or train another model.
std::vector<RankFact> rank_facts(const Network& net, const TrainSettings& s, const TrainOptions& o, const Dataset& train,
                                 const Dataset& test, const std::vector<float>& params, int first_epoch, int first_step) {
    const std::string settings = std::to_string(s.epochs) + " " + std::to_string(s.lr) + " " + std::to_string(s.lr_decay) +
                                 " " + std::to_string(s.momentum) + " " + std::to_string(s.weight_decay) + " " +
                                 std::to_string(s.seed) + " " + schedule_name(s.schedule) + " " +
                                 std::to_string(s.warmup) + " " + std::to_string(s.nesterov) + " " +
                                 std::to_string(s.label_smoothing) + " " + optimizer_name(s.optimizer) + " " +
                                 std::to_string(s.beta1) + " " + std::to_string(s.beta2) + " " + std::to_string(s.eps);
    return {{"the model (network hash)", net.hash(), true},
            {"the number of training images", static_cast<uint64_t>(train.count)},
            {"the training labels (hash)", hash_of(train.labels), true},
            {"the number of test images", static_cast<uint64_t>(test.count)},
            {"the test labels (hash)", hash_of(test.labels), true},
            {"the initial parameters (hash)", hash_of(params), true},
            {"where training starts (epoch)", static_cast<uint64_t>(first_epoch)},
            {"where training starts (step)", static_cast<uint64_t>(first_step)},
            {"the batch size", static_cast<uint64_t>(s.batch)},
            {"--sync-every", static_cast<uint64_t>(o.exchange.sync_every)},
            {"--grad-precision", static_cast<uint64_t>(o.exchange.precision)},
            {"--eval-every", static_cast<uint64_t>(o.eval_every)},
            {"--target-accuracy (in millionths)", static_cast<uint64_t>(std::llround(o.target_accuracy * 1e6))},
            {"the epochs, learning rate, schedule, momentum, weight decay, seed and loss settings (hash)",
             fnv1a(settings.data(), settings.size()), true}};
}
}  // namespace

EvalResult evaluate(Engine& engine, const Network& net, const Dataset& test_set, bool confusion) {
    EvalResult r;
    const size_t classes = static_cast<size_t>(net.classes);
    if (confusion) r.confusion.assign(classes, std::vector<int64_t>(classes, 0));
    engine.take_counters();
    for (int first = 0; first < test_set.count; first += kEvalBatch) {
        const int count = std::min(kEvalBatch, test_set.count - first);
        engine.forward(Split::Test, first, count);
        if (!confusion) continue;
        const std::vector<float> logits = engine.layer_output(net.layers.size() - 1);
        for (int s = 0; s < count; ++s) {
            const float* z = logits.data() + static_cast<size_t>(s) * classes;
            size_t best = 0;  // the first maximum, as the engines count it
            for (size_t k = 1; k < classes; ++k)
                if (z[k] > z[best]) best = k;
            ++r.confusion[test_set.labels[static_cast<size_t>(first + s)]][best];
        }
    }
    const Counters c = engine.take_counters();
    r.samples = static_cast<int>(c.samples);
    r.loss = c.samples ? c.loss_sum / static_cast<double>(c.samples) : 0.0;
    r.accuracy = c.samples ? static_cast<double>(c.correct) / static_cast<double>(c.samples) : 0.0;
    return r;
}

void check_classes(const Network& net, const Dataset& data, const std::string& source) {
    uint8_t top = 0;
    for (uint8_t label : data.labels) top = std::max(top, label);
    if (!data.labels.empty() && top >= net.classes)
        throw Error("model " + net.name + " has " + std::to_string(net.classes) + " outputs, but " + source +
                    " has labels up to " + std::to_string(top));
}

TrainSettings resolve_settings(const TrainOptions& o, const TrainRecipe& recipe) {
    TrainSettings s;
    s.epochs = o.epochs.value_or(recipe.epochs.value_or(s.epochs));
    s.batch = o.batch.value_or(recipe.batch.value_or(s.batch));
    s.lr_decay = o.lr_decay.value_or(recipe.lr_decay.value_or(s.lr_decay));
    s.schedule = o.schedule.value_or(recipe.schedule.value_or(s.schedule));
    s.warmup = o.warmup.value_or(recipe.warmup.value_or(s.warmup));
    s.weight_decay = o.weight_decay.value_or(recipe.weight_decay.value_or(s.weight_decay));
    // The model's lr, momentum and Nesterov are its optimizer's: another one takes its own defaults.
    const Optimizer own = recipe.optimizer.value_or(Optimizer::Sgd);
    s.optimizer = o.optimizer.value_or(own);
    const TrainRecipe given = s.optimizer == own ? recipe : TrainRecipe{};
    s.lr = o.lr.value_or(given.lr.value_or(s.optimizer == Optimizer::Sgd ? s.lr : kAdamLr));
    if (s.optimizer == Optimizer::Sgd) {
        s.momentum = o.momentum.value_or(given.momentum.value_or(s.momentum));
        s.nesterov = o.nesterov || given.nesterov;
    } else {
        s.momentum = 0.0f;
        s.beta1 = o.beta1.value_or(given.beta1.value_or(s.beta1));
        s.beta2 = o.beta2.value_or(given.beta2.value_or(s.beta2));
        s.eps = o.eps.value_or(given.eps.value_or(s.eps));
    }
    s.label_smoothing = o.label_smoothing.value_or(recipe.label_smoothing.value_or(s.label_smoothing));
    s.seed = o.seed;
    return s;
}

TrainResult train(const TrainOptions& o, const TrainObserver& observer) {
    Checkpoint resume;
    Model model;
    if (o.resume_path.empty()) {
        model = open_model(o.model.empty() ? "lenet5" : o.model);
    } else {
        resume = load_checkpoint(o.resume_path);
        model = o.model.empty() ? checkpoint_model(resume, o.resume_path) : open_model(o.model);
        check_network(resume, model.net, o.resume_path);
    }
    const Network& net = model.net;
    TrainSettings opt = resolve_settings(o, model.recipe);
    if (!o.resume_path.empty()) {
        opt.seed = resume.seed;  // the shuffles must continue as they began
        if (static_cast<int>(resume.epoch) >= opt.epochs)
            throw Error(o.resume_path + ": checkpoint has already trained " + std::to_string(resume.epoch) +
                        " epochs; --epochs " + std::to_string(opt.epochs) + " asks for no more");
    }
    check_settings(opt, o, net);
    if (!o.resume_path.empty() && resume.optimizer != opt.optimizer)
        throw Error(o.resume_path + ": checkpoint was trained with " + optimizer_name(resume.optimizer) +
                    ", not " + optimizer_name(opt.optimizer) + " (give --optimizer " +
                    optimizer_name(resume.optimizer) + ")");
    // The engine first: a bad --variant or --device is reported before the data loads.
    EngineRequest request = o.engine;
    request.batch = opt.batch;  // the OpenCL variants' tuned work-group size is per batch
    request.rule = opt.rule();
    auto engine = make_training_engine(net, request, o.exchange);
    if (o.kernel_profile) engine->profile_kernels();
    const std::string dir = resolve_data_dir(o.data_dir, o.dataset);
    const Dataset train_set = load_mnist(dir, Split::Train, o.train_limit);
    const Dataset test_set = load_mnist(dir, Split::Test, o.test_limit);
    check_classes(net, train_set, dir);
    check_classes(net, test_set, dir);
    engine->upload(Split::Train, train_set);
    engine->upload(Split::Test, test_set);
    int first_epoch = 1, first_step = 0;
    std::vector<float> initial;
    if (o.resume_path.empty()) {
        const bool file_weights = !model.weights.empty() && !o.init_fresh;
        initial = file_weights ? model.weights : init_params(net, opt.seed);
    } else {
        initial = resume.params;
        first_epoch = static_cast<int>(resume.epoch) + 1;
        first_step = static_cast<int>(resume.step);
    }
    if (mpi_world().size > 1)  // before the first exchange
        check_ranks_agree(rank_facts(net, opt, o, train_set, test_set, initial, first_epoch, first_step));
    engine->set_params(initial);
    if (!o.resume_path.empty()) {
        engine->set_momentum_buffer(resume.velocity);
        if (opt.optimizer != Optimizer::Sgd)
            engine->set_adam_state({resume.second, static_cast<int64_t>(resume.adam_steps)});
    }

    TrainResult result;
    result.info = {net.name,      opt, engine->variant(), engine->device(), engine->platform(), train_set.count,
                   test_set.count, first_epoch};
    if (observer.on_start) observer.on_start(result.info);

    auto save = [&](int epochs_done, int steps_done) {
        if (o.save_path.empty() || !mpi_world().root()) return;
        Checkpoint c;
        c.network_hash = net.hash();
        c.network_description = net.describe();
        c.model_text = model.text;
        c.epoch = static_cast<uint32_t>(epochs_done);
        c.step = static_cast<uint32_t>(steps_done);
        c.seed = opt.seed;
        c.rng_state = epoch_rng_state(opt.seed, epochs_done + 1);
        c.batch = static_cast<uint32_t>(opt.batch);
        c.lr = opt.lr;
        c.momentum = opt.momentum;
        c.params = engine->params();
        c.velocity = engine->momentum_buffer();
        if (opt.optimizer != Optimizer::Sgd) {
            AdamState a = engine->adam_state();
            c.optimizer = opt.optimizer;
            c.adam_steps = static_cast<uint64_t>(a.steps);
            c.second = std::move(a.second);
        }
        save_checkpoint(o.save_path, c);
    };

    const int steps = (train_set.count + opt.batch - 1) / opt.batch;
    const int check_every = std::max(kCheckEvery, kCheckSamples / opt.batch);
    if (first_step >= steps) {  // interrupted after the last step of an epoch
        ++first_epoch;
        first_step = 0;
    }
    const RateSchedule rates = opt.rates();
    const auto run_start = Clock::now();
    double train_ms = 0;  // this run's training steps, evaluations and checkpoints apart
    if (o.target_accuracy > 0) result.time_to_accuracy = TimeToAccuracy{o.target_accuracy, false, {}, 0.0};

    // A test pass after `done` steps (counted from epoch 1), recorded; true when it meets the target.
    // Under mpirun the accuracy is of correct answers summed over the ranks, the same number on each,
    // so every rank stops at the same step.
    auto evaluate_at = [&](int64_t done, EpochResult& r) {
        const auto t1 = Clock::now();
        const EvalResult test = evaluate(*engine, net, test_set, false);
        r.eval_ms += ms_since(t1);
        r.test_loss = test.loss;
        r.test_accuracy = test.accuracy;
        engine->take_times();  // the test pass is not part of the epoch's phases
        engine->take_kernel_times();
        engine->take_worker_times();
        const Evaluation e{done, static_cast<double>(done) / steps, test.loss, test.accuracy, train_ms / 1e3,
                           ms_since(run_start) / 1e3};
        result.evaluations.push_back(e);
        TimeToAccuracy* tta = result.time_to_accuracy ? &*result.time_to_accuracy : nullptr;
        if (!tta) return false;
        tta->at = e;
        tta->best_accuracy = std::max(tta->best_accuracy, test.accuracy);
        tta->reached = test.accuracy >= tta->target;
        return tta->reached;
    };

    for (int epoch = first_epoch; epoch <= opt.epochs; ++epoch) {
        engine->take_times();
        engine->take_kernel_times();
        engine->take_counters();
        EpochResult r;
        r.epoch = epoch;
        auto t0 = Clock::now();  // the start of the epoch's current run of training steps
        // Ends a run of training steps: its time and phases join the epoch's.
        auto pause = [&] {
            engine->sync_params();  // local SGD: the epoch ends (or is evaluated) on one set of parameters
            const double ms = ms_since(t0);
            r.wall_ms += ms;
            train_ms += ms;
            add_times(*engine, r);
        };
        Rng rng(epoch_rng_state(opt.seed, epoch));
        engine->set_order(shuffled_order(train_set.count, rng));
        Counters total;
        auto take_checked = [&](int step) {
            const Counters c = engine->take_counters();
            if (!std::isfinite(c.loss_sum))
                throw Error("training diverged in epoch " + std::to_string(epoch) + " by step " + std::to_string(step + 1) +
                            " (the loss is not finite); the last checkpoint is kept" + "; try a smaller --lr");
            add(total, c);
        };
        auto finish = [&](int steps_run) {
            r.steps = steps_run;
            r.train_loss = total.loss_sum / static_cast<double>(total.samples);
            r.train_accuracy = static_cast<double>(total.correct) / static_cast<double>(total.samples);
        };
        const int from = epoch == first_epoch ? first_step : 0;
        for (int step = from; step < steps; ++step) {
            const int first = step * opt.batch;
            const int64_t done = static_cast<int64_t>(epoch - 1) * steps + step + 1;  // with this one
            engine->forward(Split::Train, first, std::min(opt.batch, train_set.count - first));
            engine->backward();
            engine->update(scheduled_lr(rates, done - 1, steps, opt.epochs), opt.momentum, opt.weight_decay);
            if ((step + 1) % check_every == 0 || step + 1 == steps) take_checked(step);
            if (observer.on_step) observer.on_step(epoch, step + 1, steps);
            if (const int sig = observer.stop_requested ? observer.stop_requested() : 0) {
                engine->take_counters();
                engine->sync_params();
                save(epoch - 1, step + 1);
                result.stopped_by = sig;
                result.stopped_epoch = epoch;
                result.stopped_step = step + 1;
                result.params = engine->params();
                return result;
            }
            // --eval-every inside the epoch (its last step is evaluated below); a run that meets the
            // target here ends with this part of the epoch, saved where it stopped.
            if (o.eval_every > 0 && done % o.eval_every == 0 && step + 1 < steps) {
                take_checked(step);
                pause();
                const bool reached = evaluate_at(done, r);
                if (reached) {
                    finish(step + 1 - from);
                    save(epoch - 1, step + 1);
                    result.epochs.push_back(r);
                    if (observer.on_epoch) observer.on_epoch(r);
                    result.params = engine->params();
                    return result;
                }
                t0 = Clock::now();
            }
        }
        pause();
        finish(steps - from);
        save(epoch, 0);
        const bool reached = evaluate_at(static_cast<int64_t>(epoch) * steps, r);
        result.epochs.push_back(r);
        if (observer.on_epoch) observer.on_epoch(r);
        if (reached) break;
    }
    result.params = engine->params();
    return result;
}

}  // namespace lenet5
