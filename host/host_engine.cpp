#include "host_engine.h"

#include <algorithm>

#include "error.h"
#include "preprocess.h"

namespace lenet5 {

HostEngine::HostEngine(Network net, std::string variant, const HostOps& ops, int threads)
    : net_(std::move(net)), variant_(std::move(variant)), ops_(ops), threads_(std::max(1, threads)) {
    params_.assign(net_.param_count, 0.0f);
    velocity_.assign(net_.param_count, 0.0f);
    grads_.assign(net_.param_count, 0.0f);
    if (threads_ > 1) thread_grads_.assign(static_cast<size_t>(threads_ - 1), std::vector<float>(net_.param_count));
    int largest = net_.input.size();
    for (const auto& l : net_.layers) largest = std::max(largest, l.out.size());
    scratch_.assign(static_cast<size_t>(threads_), std::vector<float>(2 * static_cast<size_t>(largest)));
    acts_.resize(net_.layers.size() + 1);
    tail_ = net_.layers.size();
    while (tail_ > 0 && ops_.batched && ops_.batched(net_.layers[tail_ - 1])) --tail_;
    tail_grads_.resize(static_cast<size_t>(threads_));
}

std::string HostEngine::device() const {
    return "host (" + std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
}

double HostEngine::ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void HostEngine::upload(Split split, const Dataset& data) { (split == Split::Train ? train_ : test_) = data; }

void HostEngine::set_params(const std::vector<float>& params) {
    check_param_count(net_, params, "parameter buffer");
    params_ = params;
    std::fill(velocity_.begin(), velocity_.end(), 0.0f);
}

void HostEngine::set_momentum_buffer(const std::vector<float>& velocity) {
    check_param_count(net_, velocity, "momentum buffer");
    velocity_ = velocity;
}

void HostEngine::reserve(int count) {
    if (count <= capacity_) return;
    capacity_ = count;
    acts_[0].resize(static_cast<size_t>(count) * net_.input.size());
    for (size_t k = 0; k < net_.layers.size(); ++k)
        acts_[k + 1].resize(static_cast<size_t>(count) * net_.layers[k].out.size());
    dlogits_.resize(static_cast<size_t>(count) * net_.classes);
    losses_.resize(static_cast<size_t>(count));
    hits_.resize(static_cast<size_t>(count));
    size_t tail_size = 0;
    for (size_t k = tail_; k < net_.layers.size(); ++k)
        tail_size = std::max({tail_size, static_cast<size_t>(net_.layers[k].in.size()),
                              static_cast<size_t>(net_.layers[k].out.size())});
    const int slice = (count + threads_ - 1) / threads_;  // the largest slice of a batch of up to `count`
    for (auto& g : tail_grads_) g.resize(2 * static_cast<size_t>(slice) * tail_size);
}

void HostEngine::forward(Split split, int first, int count) {
    const auto t0 = Clock::now();
    const Dataset& data = split == Split::Train ? train_ : test_;
    const int limit = split == Split::Train ? static_cast<int>(order_.size()) : data.count;
    if (count <= 0 || first < 0 || first + count > limit)
        throw Error("batch " + std::to_string(first) + "+" + std::to_string(count) + " is outside the " +
                    (split == Split::Train ? "training order" : "test set"));
    reserve(count);
    count_ = count;
    last_was_train_ = split == Split::Train;
    const float scale = 1.0f / static_cast<float>(count);
    const size_t L = net_.layers.size();
    const int T = std::min(threads_, count);
    auto index_of = [&](int s) { return split == Split::Train ? order_[static_cast<size_t>(first + s)] : first + s; };

#pragma omp parallel for num_threads(T) schedule(static, 1) if (T > 1)
    for (int t = 0; t < T; ++t) {
        // Thread t owns the contiguous slice [begin, end) of the batch.
        const int begin = count * t / T, end = count * (t + 1) / T;
        for (int s = begin; s < end; ++s) {
            float* x = acts_[0].data() + static_cast<size_t>(s) * net_.input.size();
            image_to_input(data.image(index_of(s)), data.rows, data.cols, net_.input, x);
            for (size_t k = 0; k < tail_; ++k) {
                const LayerSpec& l = net_.layers[k];
                ops_.forward(l, params_.data(), acts_[k].data() + static_cast<size_t>(s) * l.in.size(),
                             acts_[k + 1].data() + static_cast<size_t>(s) * l.out.size());
            }
        }
        for (size_t k = tail_; k < L; ++k) {
            const LayerSpec& l = net_.layers[k];
            ops_.forward_batch(l, params_.data(), acts_[k].data() + static_cast<size_t>(begin) * l.in.size(),
                               acts_[k + 1].data() + static_cast<size_t>(begin) * l.out.size(), end - begin);
        }
        for (int s = begin; s < end; ++s) {
            bool hit = false;
            losses_[static_cast<size_t>(s)] = sample_loss(
                net_.loss, acts_[L].data() + static_cast<size_t>(s) * net_.classes, net_.classes,
                data.labels[static_cast<size_t>(index_of(s))], scale,
                dlogits_.data() + static_cast<size_t>(s) * net_.classes, hit);
            hits_[static_cast<size_t>(s)] = hit;
        }
    }
    for (int s = 0; s < count; ++s) {  // in sample order, so the sum is deterministic
        counters_.loss_sum += losses_[static_cast<size_t>(s)];
        counters_.correct += hits_[static_cast<size_t>(s)];
    }
    counters_.samples += count;
    times_.forward_ms += ms_since(t0);
}

void HostEngine::backward() {
    const auto t0 = Clock::now();
    if (!last_was_train_) throw Error("backward() needs a training forward() first");
    const size_t L = net_.layers.size();
    const int T = std::min(threads_, count_);

#pragma omp parallel for num_threads(T) schedule(static, 1) if (T > 1)
    for (int t = 0; t < T; ++t) {
        float* g = t > 0 ? thread_grads_[static_cast<size_t>(t - 1)].data() : grads_.data();
        std::fill(g, g + net_.param_count, 0.0f);
        float* a = scratch_[static_cast<size_t>(t)].data();
        float* b = a + scratch_[static_cast<size_t>(t)].size() / 2;
        // Thread t owns the contiguous slice [begin, end) of the batch.
        const int begin = count_ * t / T, end = count_ * (t + 1) / T;
        // The batched tail over the whole slice first, then each sample through the layers
        // before it, from `d`: [slice][dsize], dLoss/d(the tail's input), or the logits'.
        const float* d = dlogits_.data() + static_cast<size_t>(begin) * net_.classes;
        size_t dsize = static_cast<size_t>(net_.classes);
        if (tail_ < L) {
            float* da = tail_grads_[static_cast<size_t>(t)].data();
            float* db = da + tail_grads_[static_cast<size_t>(t)].size() / 2;
            std::copy(d, d + static_cast<size_t>(end - begin) * dsize, da);
            for (size_t k = L; k-- > tail_;) {
                const LayerSpec& l = net_.layers[k];
                ops_.backward_batch(l, params_.data(), acts_[k].data() + static_cast<size_t>(begin) * l.in.size(),
                                    acts_[k + 1].data() + static_cast<size_t>(begin) * l.out.size(), da,
                                    k ? db : nullptr, g, end - begin);
                std::swap(da, db);
            }
            d = da;
            dsize = static_cast<size_t>(net_.layers[tail_].in.size());
        }
        for (int s = begin; s < end && tail_ > 0; ++s) {
            std::copy_n(d + static_cast<size_t>(s - begin) * dsize, dsize, a);
            for (size_t k = tail_; k-- > 0;) {
                const LayerSpec& l = net_.layers[k];
                ops_.backward(l, params_.data(), acts_[k].data() + static_cast<size_t>(s) * l.in.size(),
                              acts_[k + 1].data() + static_cast<size_t>(s) * l.out.size(), a, k ? b : nullptr, g);
                std::swap(a, b);
            }
        }
    }
    for (int t = 1; t < T; ++t) {
        const float* g = thread_grads_[static_cast<size_t>(t - 1)].data();
        for (size_t i = 0; i < grads_.size(); ++i) grads_[i] += g[i];
    }
    times_.backward_ms += ms_since(t0);
}

void HostEngine::update(float lr, float momentum, float weight_decay) {
    const auto t0 = Clock::now();
    ops_.update(params_.data(), velocity_.data(), grads_.data(), params_.size(), lr, momentum, weight_decay);
    times_.update_ms += ms_since(t0);
}

Counters HostEngine::take_counters() {
    Counters c = counters_;
    counters_ = {};
    return c;
}

PhaseTimes HostEngine::take_times() {
    PhaseTimes t = times_;
    times_ = {};
    return t;
}

std::vector<float> HostEngine::layer_output(size_t layer) {
    const size_t n = static_cast<size_t>(count_) * net_.layers.at(layer).out.size();
    return std::vector<float>(acts_[layer + 1].begin(), acts_[layer + 1].begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace lenet5
