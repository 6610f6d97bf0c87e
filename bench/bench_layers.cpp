// Micro-benchmarks: every LeNet-5 layer's forward and backward pass and the
// update, one sample at a time through each host variant's HostOps (cpu, and avx
// when built), the layers avx batches over 32 samples (one thread's slice of a batch
// of 64), the engine's moves into and out of a lane group (moves/), and the whole
// training step (forward + backward + update) of every built variant through the
// Engine interface at batch 1 and 64.
// Items are samples (parameters for the update), so items_per_second compares directly.
//
//   lenet5_bench_layers [--benchmark_filter=step/] [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_factory.h"
#include "engine/lane_groups.h"
#include "engine/preprocess.h"
#include "host_ops.h"
#include "model/network.h"
#include "common/rng.h"
#ifdef LENET5_HAVE_SIMD
#include "simd_ops.h"
#endif

using namespace lenet5;

namespace {

std::vector<float> random_vector(size_t n, Rng& rng) {
    std::vector<float> v(n);
    for (auto& x : v) x = rng.uniform(-1.0f, 1.0f);
    return v;
}

// One sample through one layer: inputs and parameters as in training (tanh-range
// activations, initialised weights).
struct LayerCase {
    std::vector<float> params, in, out, dout, din, grads;
    LayerCase(const Network& net, const LayerSpec& l) {
        Rng rng(5);
        params = init_params(net, 1);
        in = random_vector(static_cast<size_t>(l.in.size()), rng);
        out.resize(static_cast<size_t>(l.out.size()));
        dout = random_vector(out.size(), rng);
        din.resize(in.size());
        grads.assign(params.size(), 0.0f);
    }
};

void layer_forward(benchmark::State& state, const HostOps* ops, const Network& net, size_t k) {
    const LayerSpec& l = net.layers[k];
    LayerCase c(net, l);
    for (auto _ : state) {
        ops->forward(l, c.params.data(), c.in.data(), c.out.data());
        benchmark::DoNotOptimize(c.out.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations());
}

void layer_backward(benchmark::State& state, const HostOps* ops, const Network& net, size_t k) {
    const LayerSpec& l = net.layers[k];
    LayerCase c(net, l);
    ops->forward(l, c.params.data(), c.in.data(), c.out.data());
    std::vector<float> d = c.dout;
    // The first layer's input gradient is never needed, as in training.
    float* din = k == 0 ? nullptr : c.din.data();
    for (auto _ : state) {
        // backward may overwrite dout; restoring it is a copy of at most 4704 floats.
        std::copy(c.dout.begin(), c.dout.end(), d.begin());
        ops->backward(l, c.params.data(), c.in.data(), c.out.data(), d.data(), din, c.grads.data());
        benchmark::DoNotOptimize(c.grads.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations());
}

// A batched layer (HostOps::forward_batch / backward_batch) over `count` samples, as
// HostEngine runs the fully connected tail over one thread's slice of a batch.
void layer_batch(benchmark::State& state, const HostOps* ops, const Network& net, size_t k, int count, bool backward) {
    const LayerSpec& l = net.layers[k];
    Rng rng(5);
    const std::vector<float> params = init_params(net, 1);
    const size_t n = static_cast<size_t>(count);
    const std::vector<float> in = random_vector(n * static_cast<size_t>(l.in.size()), rng);
    const std::vector<float> dout = random_vector(n * static_cast<size_t>(l.out.size()), rng);
    std::vector<float> out(dout.size()), d(dout.size()), din(in.size()), grads(params.size(), 0.0f);
    ops->forward_batch(l, params.data(), in.data(), out.data(), count);
    for (auto _ : state) {
        if (backward) {
            std::copy(dout.begin(), dout.end(), d.begin());
            ops->backward_batch(l, params.data(), in.data(), out.data(), d.data(), din.data(), grads.data(), count);
        } else {
            ops->forward_batch(l, params.data(), in.data(), out.data(), count);
        }
        benchmark::DoNotOptimize(grads.data());
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations() * count);
}

// A group of ops->lanes samples through one layer at once (HostOps::forward_lanes /
// backward_lanes), as HostEngine runs the layers before the tail: the backward with the layer
// below, and `folded` as the layer above's backward returns it (the work the engine's step does).
void layer_lanes(benchmark::State& state, const HostOps* ops, const Network& net, size_t k, bool backward) {
    const LayerSpec& l = net.layers[k];
    Rng rng(5);
    const std::vector<float> params = init_params(net, 1);
    const size_t n = static_cast<size_t>(ops->lanes);
    const std::vector<float> in = random_vector(n * static_cast<size_t>(l.in.size()), rng);
    const std::vector<float> dout = random_vector(n * static_cast<size_t>(l.out.size()), rng);
    std::vector<float> out(dout.size()), d(dout.size()), din(in.size()), grads(params.size(), 0.0f);
    ops->forward_lanes(l, params.data(), in.data(), out.data());
    const LayerSpec* below = k > 0 ? &net.layers[k - 1] : nullptr;
    bool folded = false;
    if (k + 1 < net.layers.size() && ops->lanes_supported(net.layers[k + 1])) {
        const LayerSpec& above = net.layers[k + 1];
        std::vector<float> a_out(n * static_cast<size_t>(above.out.size()));
        std::vector<float> a_d = random_vector(a_out.size(), rng), a_grads(params.size(), 0.0f);
        ops->forward_lanes(above, params.data(), out.data(), a_out.data());
        folded = ops->backward_lanes(above, params.data(), out.data(), a_out.data(), a_d.data(), d.data(),
                                     a_grads.data(), &l, false);
    }
    for (auto _ : state) {
        if (backward) {
            std::copy(dout.begin(), dout.end(), d.begin());
            ops->backward_lanes(l, params.data(), in.data(), out.data(), d.data(), k == 0 ? nullptr : din.data(),
                                grads.data(), below, folded);
        } else {
            ops->forward_lanes(l, params.data(), in.data(), out.data());
        }
        benchmark::DoNotOptimize(grads.data());
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations() * ops->lanes);
}

void update(benchmark::State& state, const HostOps* ops, const Network& net) {
    Rng rng(6);
    std::vector<float> p = init_params(net, 1), v(p.size(), 0.0f), g = random_vector(p.size(), rng);
    for (auto _ : state) {
        ops->update(p.data(), v.data(), g.data(), p.size(), 1e-6f, 0.9f, 5e-4f, false);
        benchmark::DoNotOptimize(p.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(p.size()));
}

// A synthetic training set large enough for 16 distinct batches of 64.
Dataset bench_dataset() {
    Dataset d;
    d.count = 1024;
    d.rows = d.cols = 28;
    Rng rng(7);
    d.images.resize(static_cast<size_t>(d.count) * 28 * 28);
    for (auto& px : d.images) px = static_cast<uint8_t>(rng.below(256));
    d.labels.resize(static_cast<size_t>(d.count));
    for (auto& y : d.labels) y = static_cast<uint8_t>(rng.below(10));
    return d;
}

// What a lane group's samples cost HostEngine besides its layers: 8 images staged into the
// group, S4's outputs out of it (for the tail) and their gradients back in; by the engine's scalar
// moves (`engine`) or HostOps' transposes (`avx`). Images from a 47 MB set, as MNIST's (in cache
// the scalar moves cost as much: a float at a time, not memory, is their limit).
void lane_moves(benchmark::State& state, const HostOps* ops, bool vector) {
    const Network net = lenet5_network();
    const int L = ops->lanes;
    const size_t size = static_cast<size_t>(net.layers[3].out.size());  // S4's outputs
    const int count = 60000, pixels = 28 * 28;
    std::vector<uint8_t> images(static_cast<size_t>(count) * pixels);
    Rng rng(8);
    for (auto& px : images) px = static_cast<uint8_t>(rng.below(256));
    float pixel[256];
    for (int b = 0; b < 256; ++b) pixel[b] = net.scaling.value(b);
    LaneGroups groups;
    groups.lanes = L;
    if (vector) {
        groups.vector_to_lanes = ops->to_lanes;
        groups.vector_from_lanes = ops->from_lanes;
    }
    std::vector<float> group(static_cast<size_t>(net.input.size() * L)), lanes(size * L), samples(size * L);
    std::vector<const uint8_t*> batch(static_cast<size_t>(L));
    for (auto _ : state) {
        for (auto& im : batch) im = images.data() + static_cast<size_t>(rng.below(count)) * pixels;
        if (!vector || !ops->images_to_lanes(batch.data(), L, 28, 28, net.input, net.scaling, pixel, group.data()))
            images_to_lanes(batch.data(), L, L, 28, 28, net.input, pixel, group.data());
        groups.from_lanes(lanes.data(), L, size, samples.data());
        groups.to_lanes(samples.data(), L, size, lanes.data());
        benchmark::DoNotOptimize(group.data());
        benchmark::DoNotOptimize(lanes.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations() * L);
}

// forward + backward + update of one batch, waited for (take_counters syncs OpenCL queues).
void step(benchmark::State& state, const std::string& variant, int batch) {
    const Network net = lenet5_network();
    std::unique_ptr<Engine> e;
    try {
        EngineRequest r;
        r.variant = variant;
        e = make_engine(net, r);
    } catch (const std::exception& ex) {
        state.SkipWithError(ex.what());
        return;
    }
    const Dataset data = bench_dataset();
    e->upload(Split::Train, data);
    e->set_params(init_params(net, 1));
    std::vector<int32_t> order(static_cast<size_t>(data.count));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    e->set_order(order);
    int first = 0;
    for (auto _ : state) {
        e->forward(Split::Train, first, batch);
        e->backward();
        e->update(0.01f, 0.9f, 5e-4f);
        e->take_counters();
        first = first + 2 * batch <= data.count ? first + batch : 0;
    }
    state.SetItemsProcessed(state.iterations() * batch);
    state.SetLabel(e->device());
}

void register_all() {
    static const Network net = lenet5_network();
    std::vector<std::pair<std::string, const HostOps*>> ops{{"cpu", &cpu_ops()}};
#ifdef LENET5_HAVE_SIMD
    if (const HostOps* simd = simd_ops()) ops.emplace_back("avx", simd);
#endif
    for (size_t k = 0; k < net.layers.size(); ++k)
        for (const auto& [name, o] : ops) {
            const std::string layer = net.layers[k].name;
            benchmark::RegisterBenchmark(("forward/" + layer + "/" + name).c_str(), layer_forward, o, net, k);
            benchmark::RegisterBenchmark(("backward/" + layer + "/" + name).c_str(), layer_backward, o, net, k);
        }
    for (size_t k = 0; k < net.layers.size(); ++k)
        for (const auto& [name, o] : ops) {
            if (!o->batched || !o->batched(net.layers[k])) continue;
            const std::string tail = net.layers[k].name + "/" + name + "/batch:32";
            benchmark::RegisterBenchmark(("forward/" + tail).c_str(), layer_batch, o, net, k, 32, false);
            benchmark::RegisterBenchmark(("backward/" + tail).c_str(), layer_batch, o, net, k, 32, true);
        }
    for (size_t k = 0; k < net.layers.size(); ++k)
        for (const auto& [name, o] : ops) {
            // The layers HostEngine runs in lane groups: those before the tail of batched layers.
            size_t tail = net.layers.size();
            while (tail > 0 && o->batched && o->batched(net.layers[tail - 1])) --tail;
            if (!o->lanes_supported || !o->lanes_supported(net.layers[k]) || k >= tail) continue;
            const std::string group = net.layers[k].name + "/" + name + "/lanes:" + std::to_string(o->lanes);
            benchmark::RegisterBenchmark(("forward/" + group).c_str(), layer_lanes, o, net, k, false);
            benchmark::RegisterBenchmark(("backward/" + group).c_str(), layer_lanes, o, net, k, true);
        }
    for (const auto& [name, o] : ops) benchmark::RegisterBenchmark(("update/" + name).c_str(), update, o, net);
    for (const auto& [name, o] : ops)
        if (o->lanes > 0) {
            const std::string lanes = "/lanes:" + std::to_string(o->lanes);
            benchmark::RegisterBenchmark(("moves/engine" + lanes).c_str(), lane_moves, o, false);
            benchmark::RegisterBenchmark(("moves/" + name + lanes).c_str(), lane_moves, o, true);
        }

    std::vector<std::string> variants{"cpu"};
#ifdef LENET5_HAVE_SIMD
    variants.insert(variants.end(), {"avx", "omp"});
#endif
#ifdef LENET5_HAVE_OPENCL
    variants.insert(variants.end(), {"gpu", "gpu-constant", "gpu-local"});
#endif
    for (int batch : {1, 64})
        for (const auto& v : variants)
            benchmark::RegisterBenchmark(("step/" + v + "/batch:" + std::to_string(batch)).c_str(), step, v, batch)
                ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
