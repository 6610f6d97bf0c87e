#include "engine/host_engine.h"

#include <algorithm>

#include "common/error.h"
#include "engine/preprocess.h"
#include "model/layers/layer_type.h"
#ifdef LENET5_HAVE_OPENMP
#include <omp.h>
#endif

namespace lenet5 {

namespace {

#ifdef LENET5_HAVE_OPENMP
int thread_index() { return omp_get_thread_num(); }
int thread_count() { return omp_get_num_threads(); }
#else
int thread_index() { return 0; }
int thread_count() { return 1; }
#endif

// Part `part` of `n` items cut into `parts`: [first(part), first(part + 1)).
int part_begin(int n, int part, int parts) { return static_cast<int>(static_cast<long long>(n) * part / parts); }

}  // namespace

HostEngine::HostEngine(Network net, std::string variant, const HostOps& ops, int threads, bool inference_only,
                       const TrainingRule& rule)
    : net_(std::move(net)), variant_(std::move(variant)), ops_(ops), threads_(std::max(1, threads)),
      inference_only_(inference_only), rule_(rule) {
#ifndef LENET5_HAVE_OPENMP
    threads_ = 1;
#endif
    params_.assign(net_.param_count, 0.0f);
    if (!inference_only_) {
        velocity_.assign(net_.param_count, 0.0f);
        grads_.assign(net_.param_count, 0.0f);
        if (rule_.adam()) adam_.second.assign(net_.param_count, 0.0f);
    }
    int largest = net_.input.size();
    for (const auto& l : net_.layers) largest = std::max(largest, l.out.size());
    acts_.resize(net_.layers.size() + 1);
    for (const auto& l : net_.layers) draws_.push_back(layer_type(l.kind).draws);
    // The tail: the layers the ops batch, and among them those without parameters that draw, run
    // sample by sample (so that such a layer between fully connected layers leaves them batched).
    auto in_tail = [&](size_t k) {
        const LayerSpec& l = net_.layers[k];
        return ops_.batched(l) || (draws_[k] && l.weight_count + l.bias_count == 0);
    };
    tail_ = net_.layers.size();
    while (tail_ > 0 && ops_.batched && in_tail(tail_ - 1)) --tail_;
    // The lanes take no layer that draws (its draws are per sample): such a layer runs the reference.
    auto in_lanes = [&](size_t k) { return !draws_[k] && ops_.lanes_supported(net_.layers[k]); };
    bool lanes = tail_ > 0 && ops_.lanes > 0 && ops_.lanes <= kMaxLanes;
    for (size_t k = 0; lanes && k < tail_; ++k) lanes = in_lanes(k);
    if (lanes) {
        groups_.lanes = ops_.lanes;
        groups_.vector_to_lanes = ops_.to_lanes;
        groups_.vector_from_lanes = ops_.from_lanes;
    }
    for (int b = 0; b < 256; ++b) pixel_[static_cast<size_t>(b)] = net_.scaling.value(b);
    const size_t per_part = 2 * static_cast<size_t>(largest) * static_cast<size_t>(std::max(1, groups_.lanes));
    scratch_.assign(static_cast<size_t>(threads_), AlignedVector<float>(per_part));
    for (size_t k = 0; k < net_.layers.size(); ++k) {
        const LayerSpec& l = net_.layers[k];
        if (!split_rows(k) && l.weight_count + l.bias_count > 0)
            summed_.push_back({k, l.weight_offset, l.bias_offset + l.bias_count});  // weights, then biases
    }
    outer_layer_.assign(net_.layers.size(), 0);
    for (auto& b : outer_) b.resize(net_.layers.size());
    for (size_t k = tail_; k < net_.layers.size(); ++k) {
        const LayerSpec& l = net_.layers[k];
        if (!ops_.outer_grads || !ops_.sgd_outer || split_rows(k) || l.weight_count == 0) continue;
        outer_layer_[k] = 1;
        for (auto& b : outer_) {
            b[k].x.resize(static_cast<size_t>(l.in.size()));
            b[k].d.resize(static_cast<size_t>(l.out.size()));
        }
    }
    if (!inference_only_) part_grads_.assign(static_cast<size_t>(threads_ - 1), std::vector<float>(net_.param_count));
    for (size_t k = 0; k < tail_; ++k) {
        const LayerSpec& l = net_.layers[k];
        head_params_ = std::max({head_params_, l.weight_offset + l.weight_count, l.bias_offset + l.bias_count});
    }
    // Row blocks of multiples of 4 (the SIMD register blocks); part 0 always has rows.
    for (size_t k = tail_; k < net_.layers.size(); ++k) {
        const LayerSpec& l = net_.layers[k];
        if (!split_rows(k)) {
            slices_.resize(slices_.size() + static_cast<size_t>(threads_));  // no rows: not split
            continue;
        }
        const int O = l.out.size(), I = l.in.size();
        auto bound = [&](int part) { return std::min(O, (part_begin(O, part, threads_) + 3) / 4 * 4); };
        for (int part = 0; part < threads_; ++part) {
            Slice s;
            s.o0 = bound(part);
            s.rows = bound(part + 1) - s.o0;
            s.spec.name = l.name;
            s.spec.kind = LayerKind::FullyConnected;  // a dense conv (C5) is the same matrix
            s.spec.activation = l.activation;
            s.spec.in = {I, 1, 1};
            s.spec.out = {s.rows, 1, 1};
            s.spec.weight_offset = l.weight_offset + static_cast<size_t>(s.o0) * static_cast<size_t>(I);
            s.spec.weight_count = static_cast<size_t>(s.rows) * static_cast<size_t>(I);
            s.spec.bias_offset = l.bias_offset + static_cast<size_t>(s.o0);
            s.spec.bias_count = static_cast<size_t>(s.rows);
            slices_.push_back(std::move(s));
        }
    }
    part_out_.resize(slices_.size());
    part_d_.resize(static_cast<size_t>(threads_));
    part_din_.resize(static_cast<size_t>(threads_));
}

std::string HostEngine::device() const {
    return "host (" + std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
}

double HostEngine::ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void HostEngine::refuse_in_inference(const char* call) const {
    if (inference_only_) throw inference_only_error(variant_, call);
}

void HostEngine::upload(Split split, const Dataset& data) {
    refuse_in_inference("upload()");
    (split == Split::Train ? train_ : test_) = data;
}

void HostEngine::set_params(const std::vector<float>& params) {
    check_param_count(net_, params, "parameter buffer");
    params_ = params;
    inference_stale_ = true;
    draw_step_ = 0;
    std::fill(velocity_.begin(), velocity_.end(), 0.0f);
    velocity_outer_ = false;
    std::fill(adam_.second.begin(), adam_.second.end(), 0.0f);
    adam_.steps = 0;
}

void HostEngine::set_momentum_buffer(const std::vector<float>& velocity) {
    refuse_in_inference("set_momentum_buffer()");
    check_param_count(net_, velocity, "momentum buffer");
    velocity_ = velocity;
    velocity_outer_ = false;
}

std::vector<float> HostEngine::momentum_buffer() {
    refuse_in_inference("momentum_buffer()");
    materialize(velocity_outer_, velocity_buf_, velocity_);
    return velocity_;
}

void HostEngine::set_adam_state(const AdamState& state) {
    refuse_in_inference("set_adam_state()");
    check_adam_state(net_, rule_, state);
    adam_ = state;
}

AdamState HostEngine::adam_state() {
    refuse_in_inference("adam_state()");
    return adam_;
}

std::vector<float> HostEngine::gradients() {
    refuse_in_inference("gradients()");
    materialize(grads_outer_, grads_buf_, grads_);
    return grads_;
}

// Writes the outer-product layers' d x^T held in outer_[buf] into `into` (the gradients or the
// velocity), if `pending` says they are held there only.
void HostEngine::materialize(bool& pending, int buf, std::vector<float>& into) {
    if (!pending) return;
    for (size_t k = 0; k < net_.layers.size(); ++k)
        if (outer_layer_[k])
            ops_.outer_grads(net_.layers[k], outer_[buf][k].x.data(), outer_[buf][k].d.data(), into.data());
    pending = false;
}

// body(id, nth) on T threads, or directly on this one when T is 1 (no parallel region:
// a batch-1 step would otherwise pay for two per step). The body's barriers are then no-ops.
template <class Body>
void HostEngine::run_parts(int T, Body&& body) {
    if (T <= 1) return body(0, 1);
#pragma omp parallel num_threads(T)
    body(thread_index(), thread_count());
}

void HostEngine::reserve(int count) {
    if (count <= capacity_) return;
    capacity_ = count;
    const size_t n = static_cast<size_t>(count);
    // A last group that is not full still takes the place of `lanes` samples.
    const size_t grouped = n + static_cast<size_t>(groups_.lanes);
    acts_[0].resize(grouped * static_cast<size_t>(net_.input.size()));
    for (size_t k = 0; k < net_.layers.size(); ++k)
        acts_[k + 1].resize((k + 1 < tail_ ? grouped : n) * static_cast<size_t>(net_.layers[k].out.size()));
    if (groups_.lanes > 0) head_out_.resize(grouped * static_cast<size_t>(net_.layers[tail_ - 1].out.size()));
    dlogits_.resize(n * static_cast<size_t>(net_.classes));
    losses_.resize(n);
    hits_.resize(n);
    for (size_t i = 0; i < slices_.size(); ++i) part_out_[i].resize(n * static_cast<size_t>(slices_[i].rows));
    size_t in = 0, out = 0;
    for (size_t k = tail_; k < net_.layers.size(); ++k) {
        in = std::max(in, static_cast<size_t>(net_.layers[k].in.size()));
        out = std::max(out, static_cast<size_t>(net_.layers[k].out.size()));
    }
    for (auto& d : part_d_) d.resize(n * out);
    for (size_t part = 1; part < part_din_.size(); ++part) part_din_[part].resize(n * in);
    dtail_.resize(net_.layers.size() - tail_);
    for (size_t k = tail_; k < net_.layers.size(); ++k) dtail_[k - tail_].resize(n * static_cast<size_t>(net_.layers[k].in.size()));
}

int HostEngine::part_first(int count, int part, int T) const {
    const int L = groups_.lanes;
    // Fewer than a full group a part (parts() gives so many only below four groups): every part its
    // share, one at a time (the last part's may be a group of fewer lanes, LaneGroups::each).
    if (L == 0 || part == T || count < L * T) return part_begin(count, part, T);
    return std::min(count, (part_begin(count, part, T) + L / 2) / L * L);
}

void HostEngine::plan_units(int count, int T) {
    units_.plan(T, groups_, [&](int part) { return part_first(count, part, T); });
    if (T > 1 && tail_ > 0)
        while (unit_grads_.size() < units_.size()) unit_grads_.emplace_back(head_params_);
}

// The unit's samples through the layers before the tail.
void HostEngine::forward_unit(const Dataset& data, const int32_t* order, int first, const Unit& u) {
    const size_t in_size = static_cast<size_t>(net_.input.size());
    auto image = [&](int s) { return data.image(order ? order[first + s] : first + s); };
    const int s0 = u.s0, n = u.n;
    if (u.grouped) {
        const uint8_t* images[kMaxLanes];
        for (int s = 0; s < n; ++s) images[s] = image(s0 + s);
        float* group = acts_[0].data() + static_cast<size_t>(s0) * in_size;
        if (!ops_.images_to_lanes ||
            !ops_.images_to_lanes(images, n, data.rows, data.cols, net_.input, net_.scaling, pixel_.data(), group))
            images_to_lanes(images, n, groups_.lanes, data.rows, data.cols, net_.input, pixel_.data(), group);
        for (size_t k = 0; k < tail_; ++k) {
            const LayerSpec& l = net_.layers[k];
            float* out = (k + 1 == tail_ ? head_out_ : acts_[k + 1]).data() + static_cast<size_t>(s0) * l.out.size();
            ops_.forward_lanes(l, params_.data(), acts_[k].data() + static_cast<size_t>(s0) * l.in.size(), out);
            if (k + 1 == tail_)
                groups_.from_lanes(out, n, static_cast<size_t>(l.out.size()),
                                   acts_[tail_].data() + static_cast<size_t>(s0) * l.out.size());
        }
        return;
    }
    for (int s = s0; s < s0 + n; ++s) {
        image_to_input(image(s), data.rows, data.cols, net_.input, net_.scaling,
                       acts_[0].data() + static_cast<size_t>(s) * in_size);
        for (size_t k = 0; k < tail_; ++k) {
            const LayerSpec& l = net_.layers[k];
            const float* in = acts_[k].data() + static_cast<size_t>(s) * l.in.size();
            float* out = acts_[k + 1].data() + static_cast<size_t>(s) * l.out.size();
            if (draws_[k]) reference_forward(l, params_.data(), in, out, draw(k, s));
            else ops_.forward(l, params_.data(), in, out);
        }
    }
}

void HostEngine::forward(Split split, int first, int count) {
    refuse_in_inference("forward()");
    const auto t0 = Clock::now();
    const Dataset& data = split == Split::Train ? train_ : test_;
    const int limit = split == Split::Train ? static_cast<int>(order_.size()) : data.count;
    if (count <= 0 || first < 0 || first + count > limit)
        throw Error("batch " + std::to_string(first) + "+" + std::to_string(count) + " is outside the " +
                    (split == Split::Train ? "training order" : "test set"));
    reserve(count);
    count_ = count;
    last_was_train_ = split == Split::Train;
    draw_first_ = first;
    if (last_was_train_) ++draw_step_;
    const float scale = 1.0f / static_cast<float>(count);
    const size_t L = net_.layers.size();
    const int T = parts(count);
    const int32_t* order = split == Split::Train ? order_.data() : nullptr;

    plan_units(count, T);
    units_.open();
    run_parts(T, [&](const int id, const int nth) {
        units_.each([&](size_t u) { return units_[u].part % nth == id; },
                    [&](size_t u) {
                        units_.ran(u, id);
                        forward_unit(data, order, first, units_[u]);
                    });
#pragma omp barrier
        // The tail: a thread takes the parts id, id + nth, ... (all of them if it runs alone).
        for (size_t k = tail_; k < L; ++k) {
            const LayerSpec& l = net_.layers[k];
            const size_t I = static_cast<size_t>(l.in.size()), O = static_cast<size_t>(l.out.size());
            if (!split_rows(k)) {  // the part's samples (computed by this thread)
                for (int part = id; part < T; part += nth) {
                    const int b = part_first(count, part, T), e = part_first(count, part + 1, T);
                    if (draws_[k])
                        for (int x = b; x < e; ++x)
                            reference_forward(l, params_.data(), acts_[k].data() + static_cast<size_t>(x) * I,
                                              acts_[k + 1].data() + static_cast<size_t>(x) * O, draw(k, x));
                    else if (e > b)
                        ops_.forward_batch(l, params_.data(), acts_[k].data() + static_cast<size_t>(b) * I,
                                           acts_[k + 1].data() + static_cast<size_t>(b) * O, e - b);
                }
                continue;
            }
#pragma omp barrier
            for (int part = id; part < T; part += nth) {
                const Slice& sl = slice(k, part);
                if (sl.rows == 0) continue;
                float* out = part_out(k, part);
                ops_.forward_batch(sl.spec, params_.data(), acts_[k].data(), out, count);
                for (size_t s = 0; s < static_cast<size_t>(count); ++s)
                    std::copy_n(out + s * static_cast<size_t>(sl.rows), sl.rows, acts_[k + 1].data() + s * O + static_cast<size_t>(sl.o0));
            }
#pragma omp barrier
        }
        for (int part = id; part < T; part += nth)
            for (int s = part_first(count, part, T); s < part_first(count, part + 1, T); ++s) {
                bool hit = false;
                const int label = data.labels[static_cast<size_t>(order ? order[first + s] : first + s)];
                losses_[static_cast<size_t>(s)] =
                    sample_loss(net_.loss, acts_[L].data() + static_cast<size_t>(s) * net_.classes, net_.classes,
                                label, rule_.label_smoothing, scale,
                                dlogits_.data() + static_cast<size_t>(s) * net_.classes, hit);
                hits_[static_cast<size_t>(s)] = hit;
            }
    });
    for (int s = 0; s < count; ++s) {  // in sample order, so the sum is deterministic
        counters_.loss_sum += losses_[static_cast<size_t>(s)];
        counters_.correct += hits_[static_cast<size_t>(s)];
    }
    counters_.samples += count;
    times_.forward_ms += ms_since(t0);
}

int HostEngine::parts(int count) const {
    for (size_t k = tail_; k < net_.layers.size(); ++k)
        if (split_rows(k)) return threads_;
    // Fewer than a lane group a thread, but four groups or more: a whole group a part, on fewer threads.
    // LeNet-5 on a 16-core Xeon (bench/results/JOURNAL.md, "`omp` on 16 cores"), one epoch at batch 64: on
    // 16 threads 474 -> 372 ms, on 12 547 -> 431 (8 run 394-415 either way); at batch 32 on 16, 646 -> 586.
    // At batch 16 on 16, two groups on two threads took 1,120 ms against 994 one sample a thread. Each part
    // costs a copy of the tail's gradients, written and summed, and a thread at the barriers.
    const int L = groups_.lanes;
    if (L > 0 && count < L * threads_ && count >= 4 * L) return count / L;
    return std::min(threads_, count);
}

void HostEngine::backward_unit(int thread, const Unit& u, const float* d, size_t dsize, float* g) {
    float* a = scratch_[static_cast<size_t>(thread)].data();
    float* b = a + scratch_[static_cast<size_t>(thread)].size() / 2;
    if (u.grouped) {
        groups_.to_lanes(d + static_cast<size_t>(u.s0) * dsize, u.n, dsize, a);
        bool folded = false;  // by the layer above: a's gradient is before layer k's activation
        for (size_t k = tail_; k-- > 0;) {
            const LayerSpec& l = net_.layers[k];
            const size_t at = static_cast<size_t>(u.s0) * l.out.size();
            const float* out = (k + 1 == tail_ ? head_out_ : acts_[k + 1]).data() + at;
            folded = ops_.backward_lanes(l, params_.data(), acts_[k].data() + static_cast<size_t>(u.s0) * l.in.size(), out,
                                         a, k ? b : nullptr, g, k ? &net_.layers[k - 1] : nullptr, folded);
            std::swap(a, b);
        }
        return;
    }
    for (int s = u.s0; s < u.s0 + u.n; ++s) {
        std::copy_n(d + static_cast<size_t>(s) * dsize, dsize, a);
        for (size_t k = tail_; k-- > 0;) {
            const LayerSpec& l = net_.layers[k];
            const float* in = acts_[k].data() + static_cast<size_t>(s) * l.in.size();
            const float* out = acts_[k + 1].data() + static_cast<size_t>(s) * l.out.size();
            if (draws_[k]) reference_backward(l, params_.data(), in, out, a, k ? b : nullptr, g, draw(k, s));
            else ops_.backward(l, params_.data(), in, out, a, k ? b : nullptr, g);
            std::swap(a, b);
        }
    }
}

void HostEngine::sum_parts(int id, int nth, int T) {
    // Thread id's slice of [begin, end), cut at multiples of 16 floats as update() cuts (a cache line
    // where the buffer starts on one; else two threads may share the line across a cut, no value).
    auto cut = [&](size_t begin, size_t end, int p) {
        if (p == nth) return end;
        return std::clamp((begin + (end - begin) * static_cast<size_t>(p) / static_cast<size_t>(nth)) / 16 * 16, begin, end);
    };
    for (const auto& r : summed_) {
        const size_t lo = cut(r.begin, r.end, id), hi = cut(r.begin, r.end, id + 1);
        for (int part = 0; part < T; ++part) {
            float* g = part > 0 ? part_grads_[static_cast<size_t>(part - 1)].data() : grads_.data();
            if (r.layer < tail_) {  // a head layer: the part's units added in order, as if it had run them all
                std::fill(g + lo, g + hi, 0.0f);
                for (int u = units_.first(part); u < units_.first(part + 1); ++u) {
                    const float* ug = unit_grads_[static_cast<size_t>(u)].data();
                    for (size_t i = lo; i < hi; ++i) g[i] += ug[i];
                }
            }
            if (part > 0)
                for (size_t i = lo; i < hi; ++i) grads_[i] += g[i];
        }
    }
}

void HostEngine::backward() {
    refuse_in_inference("backward()");
    const auto t0 = Clock::now();
    if (!last_was_train_) throw Error("backward() needs a training forward() first");
    const size_t L = net_.layers.size();
    const int T = parts(count_);
    auto grads_of = [&](int part) { return part > 0 ? part_grads_[static_cast<size_t>(part - 1)].data() : grads_.data(); };
    // One sample on one part: the outer_layer_ layers keep their gradients as vectors, in the
    // buffer that does not hold the velocity (not in an exchange, which reads them from grads_).
    const bool outer = T == 1 && count_ == 1 && !listener_.ready;
    if (outer && velocity_outer_ && velocity_buf_ == grads_buf_) grads_buf_ ^= 1;
    grads_outer_ = outer;

    // The tail's layers write their gradients (backward_batch_set) where the ops can: nothing to
    // zero there, except in a part without samples, which writes none.
    const bool set_tail = ops_.backward_batch_set != nullptr;
    units_.open();
    run_parts(T, [&](const int id, const int nth) {
        for (int part = id; part < T; part += nth) {
            const bool writes_tail = set_tail && part_first(count_, part + 1, T) > part_first(count_, part, T);
            for (const auto& r : summed_)  // several parts: a head layer's sum is written from its units'
                if (!(outer && outer_layer_[r.layer]) && !(writes_tail && r.layer >= tail_) && !(T > 1 && r.layer < tail_))
                    std::fill(grads_of(part) + r.begin, grads_of(part) + r.end, 0.0f);
        }
        // d: [count][dsize], dLoss/d(the output of layer k), from the logits' down the tail.
        const float* d = dlogits_.data();
        size_t dsize = static_cast<size_t>(net_.classes);
        for (size_t k = L; k-- > tail_;) {
            const LayerSpec& l = net_.layers[k];
            const size_t I = static_cast<size_t>(l.in.size()), O = static_cast<size_t>(l.out.size());
            float* din = k > 0 ? dtail_[k - tail_].data() : nullptr;
            if (!split_rows(k)) {  // the part's samples; backward_batch overwrites its output gradient, so a copy
                for (int part = id; part < T; part += nth) {
                    const int b = part_first(count_, part, T), e = part_first(count_, part + 1, T);
                    if (e == b) continue;
                    float* pd = part_d_[static_cast<size_t>(part)].data();
                    std::copy(d + static_cast<size_t>(b) * O, d + static_cast<size_t>(e) * O, pd);
                    if (draws_[k]) {  // no parameters: nothing to write but din
                        for (int x = b; x < e; ++x)
                            reference_backward(l, params_.data(), acts_[k].data() + static_cast<size_t>(x) * I,
                                               acts_[k + 1].data() + static_cast<size_t>(x) * O,
                                               pd + static_cast<size_t>(x - b) * O,
                                               din ? din + static_cast<size_t>(x) * I : nullptr, nullptr, draw(k, x));
                        continue;
                    }
                    const bool vectors = outer && outer_layer_[k];
                    (set_tail && !vectors ? ops_.backward_batch_set : ops_.backward_batch)(
                        l, params_.data(), acts_[k].data() + static_cast<size_t>(b) * I,
                        acts_[k + 1].data() + static_cast<size_t>(b) * O, pd, din ? din + static_cast<size_t>(b) * I : nullptr,
                        vectors ? nullptr : grads_of(part), e - b);
                    if (vectors) {  // one sample: the gradient is d x^T
                        Outer& v = outer_[grads_buf_][k];
                        std::copy_n(acts_[k].data(), I, v.x.data());
                        std::copy_n(pd, O, v.d.data());
                    }
                }
                if (T == 1) announce(k);  // one part wrote grads_ itself: final now
            } else {
#pragma omp barrier
                const size_t count = static_cast<size_t>(count_);
                for (int part = id; part < T; part += nth) {
                    const Slice& sl = slice(k, part);
                    if (sl.rows == 0) continue;
                    const size_t rows = static_cast<size_t>(sl.rows);
                    float* pd = part_d_[static_cast<size_t>(part)].data();
                    for (size_t s = 0; s < count; ++s) std::copy_n(d + s * O + static_cast<size_t>(sl.o0), rows, pd + s * rows);
                    float* pdin = !din ? nullptr : part == 0 ? din : part_din_[static_cast<size_t>(part)].data();
                    if (ops_.backward_batch_set) {  // writes the rows' gradients: no zeroing pass over them
                        ops_.backward_batch_set(sl.spec, params_.data(), acts_[k].data(), part_out(k, part), pd, pdin,
                                                grads_.data(), count_);
                    } else {
                        std::fill_n(grads_.data() + sl.spec.weight_offset, sl.spec.weight_count, 0.0f);
                        std::fill_n(grads_.data() + sl.spec.bias_offset, sl.spec.bias_count, 0.0f);
                        ops_.backward_batch(sl.spec, params_.data(), acts_[k].data(), part_out(k, part), pd, pdin,
                                            grads_.data(), count_);
                    }
                }
                if (din) {
#pragma omp barrier
                    // The parts' shares of the input gradient, added in part order over each part's samples
                    // (by the thread that runs that part's samples next).
                    for (int part = id; part < T; part += nth)
                        for (int s = part_first(count_, part, T); s < part_first(count_, part + 1, T); ++s)
                            for (int from = 1; from < T; ++from) {
                                if (slice(k, from).rows == 0) continue;
                                const float* src = part_din_[static_cast<size_t>(from)].data() + static_cast<size_t>(s) * I;
                                float* dst = din + static_cast<size_t>(s) * I;
                                for (size_t i = 0; i < I; ++i) dst[i] += src[i];
                            }
                }
            }
            d = din;
            dsize = I;
        }
        if (T == 1) {  // one thread: the units in order, adding into grads_ itself
            int done = 0;  // samples since the exchange's last progress
            for (size_t u = 0; tail_ > 0 && u < units_.size(); ++u) {
                backward_unit(0, units_[u], d, dsize, grads_.data());
                // The tail's layers are announced already: let their exchange move on meanwhile.
                done += units_[u].n;
                if (listener_.progress && done >= kProgressEvery) {
                    listener_.progress();
                    done = 0;
                }
            }
            for (size_t k = tail_; k-- > 0;) announce(k);
            return;
        }
        if (tail_ > 0) {
#pragma omp barrier
            // Every part's d is written: a thread takes the units whose forward it ran (their
            // activations are in its caches) first, each into the unit's own gradient buffer.
            units_.each([&](size_t u) { return units_.ran_by(u) == id; }, [&](size_t u) {
                float* g = unit_grads_[u].data();
                for (const auto& r : summed_)
                    if (r.layer < tail_) std::fill(g + r.begin, g + r.end, 0.0f);
                backward_unit(id, units_[u], d, dsize, g);
            });
        }
#pragma omp barrier
        sum_parts(id, nth, T);
    });
    if (T > 1)
        for (size_t k = L; k-- > 0;) announce(k);
    times_.backward_ms += ms_since(t0);
}

bool HostEngine::listen(BackwardListener listener) {
    listener_ = std::move(listener);
    return true;
}

void HostEngine::announce(size_t layer) const {
    const LayerSpec& l = net_.layers[layer];
    if (listener_.ready && l.weight_count + l.bias_count > 0) listener_.ready(layer);
}

void HostEngine::set_gradients(const std::vector<float>& gradients) {
    refuse_in_inference("set_gradients()");
    check_param_count(net_, gradients, "gradient buffer");
    grads_ = gradients;
    grads_outer_ = false;
}

void HostEngine::update(float lr, float momentum, float weight_decay) {
    refuse_in_inference("update()");
    auto t0 = Clock::now();
    inference_stale_ = true;
    // Without momentum and weight decay, the outer-product layers' gradients are computed inside
    // the update (sgd_outer), except in a probe (fused_steps.h), which writes them first.
    const bool fusable = grads_outer_ && momentum == 0.0f && weight_decay == 0.0f && !rule_.adam();
    if (fusable && !fused_.probe()) {
        // v = g; p -= lr*v: the outer-product layers in one pass each, the rest as below.
        for (const auto& r : summed_) {
            if (outer_layer_[r.layer])
                ops_.sgd_outer(net_.layers[r.layer], params_.data(), outer_[grads_buf_][r.layer].x.data(),
                               outer_[grads_buf_][r.layer].d.data(), lr);
            else
                ops_.update(params_.data() + r.begin, velocity_.data() + r.begin, grads_.data() + r.begin,
                            r.end - r.begin, lr, momentum, weight_decay, rule_.nesterov);
        }
        velocity_outer_ = true;  // the velocity of those layers is now the gradient
        velocity_buf_ = grads_buf_;
        fused_.add_fused(ms_since(t0));
        return;
    }
    PhaseTimes t;
    if (grads_outer_) {  // the gradients that backward() left as vectors: the backward's work
        materialize(grads_outer_, grads_buf_, grads_);
        t.backward_ms = ms_since(t0);
        t0 = Clock::now();
    }
    materialize(velocity_outer_, velocity_buf_, velocity_);
    const size_t n = params_.size();
    // On the threads that ran the step (a step of one sample ran on one: a region would be the
    // step's only one), in parts of whole cache lines (16 floats), so no two threads write one line.
    const int T = n >= kSplitUpdate ? std::max(1, parts(count_)) : 1;
    const AdamStep adam = rule_.adam() ? adam_step(rule_.optimizer, rule_.beta1, rule_.beta2, rule_.eps, lr,
                                                   weight_decay, ++adam_.steps)
                                       : AdamStep{};
    run_parts(T, [&](const int id, const int nth) {
    for (int part = id; part < T; part += nth) {
        const size_t begin = n * static_cast<size_t>(part) / static_cast<size_t>(T) / 16 * 16;
        const size_t end = part + 1 == T ? n : n * static_cast<size_t>(part + 1) / static_cast<size_t>(T) / 16 * 16;
        if (rule_.adam())
            adam_update(params_.data() + begin, velocity_.data() + begin, adam_.second.data() + begin,
                        grads_.data() + begin, end - begin, adam);
        else
            ops_.update(params_.data() + begin, velocity_.data() + begin, grads_.data() + begin, end - begin, lr,
                        momentum, weight_decay, rule_.nesterov);
    }
    });
    t.update_ms = ms_since(t0);
    times_.backward_ms += t.backward_ms;
    times_.update_ms += t.update_ms;
    if (fusable) fused_.add_probe(t);
}

Counters HostEngine::take_counters() {
    Counters c = counters_;
    counters_ = {};
    return c;
}

PhaseTimes HostEngine::take_times() { return fused_.take(std::exchange(times_, {})); }

void HostEngine::infer(const float* inputs, int count, float* outputs, std::vector<double>* layer_ms) {
    if (!inference_ || inference_->batch() < count) {
        inference_.reset();  // its buffers go before the larger ones come
        inference_ = std::make_unique<HostInference>(net_, ops_, variant_ != "cpu", threads_, std::max(1, count));
        inference_stale_ = true;
    }
    if (inference_stale_) inference_->load(params_.data());
    inference_stale_ = false;
    inference_->run(params_.data(), inputs, count, outputs, layer_ms);
}

std::vector<float> HostEngine::layer_output(size_t layer) {
    const size_t size = static_cast<size_t>(net_.layers.at(layer).out.size());
    const float* acts = acts_[layer + 1].data();
    std::vector<float> out(static_cast<size_t>(count_) * size);
    if (groups_.lanes == 0 || layer + 1 >= tail_) return std::vector<float>(acts, acts + out.size());
    for (size_t u = 0; u < units_.size(); ++u) {  // the last forward's units
        const size_t at = static_cast<size_t>(units_[u].s0) * size;
        if (units_[u].grouped)
            groups_.from_lanes(acts + at, units_[u].n, size, out.data() + at);
        else
            std::copy_n(acts + at, static_cast<size_t>(units_[u].n) * size, out.data() + at);
    }
    return out;
}

}  // namespace lenet5
