// The engine of the host variants (cpu, avx, omp): the batch loop over a table
// of per-sample layer operations, optionally spread over threads.
#pragma once
#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "common/aligned.h"
#include "engine/engine.h"
#include "engine/fused_steps.h"
#include "engine/head_units.h"
#include "engine/host_inference.h"
#include "engine/lane_groups.h"
#include "host_ops.h"
#include "model/layers/layer_type.h"

namespace lenet5 {

// It takes part in a gradient exchange as its own ExchangePort: the exchange reduces straight in
// its gradient and parameter storage, and backward() announces each layer's gradients as soon as
// they are final (one part: after each tail layer, then the head's; several: after the parts'
// sum).
class HostEngine : public Engine, private ExchangePort {
public:
    // threads > 1 cuts the work into parts, one per thread. Part p takes a contiguous
    // slice of the batch (cut at a multiple of the lane groups' width), with its own gradient
    // buffer (the buffers are summed in part order), and runs it through the layers before the
    // tail in lane groups (HostOps::forward_lanes, when the ops have them for each of those
    // layers) or one sample at a time, then through the tail of layers the ops batch
    // (HostOps::batched) over the whole slice at once. The head's groups (units) go to whichever
    // thread is free, its own part's first: each unit's head gradients have a buffer of their
    // own, summed in unit order into its part's, so who ran it does not change a bit.
    // A tail layer with a large matrix (kSplitWeights) is instead split by rows: part p
    // runs a block of its rows over the whole batch and writes those rows' gradients into
    // the shared buffer (one copy of a large gradient, not one per thread); the parts'
    // shares of its input gradient are summed in part order. So a run is deterministic
    // for a given thread count.
    // inference_only: an engine for infer() alone (with set_params and params), without the
    // gradients and momentum of training (VGG16's would be 553 MB each, and one more per thread);
    // the training calls then throw Error. rule: Nesterov momentum, label smoothing, Adam (engine.h).
    HostEngine(Network net, std::string variant, const HostOps& ops, int threads, bool inference_only = false,
               const TrainingRule& rule = {});

    std::string variant() const override { return variant_; }
    std::string device() const override;
    std::string platform() const override { return "host"; }

    void upload(Split split, const Dataset& data) override;
    void set_params(const std::vector<float>& params) override;
    std::vector<float> params() override { return params_; }
    void set_momentum_buffer(const std::vector<float>& velocity) override;
    std::vector<float> momentum_buffer() override;
    void set_adam_state(const AdamState& state) override;
    AdamState adam_state() override;
    void set_order(const std::vector<int32_t>& order) override {
        refuse_in_inference("set_order()");
        order_ = order;
    }

    void forward(Split split, int first, int count) override;
    void backward() override;
    void update(float lr, float momentum, float weight_decay) override;

    Counters take_counters() override;
    PhaseTimes take_times() override;

    // Through a HostInference planned for the largest count so far, its filters reloaded after
    // every change of the parameters.
    void infer(const float* inputs, int count, float* outputs, std::vector<double>* layer_ms) override;

    std::vector<float> layer_output(size_t layer) override;
    std::vector<float> gradients() override;
    void set_gradients(const std::vector<float>& gradients) override;

    ExchangePort* exchange_port() override { return inference_only_ ? nullptr : this; }

private:
    // Throws Error for a training call (`call`, e.g. "backward()") on an inference-only engine.
    void refuse_in_inference(const char* call) const;
    // ExchangePort: the storage itself, so fetching and storing move nothing.
    bool listen(BackwardListener listener) override;
    float* flat(FlatBuffer which) override { return which == FlatBuffer::Params ? params_.data() : grads_.data(); }
    void fetch(FlatBuffer, size_t) override {}
    void fetched(FlatBuffer, size_t) override {}
    void store(FlatBuffer, size_t) override {}
    void stored(FlatBuffer which) override {
        if (which == FlatBuffer::Params) inference_stale_ = true;  // the exchange wrote them in place
    }
    void announce(size_t layer) const;  // tells the listener, for a layer with parameters

    using Clock = std::chrono::steady_clock;
    static double ms_since(Clock::time_point t0);
    void reserve(int count);
    using Unit = HeadUnits::Unit;
    void plan_units(int count, int T);  // units_ for a batch of count cut into T parts
    void forward_unit(const Dataset& data, const int32_t* order, int first, const Unit& u);
    // The unit's samples back through the head from d ([count][dsize], dLoss/d(the tail's
    // input)), with thread `thread`'s scratch; their gradients are added into g.
    void backward_unit(int thread, const Unit& u, const float* d, size_t dsize, float* g);
    // grads_ = the parts' gradients summed in part order (a head layer's from its units'), the
    // slice of each layer's range that thread id of nth takes.
    void sum_parts(int id, int nth, int T);
    // Part `part` of the current batch of `count` cut into T: [part_first(count, part, T),
    // part_first(count, part + 1, T)), at multiples of the lane groups' width when there are groups
    // and a full group for each part.
    int part_first(int count, int part, int T) const;
    template <class Body>
    void run_parts(int T, Body&& body);
    void materialize(bool& pending, int buf, std::vector<float>& into);

    // Rows [o0, o0 + rows) of a split tail layer, as a fully connected layer of its own.
    struct Slice {
        LayerSpec spec;
        int o0 = 0, rows = 0;
    };
    // A tail layer is split by rows from this many weights on (24 MB for 6.4 M, the CNN's F1;
    // LeNet-5's and the MLP's are below): per-thread copies of such a gradient cost more
    // memory traffic than the threads win, and its work per sample dwarfs a barrier.
    static constexpr size_t kSplitWeights = size_t{1} << 20;
    // update() runs on the threads from this many parameters on: below, a parallel region costs
    // more than the threads win. LeNet-5's 61,706 on `omp`: 24 -> 14 ms an epoch (one thread read
    // the half of the gradients the other had summed from that core's cache, and did all the work).
    static constexpr size_t kSplitUpdate = size_t{1} << 14;
    // Samples of the head's backward between two calls of the exchange's progress (the CNN's C1:
    // about 1 ms of work, against MPI steps of a few ms).
    static constexpr int kProgressEvery = 4;
    bool split_rows(size_t k) const { return k >= tail_ && net_.layers[k].weight_count >= kSplitWeights && threads_ > 1; }
    // How many parts (threads) a batch of `count` runs on.
    int parts(int count) const;
    const Slice& slice(size_t k, int part) const { return slices_[(k - tail_) * static_cast<size_t>(threads_) + static_cast<size_t>(part)]; }
    float* part_out(size_t k, int part) { return part_out_[(k - tail_) * static_cast<size_t>(threads_) + static_cast<size_t>(part)].data(); }

    Network net_;
    std::string variant_;
    const HostOps& ops_;
    int threads_;
    bool inference_only_;
    TrainingRule rule_;

    std::vector<float> params_, velocity_, grads_;
    AdamState adam_;  // under Adam: the second moment (and velocity_ the first)
    std::vector<std::vector<float>> part_grads_;  // parts 1..: gradients (part 0 adds into grads_)
    struct Range {
        size_t layer, begin, end;
    };
    std::vector<Range> summed_;  // the parameter ranges of layers not split

    // One-sample steps (batch 1, one part): a tail layer's gradient is the outer product
    // d x^T, kept as its two vectors (outer_[buffer][layer]) instead of being written into
    // grads_; update() without momentum and weight decay applies it in one pass over the
    // weights (HostOps::sgd_outer), so the 159k gradients of the MLP are neither zeroed,
    // written nor read. grads_ (and velocity_, which such an update sets to the gradient)
    // are written from the vectors only when asked for, before another kind of update, or in
    // a probe (fused_steps.h: one such update in many writes them, each part timed).
    // Bit for bit the same parameters, gradients and velocity as the written path.
    struct Outer {
        std::vector<float> x, d;
    };
    std::vector<char> outer_layer_;               // per layer: may keep its gradient as vectors
    std::vector<Outer> outer_[2];                 // [buffer][layer]
    int grads_buf_ = 0, velocity_buf_ = 0;        // which buffer holds the gradient / the velocity
    bool grads_outer_ = false, velocity_outer_ = false;  // their outer_layer_ ranges are in outer_
    std::vector<AlignedVector<float>> scratch_;   // per thread: two buffers of a layer's size (times the lanes)
    HeadUnits units_;                             // the current batch's head work, part by part
    // Per unit, with several parts: the head layers' gradients, [0, head_params_) in the flat layout.
    std::vector<AlignedVector<float>> unit_grads_;
    size_t head_params_ = 0;
    // The layers before the tail in lane groups (HostOps::forward_lanes), when ops_ has them for
    // each one: acts_[0 .. tail_-1] then hold the grouped samples in lanes; acts_[tail_] (the
    // tail's input) stays [count][size], its grouped copy in head_out_.
    static constexpr int kMaxLanes = 16;  // the widest group forward_head stages images for
    LaneGroups groups_;
    AlignedVector<float> head_out_;
    std::array<float, 256> pixel_{};  // the input's value of each byte (images_to_lanes)
    size_t tail_ = 0;                             // layers tail_.. run batched, split by rows
    std::vector<Slice> slices_;                   // [tail layer][part]
    std::vector<std::vector<float>> part_out_;    // [tail layer][part]: its rows' outputs, [count][rows]
    std::vector<AlignedVector<float>> part_d_;    // per part: its samples' or rows' output gradient of a tail layer
    std::vector<std::vector<float>> part_din_;    // parts 1..: their share of a layer's input gradient
    // Per tail layer: its input gradient, [count][size]. One buffer each, not a ping-pong
    // pair: parts run through the tail without barriers, so a part's rows of layer k-2's
    // (larger) input gradient would overlap the rows of layer k's that another part still reads.
    std::vector<AlignedVector<float>> dtail_;
    // acts_[0] is the input, acts_[k+1] layer k's output; [capacity][size] each.
    std::vector<AlignedVector<float>> acts_;
    std::vector<float> dlogits_, losses_;
    std::vector<uint8_t> hits_;
    int capacity_ = 0, count_ = 0;
    bool last_was_train_ = false;

    // Layers that draw random numbers run the reference with each sample's draw: the step
    // is the training forwards since set_params, the sample its place in the epoch's order.
    std::vector<char> draws_;  // per layer
    uint32_t draw_step_ = 0;
    int draw_first_ = 0;
    Draw draw(size_t layer, int s) const {
        return {layer_draw_seed(rule_.seed, layer), draw_step_, static_cast<uint32_t>(draw_first_ + s), last_was_train_};
    }

    BackwardListener listener_;  // ExchangePort::listen's

    Dataset train_, test_;
    std::vector<int32_t> order_;
    Counters counters_;
    PhaseTimes times_;
    FusedSteps fused_;  // the sgd_outer updates' time, split over backward and update by probes

    std::unique_ptr<HostInference> inference_;
    bool inference_stale_ = true;  // the parameters changed since inference_ last loaded them
};

}  // namespace lenet5
