#include "train/worker_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <sstream>
#include <thread>
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

WorkerEngine::WorkerEngine(std::vector<std::unique_ptr<Engine>> workers, std::vector<double> shares, int batch)
    : workers_(std::move(workers)), shares_(std::move(shares)), batch_(batch) {
    if (workers_.empty()) throw Error("--workers needs at least one worker");
    given_ = measured_ = !shares_.empty();
    if (shares_.empty()) shares_.assign(workers_.size(), 1.0 / static_cast<double>(workers_.size()));
    const double total = std::accumulate(shares_.begin(), shares_.end(), 0.0);
    for (double& s : shares_) s /= total;
    slice_.assign(workers_.size(), 0);
}

std::string WorkerEngine::variant() const {
    std::string v = "workers(";
    for (size_t i = 0; i < workers_.size(); ++i) v += (i ? "," : "") + workers_[i]->variant();
    return v + ")";
}

std::string WorkerEngine::device() const {
    std::ostringstream s;
    for (size_t i = 0; i < workers_.size(); ++i)
        s << (i ? " + " : "") << workers_[i]->variant() << " on " << workers_[i]->device() << " "
          << (shares_[i] > 0 ? std::to_string(std::lround(100 * shares_[i])) + "%" : "idle (splitting did not pay)");
    s << (given_ ? " (shares given)" : measured_ ? " (shares measured)" : " (shares measured when the training set is uploaded)");
    return s.str();
}

std::string WorkerEngine::platform() const {
    std::string p;
    for (size_t i = 0; i < workers_.size(); ++i) p += (i ? " + " : "") + workers_[i]->platform();
    return p;
}

bool WorkerEngine::one_busy() const {
    return std::count_if(slice_.begin(), slice_.end(), [](int n) { return n > 0; }) == 1;
}

template <class F>
void WorkerEngine::each_busy(F fn) {
    if (one_busy()) {
        for (size_t i = 0; i < workers_.size(); ++i)
            if (slice_[i]) fn(i);  // one worker: no thread to start
        return;
    }
    std::vector<std::exception_ptr> errors(workers_.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < workers_.size(); ++i) {
        if (!slice_[i]) continue;
        threads.emplace_back([&, i] {
            try {
                fn(i);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
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
}

void WorkerEngine::set_momentum_buffer(const std::vector<float>& velocity) {
    for (auto& w : workers_) w->set_momentum_buffer(velocity);
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
// the split is then timed as it would run (each worker on its slice, plus summing and sending
// back the gradients): if that is not faster than the fastest worker alone, that worker takes
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
    double split_ms = 0, exchange_ms = 0;
    for (size_t i = 0; i < workers_.size(); ++i) {
        if (!n[i]) continue;
        split_ms = std::max(split_ms, time_alone(i, n[i]));
        const auto t0 = Clock::now();
        workers_[i]->set_gradients(workers_[i]->gradients());  // what summing adds: a read and a write
        workers_[i]->params();                                 // waits for the write
        exchange_ms += ms_since(t0);
    }
    if (split_ms + exchange_ms >= alone[fastest])
        for (size_t i = 0; i < workers_.size(); ++i) shares_[i] = i == fastest ? 1.0 : 0.0;
    measured_ = true;
}

void WorkerEngine::forward(Split split, int first, int count) {
    const std::vector<int> n = split_counts(count, shares_);
    std::vector<int> begin(n.size(), first);
    for (size_t i = 1; i < n.size(); ++i) begin[i] = begin[i - 1] + n[i - 1];
    slice_ = n;
    each_busy([&](size_t i) { workers_[i]->forward(split, begin[i], n[i]); });
}

void WorkerEngine::backward() {
    each_busy([&](size_t i) { workers_[i]->backward(); });
    if (one_busy()) {
        sum_.clear();  // one worker took the whole batch: its gradients are the batch's already
        return;
    }
    // Each worker's gradients are of the mean loss over its slice: the batch's mean weighs
    // them by their slices, summed in worker order.
    std::vector<std::vector<float>> g(workers_.size());
    each_busy([&](size_t i) { g[i] = workers_[i]->gradients(); });
    const auto t0 = Clock::now();
    const int total = std::accumulate(slice_.begin(), slice_.end(), 0);
    size_t size = 0;
    for (const auto& v : g) size = std::max(size, v.size());  // an idle worker's entry is empty
    sum_.assign(size, 0.0f);
    for (size_t i = 0; i < workers_.size(); ++i) {
        if (!slice_[i]) continue;
        const float weight = static_cast<float>(slice_[i]) / static_cast<float>(total);
        for (size_t k = 0; k < g[i].size(); ++k) sum_[k] += weight * g[i][k];
    }
    reduce_ms_ += ms_since(t0);
    set_gradients(sum_);
}

std::vector<float> WorkerEngine::gradients() {
    if (!sum_.empty()) return sum_;
    for (size_t i = 0; i < workers_.size(); ++i)
        if (slice_[i]) return workers_[i]->gradients();
    return sum_;
}

void WorkerEngine::set_gradients(const std::vector<float>& gradients) {
    sum_ = gradients;
    for (size_t i = 0; i < workers_.size(); ++i)
        if (shares_[i] > 0) workers_[i]->set_gradients(gradients);
}

// A worker with no share (it did not pay) is left out for good, its parameters too.
void WorkerEngine::update(float lr, float momentum, float weight_decay) {
    for (size_t i = 0; i < workers_.size(); ++i)
        if (shares_[i] > 0) workers_[i]->update(lr, momentum, weight_decay);
}

Engine& WorkerEngine::first_active() {
    for (size_t i = 0; i < workers_.size(); ++i)
        if (shares_[i] > 0) return *workers_[i];
    return *workers_[0];
}

Counters WorkerEngine::take_counters() {
    Counters total;
    for (auto& w : workers_) {
        const Counters c = w->take_counters();
        total.loss_sum += c.loss_sum;
        total.correct += c.correct;
        total.samples += c.samples;
    }
    return total;
}

// The phases as the slowest worker took them (they run at the same time), and the summing;
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
        worker_times_.push_back({"worker " + std::to_string(i) + " " + workers_[i]->variant(), p});
    }
    t.reduce_ms = reduce_ms_;
    reduce_ms_ = 0;
    return t;
}

std::vector<std::pair<std::string, PhaseTimes>> WorkerEngine::take_worker_times() {
    return std::exchange(worker_times_, {});
}

std::vector<float> WorkerEngine::layer_output(size_t layer) {
    std::vector<float> out;
    for (size_t i = 0; i < workers_.size(); ++i) {
        if (!slice_[i]) continue;
        const std::vector<float> part = workers_[i]->layer_output(layer);
        out.insert(out.end(), part.begin(), part.end());
    }
    return out;
}

}  // namespace lenet5
