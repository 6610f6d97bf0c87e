#include "train/grad_exchange.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "common/error.h"
#include "common/for_blocks.h"
#include "train/bf16.h"

namespace lenet5 {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

float as_bf16(float x) { return from_bf16(to_bf16(x)); }

}  // namespace

GradPrecision parse_grad_precision(const std::string& text) {
    if (text == "fp32") return GradPrecision::Fp32;
    if (text == "bf16") return GradPrecision::Bf16;
    throw UsageError("--grad-precision: '" + text + "' is not fp32 or bf16");
}

GradExchange::GradExchange(const Network& net, std::vector<ExchangePort*> ports, Collective* ranks,
                           GradPrecision precision)
    : bucket_of_(net.layers.size(), 0), ports_(std::move(ports)), ranks_(ranks), precision_(precision) {
    if (ports_.empty()) throw Error("a gradient exchange needs at least one engine");
    for (size_t k = net.layers.size(); k-- > 0;) {
        const LayerSpec& l = net.layers[k];
        if (l.weight_count + l.bias_count == 0) continue;
        bucket_of_[k] = buckets_.size();
        buckets_.push_back({k, l.weight_offset, l.weight_count + l.bias_count});  // the biases follow the weights
    }
    requests_.assign(buckets_.size(), -1);
    pending_.assign(buckets_.size(), 0);
    if (ranks_ && precision_ == GradPrecision::Bf16) {
        send_.resize(net.param_count);
        received_.resize(net.param_count * static_cast<size_t>(ranks_->size()));
    }
}

void GradExchange::begin(FlatBuffer which, std::vector<float> weights, bool inline_driver) {
    which_ = which;
    weights_ = std::move(weights);
    contributors_.clear();
    for (size_t i = 0; i < ports_.size(); ++i)
        if (weights_.at(i) != 0.0f) contributors_.push_back(i);
    if (inline_driver && contributors_.size() > 1) throw Error("an inline exchange has one contributor");
    root_ = contributors_.empty() ? 0 : contributors_.front();
    bf16_ = precision_ == GradPrecision::Bf16 && which == FlatBuffer::Gradients;
    inline_ = inline_driver;
    next_ = 0;
    failed_ = false;
    std::fill(pending_.begin(), pending_.end(), contributors_.size());
    std::fill(requests_.begin(), requests_.end(), -1);
}

void GradExchange::backward(size_t i, Engine& engine) {
    ExchangePort& port = *ports_[i];
    // Only the driving thread may call MPI: a contributor on a thread of its own just announces.
    auto progress = [this] {
        if (inline_ && ranks_) ranks_->progress();
    };
    const bool announces = port.listen({[this](size_t layer) { announce(layer); }, progress});
    try {
        engine.backward();
    } catch (...) {
        port.listen({});
        throw;
    }
    port.listen({});
    if (!announces) contribute(i);
}

// Every read is enqueued before the first wait, so the device moves the lower buckets while the
// upper ones are summed and sent.
void GradExchange::contribute(size_t i) {
    fetch_all(i);
    announce_fetched(i);
}

void GradExchange::fetch_all(size_t i) {
    for (const Bucket& b : buckets_) ports_[i]->fetch(which_, b.layer);
}

void GradExchange::announce_fetched(size_t i) {
    for (const Bucket& b : buckets_) {
        ports_[i]->fetched(which_, b.layer);
        announce(b.layer);
    }
}

void GradExchange::announce(size_t layer) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        --pending_[bucket_of_[layer]];
    }
    changed_.notify_all();
    if (inline_) drive(false);
}

void GradExchange::abandon() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        failed_ = true;
    }
    changed_.notify_all();
}

bool GradExchange::drive(bool wait) {
    while (next_ < buckets_.size()) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            if (wait) changed_.wait(lock, [&] { return failed_ || pending_[next_] == 0; });
            if (failed_) return false;
            if (pending_[next_] > 0) return true;
        }
        start(next_++);
    }
    return true;
}

// The contributions summed in worker order, each weighed: into = w0 g0 + w1 g1 + ... (bf16: each
// term rounded first, when there are several). `into` is the root's own view, so the first term
// is written over its own values. The sum is also written into each of `copies`.
void GradExchange::sum_locally(const Bucket& b, float* into, const std::vector<float*>& copies) {
    std::vector<const float*> terms;
    std::vector<float> weights;
    for (size_t c = 1; c < contributors_.size(); ++c) {
        terms.push_back(ports_[contributors_[c]]->flat(which_) + b.offset);
        weights.push_back(weights_[contributors_[c]]);
    }
    const float w0 = contributors_.empty() ? 0.0f : weights_[root_];
    const bool none = contributors_.empty();  // a rank with no samples this step adds nothing
    const bool round = bf16_ && contributors_.size() > 1;
    for_blocks(b.count, [&](size_t begin, size_t end) {
        float* x = into + begin;
        const size_t n = end - begin;
        if (none)
            std::fill_n(x, n, 0.0f);
        else if (round)
            for (size_t k = 0; k < n; ++k) x[k] = as_bf16(w0 * x[k]);
        else if (w0 != 1.0f)
            for (size_t k = 0; k < n; ++k) x[k] = w0 * x[k];
        for (size_t c = 0; c < terms.size(); ++c) {
            const float w = weights[c];
            const float* g = terms[c] + begin;
            if (round)
                for (size_t k = 0; k < n; ++k) x[k] += as_bf16(w * g[k]);
            else
                for (size_t k = 0; k < n; ++k) x[k] += w * g[k];
        }
        for (float* copy : copies) std::memcpy(copy + begin, x, n * sizeof(float));
    });
}

// The root's view holding a bucket's result, copied into every other port's view.
std::vector<float*> GradExchange::other_views(const Bucket& b) {
    std::vector<float*> views;
    for (size_t i = 0; i < ports_.size(); ++i)
        if (i != root_) views.push_back(ports_[i]->flat(which_) + b.offset);
    return views;
}

void GradExchange::start(size_t index) {
    const auto t0 = Clock::now();
    const Bucket& b = buckets_[index];
    float* sum = ports_[root_]->flat(which_) + b.offset;
    // One contributor's fp32 values go to the ranks weighed on the way (no pass of their own).
    const bool weigh_on_the_way = ranks_ && !bf16_ && contributors_.size() == 1;
    // Alone, the local sum is the result: every view gets it in the same pass.
    if (!weigh_on_the_way) sum_locally(b, sum, ranks_ ? std::vector<float*>{} : other_views(b));
    if (ranks_) {
        if (bf16_) {
            uint16_t* mine = send_.data() + b.offset;
            for_blocks(b.count, [&](size_t begin, size_t end) {
                for (size_t k = begin; k < end; ++k) mine[k] = to_bf16(sum[k]);
            });
            requests_[index] = ranks_->start_gather(mine, received_.data() + b.offset * static_cast<size_t>(ranks_->size()), b.count);
        } else {
            requests_[index] = ranks_->start_sum(sum, b.count, weigh_on_the_way ? weights_[root_] : 1.0f);
        }
        ranks_->progress();
    }
    ms_ += ms_since(t0);
}

void GradExchange::finish() {
    if (!drive(true)) throw Error("a worker failed during the gradient exchange");
    const auto t0 = Clock::now();
    for (size_t index = 0; index < buckets_.size(); ++index) {
        const Bucket& b = buckets_[index];
        if (ranks_) {  // the ranks' result, into the root's view and from there into the others
            ranks_->wait(requests_[index]);
            float* sum = ports_[root_]->flat(which_) + b.offset;
            const std::vector<float*> copies = other_views(b);
            const size_t n = static_cast<size_t>(ranks_->size());
            const uint16_t* all = received_.data() + b.offset * n;
            for_blocks(b.count, [&](size_t begin, size_t end) {
                if (bf16_) {  // every rank's, in rank order, summed in fp32
                    for (size_t k = begin; k < end; ++k) sum[k] = from_bf16(all[k]);
                    for (size_t r = 1; r < n; ++r)
                        for (size_t k = begin; k < end; ++k) sum[k] += from_bf16(all[r * b.count + k]);
                }
                for (float* copy : copies) std::memcpy(copy + begin, sum + begin, (end - begin) * sizeof(float));
            });
        }
        for (ExchangePort* p : ports_) p->store(which_, b.layer);
    }
    for (ExchangePort* p : ports_) p->stored(which_);
    ms_ += ms_since(t0);
}

void GradExchange::run(FlatBuffer which, std::vector<float> weights) {
    begin(which, std::move(weights), false);
    // Every engine's reads first, so that several devices move their buckets at the same time.
    for (size_t i : contributors_) fetch_all(i);
    for (size_t i : contributors_) announce_fetched(i);
    finish();
}

double GradExchange::take_ms() { return std::exchange(ms_, 0.0); }

}  // namespace lenet5
