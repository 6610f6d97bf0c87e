#include "train/worker_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <sstream>
#include <utility>

#include "common/error.h"

namespace lenet5 {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

constexpr int kMeasureRuns = 3;  // timed forward + backward runs per worker when measuring shares

std::vector<std::string> split_list(const std::string& text, char sep) {
    std::vector<std::string> parts;
    std::string part;
    std::istringstream in(text);
    while (std::getline(in, part, sep)) parts.push_back(part);
    if (!text.empty() && text.back() == sep) parts.emplace_back();
    return parts;
}

bool is_number(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

}  // namespace

std::vector<WorkerSpec> parse_workers(const std::string& spec) {
    const std::string flag = "--workers";
    std::vector<WorkerSpec> workers;
    for (const std::string& item : split_list(spec, ',')) {
        if (item.empty()) throw UsageError(flag + ": '" + spec + "' has an empty item");
        WorkerSpec w;
        std::string body = item;
        if (const size_t at = body.find('@'); at != std::string::npos) {
            const std::string share = body.substr(at + 1);
            char* end = nullptr;
            w.share = std::strtod(share.c_str(), &end);
            if (share.empty() || *end != '\0' || !std::isfinite(w.share) || w.share <= 0)
                throw UsageError(flag + ": the share '" + share + "' of '" + item + "' is not a positive number");
            body = body.substr(0, at);
        }
        const size_t colon = body.find(':');
        const std::string device = colon == std::string::npos ? (is_number(body) ? body : "") : body.substr(0, colon);
        w.variant = colon == std::string::npos ? (is_number(body) ? "gpu-local" : body) : body.substr(colon + 1);
        if (!device.empty()) {
            if (!is_number(device) || device.size() > 4)
                throw UsageError(flag + ": '" + device + "' in '" + item + "' is not a device index");
            w.device = std::atoi(device.c_str());
        }
        if (w.variant.empty()) throw UsageError(flag + ": '" + item + "' names no variant");
        if (w.variant == "auto") throw UsageError(flag + ": name each worker's variant ('auto' is for one device)");
        workers.push_back(w);
    }
    if (workers.empty()) throw UsageError(flag + " needs at least one worker");
    const auto with_share = std::count_if(workers.begin(), workers.end(), [](const WorkerSpec& w) { return w.share > 0; });
    if (with_share != 0 && with_share != static_cast<long>(workers.size()))
        throw UsageError(flag + ": give every worker a share (@S) or none");
    return workers;
}

std::vector<int> split_counts(int count, const std::vector<double>& shares) {
    // Largest remainder: each worker floor(count * share), the rest to the largest fractions.
    std::vector<int> n(shares.size());
    std::vector<std::pair<double, size_t>> rest;
    int given = 0;
    for (size_t i = 0; i < shares.size(); ++i) {
        const double exact = count * shares[i];
        n[i] = static_cast<int>(std::floor(exact));
        given += n[i];
        rest.push_back({exact - n[i], i});
    }
    std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t k = 0; given < count; ++k, ++given) ++n[rest[k % rest.size()].second];
    return n;
}

WorkerEngine::WorkerEngine(const Network& net, std::vector<std::unique_ptr<Engine>> workers, std::vector<double> shares,
                           int batch, ExchangeOptions options, std::unique_ptr<Collective> ranks)
    : net_(net),
      workers_(std::move(workers)),
      shares_(std::move(shares)),
      batch_(batch),
      options_(options),
      ranks_(std::move(ranks)) {
    if (workers_.empty()) throw Error("--workers needs at least one worker");
    for (const auto& w : workers_)
        if (!w->exchange_port()) throw Error("a " + w->variant() + " engine cannot be a worker");
    given_ = !shares_.empty();
    measured_ = given_ || workers_.size() == 1;
    if (shares_.empty()) shares_.assign(workers_.size(), 1.0 / static_cast<double>(workers_.size()));
    const double total = std::accumulate(shares_.begin(), shares_.end(), 0.0);
    for (double& s : shares_) s /= total;
    slice_.assign(workers_.size(), 0);
    join_exchange();
}

std::string WorkerEngine::variant() const {
    if (workers_.size() == 1) return workers_[0]->variant();
    std::string v = "workers(";
    for (size_t i = 0; i < workers_.size(); ++i) v += (i ? "," : "") + workers_[i]->variant();
    return v + ")";
}

std::string WorkerEngine::device() const {
    std::ostringstream s;
    if (workers_.size() == 1) {
        s << workers_[0]->device();
    } else {
        for (size_t i = 0; i < workers_.size(); ++i)
            s << (i ? " + " : "") << workers_[i]->variant() << " on " << workers_[i]->device() << " "
              << (shares_[i] > 0 ? std::to_string(std::lround(100 * shares_[i])) + "%" : "idle (splitting did not pay)");
        s << (given_ ? " (shares given)" : measured_ ? " (shares measured)" : " (shares measured when the training set is uploaded)");
    }
    if (ranks_) s << " (rank " << ranks_->rank() << " of " << ranks_->size() << ")";
    return s.str();
}

std::string WorkerEngine::platform() const {
    std::string p;
    for (size_t i = 0; i < workers_.size(); ++i) p += (i ? " + " : "") + workers_[i]->platform();
    return p;
}

int WorkerEngine::busy() const {
    return static_cast<int>(std::count_if(slice_.begin(), slice_.end(), [](int n) { return n > 0; }));
}

void WorkerEngine::each_busy(const std::function<void(size_t)>& fn, const std::function<void()>& meanwhile) {
    if (busy() <= 1) {
        for (size_t i = 0; i < workers_.size(); ++i)
            if (slice_[i]) fn(i);  // one worker: no thread to start
        if (meanwhile) meanwhile();
        return;
    }
    std::vector<size_t> which;
    for (size_t i = 0; i < workers_.size(); ++i)
        if (slice_[i]) which.push_back(i);
    if (!threads_) threads_ = std::make_unique<WorkerThreads>(workers_.size());
    threads_->run(which, fn, meanwhile);
}

void WorkerEngine::join_exchange() {
    active_.clear();
    std::vector<ExchangePort*> ports;
    for (size_t i = 0; i < workers_.size(); ++i)
        if (shares_[i] > 0) {
            active_.push_back(i);
            ports.push_back(workers_[i]->exchange_port());
        }
    exchange_ = std::make_unique<GradExchange>(net_, std::move(ports), ranks_.get(), options_.precision);
}

size_t WorkerEngine::port_of(size_t worker) const {
    return static_cast<size_t>(std::find(active_.begin(), active_.end(), worker) - active_.begin());
}

void WorkerEngine::upload(Split split, const Dataset& data) {
    for (auto& w : workers_) w->upload(split, data);
    if (split == Split::Train) {
        train_count_ = data.count;
        if (!measured_) measure_shares();  // now, so that the run's first line shows the split
    }
}

void WorkerEngine::set_params(const std::vector<float>& params) {
    for (auto& w : workers_) w->set_params(params);
    since_sync_ = 0;
}

void WorkerEngine::set_momentum_buffer(const std::vector<float>& velocity) {
    for (auto& w : workers_) w->set_momentum_buffer(velocity);
}

void WorkerEngine::set_adam_state(const AdamState& state) {
    for (auto& w : workers_) w->set_adam_state(state);
}

void WorkerEngine::set_order(const std::vector<int32_t>& order) {
    for (auto& w : workers_) w->set_order(order);
}

// Milliseconds of forward + backward + reading the gradients of `count` samples on worker i
// alone (the median of kMeasureRuns after a warm-up). Parameters are untouched (no update).
double WorkerEngine::time_alone(size_t i, int count) {
    std::vector<double> ms;
    for (int run = 0; run <= kMeasureRuns; ++run) {  // run 0 warms up
        const auto t0 = Clock::now();
        workers_[i]->forward(Split::Train, 0, count);
        workers_[i]->backward();
        workers_[i]->gradients();  // waits for the device
        if (run) ms.push_back(ms_since(t0));
    }
    workers_[i]->take_counters();
    workers_[i]->take_times();
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Shares in proportion to each worker's samples per millisecond on a whole batch. A worker's
// step also has a fixed cost (launches, reading every weight for its gradients, the update), so
// the split is then timed as it would run (each worker on its slice, plus its share of the
// exchange among them): if that is not faster than the fastest worker alone, that worker takes
// every sample and the others idle. The trainer sets the real order and parameters afterwards.
void WorkerEngine::measure_shares() {
    const int count = std::min(batch_, train_count_);
    std::vector<int32_t> order(static_cast<size_t>(train_count_));
    std::iota(order.begin(), order.end(), 0);
    std::vector<double> alone(workers_.size());
    for (size_t i = 0; i < workers_.size(); ++i) {
        workers_[i]->set_order(order);
        alone[i] = time_alone(i, count);
    }
    double total = 0;
    for (double ms : alone) total += count / std::max(ms, 1e-6);
    for (size_t i = 0; i < workers_.size(); ++i) shares_[i] = count / std::max(alone[i], 1e-6) / total;
    const size_t fastest = static_cast<size_t>(std::min_element(alone.begin(), alone.end()) - alone.begin());
    const std::vector<int> n = split_counts(count, shares_);
    double split_ms = 0;
    std::vector<ExchangePort*> ports;
    std::vector<float> weights;
    for (size_t i = 0; i < workers_.size(); ++i) {
        if (!n[i]) continue;
        split_ms = std::max(split_ms, time_alone(i, n[i]));
        ports.push_back(workers_[i]->exchange_port());
        weights.push_back(static_cast<float>(n[i]) / static_cast<float>(count));
    }
    // What the split adds: the exchange among the workers, every step or (local SGD) every K steps
    // as a parameter average of the same bytes. Timed the second time: the first makes the pinned
    // mirrors.
    GradExchange exchange(net_, ports, nullptr, options_.precision);
    exchange.run(FlatBuffer::Gradients, weights);
    const auto t0 = Clock::now();
    exchange.run(FlatBuffer::Gradients, weights);
    const double exchange_ms = ms_since(t0) / options_.sync_every;
    if (split_ms + exchange_ms >= alone[fastest])
        for (size_t i = 0; i < workers_.size(); ++i) shares_[i] = i == fastest ? 1.0 : 0.0;
    measured_ = true;
    join_exchange();
}

void WorkerEngine::forward(Split split, int first, int count) {
    int begin = first, mine = count;
    if (ranks_) {  // this rank's part of the batch
        const auto n = split_counts(count, std::vector<double>(static_cast<size_t>(ranks_->size()), 1.0 / ranks_->size()));
        begin = std::accumulate(n.begin(), n.begin() + ranks_->rank(), first);
        mine = n[static_cast<size_t>(ranks_->rank())];
    }
    const std::vector<int> n = split_counts(mine, shares_);
    std::vector<int> from(n.size(), begin);
    for (size_t i = 1; i < n.size(); ++i) from[i] = from[i - 1] + n[i - 1];
    slice_ = n;
    count_ = count;
    each_busy([&](size_t i) { workers_[i]->forward(split, from[i], n[i]); });
}

// Each worker's gradients are of the mean loss over its slice: the batch's mean weighs them by
// their slices. Without anyone to exchange with (one active worker, no ranks), or with local SGD,
// each worker keeps its own.
void WorkerEngine::backward() {
    if (options_.sync_every > 1 || (active_.size() == 1 && !ranks_)) {
        each_busy([&](size_t i) { workers_[i]->backward(); });
        return;
    }
    std::vector<float> weighed;  // per active worker: its slice over the batch, in float
    for (size_t i : active_) weighed.push_back(static_cast<float>(slice_[i]) / static_cast<float>(count_));
    const bool alone = busy() <= 1;
    exchange_->begin(FlatBuffer::Gradients, weighed, alone);
    each_busy(
        [&](size_t i) {
            try {
                exchange_->backward(port_of(i), *workers_[i]);
            } catch (...) {
                exchange_->abandon();
                throw;
            }
        },
        [&] {
            if (!alone) exchange_->drive(true);
        });
    exchange_->finish();
    reduce_ms_ += exchange_->take_ms();
}

std::vector<float> WorkerEngine::gradients() { return first_active().gradients(); }

void WorkerEngine::set_gradients(const std::vector<float>& gradients) {
    for (size_t i : active_) workers_[i]->set_gradients(gradients);
}

// A worker with no share (it did not pay) is left out for good, its parameters too. With local
// SGD a worker without samples in this step has no gradients of its own, and does not step.
void WorkerEngine::update(float lr, float momentum, float weight_decay) {
    for (size_t i : active_)
        if (options_.sync_every == 1 || slice_[i]) workers_[i]->update(lr, momentum, weight_decay);
    if (options_.sync_every > 1 && ++since_sync_ == options_.sync_every) sync_params();
}

// The parameters averaged over every worker of every rank, each weighed by its share of the
// batch (the momentum stays each worker's own).
void WorkerEngine::sync_params() {
    if (since_sync_ == 0) return;
    std::vector<float> w;
    for (size_t i : active_) w.push_back(static_cast<float>(shares_[i] / (ranks_ ? ranks_->size() : 1)));
    exchange_->run(FlatBuffer::Params, w);
    reduce_ms_ += exchange_->take_ms();
    since_sync_ = 0;
}

Engine& WorkerEngine::first_active() { return *workers_[active_.empty() ? 0 : active_.front()]; }

Counters WorkerEngine::take_counters() {
    Counters total;
    for (auto& w : workers_) {
        const Counters c = w->take_counters();
        total.loss_sum += c.loss_sum;
        total.correct += c.correct;
        total.samples += c.samples;
    }
    return ranks_ ? ranks_->sum(total) : total;
}

// The phases as the slowest worker took them (they run at the same time), and the exchange;
// each worker's own times are kept for take_worker_times.
PhaseTimes WorkerEngine::take_times() {
    PhaseTimes t;
    worker_times_.clear();
    for (size_t i = 0; i < workers_.size(); ++i) {
        const PhaseTimes p = workers_[i]->take_times();
        t.forward_ms = std::max(t.forward_ms, p.forward_ms);
        t.backward_ms = std::max(t.backward_ms, p.backward_ms);
        t.update_ms = std::max(t.update_ms, p.update_ms);
        t.transfer_ms += p.transfer_ms;
        if (workers_.size() > 1) worker_times_.push_back({"worker " + std::to_string(i) + " " + workers_[i]->variant(), p});
    }
    t.reduce_ms = std::exchange(reduce_ms_, 0.0);
    return t;
}

std::vector<std::pair<std::string, PhaseTimes>> WorkerEngine::take_worker_times() {
    return std::exchange(worker_times_, {});
}

void WorkerEngine::profile_kernels() {
    for (auto& w : workers_) w->profile_kernels();
}

std::vector<KernelTime> WorkerEngine::take_kernel_times() {
    std::vector<KernelTime> all;
    for (auto& w : workers_)
        for (const KernelTime& k : w->take_kernel_times()) add_kernel_time(all, k.name, k.launches, k.ms);
    return all;
}

std::vector<float> WorkerEngine::layer_output(size_t layer) {
    std::vector<float> out;
    for (size_t i = 0; i < workers_.size(); ++i) {
        if (!slice_[i]) continue;
        const std::vector<float> part = workers_[i]->layer_output(layer);
        out.insert(out.end(), part.begin(), part.end());
    }
    return ranks_ ? ranks_->gather(out) : out;
}

}  // namespace lenet5
