#include "opencl_engine.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <numeric>
#include <set>

#include "opencl_backend.h"
#include "opencl_kernels.h"
#include "preprocess.h"

namespace lenet5 {
namespace {

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }
size_t floor_pow2(size_t n) {
    size_t p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}
int to_int(size_t n) { return static_cast<int>(n); }
int act_code(Activation a) { return a == Activation::Tanh ? 1 : 0; }  // ACT_TANH / ACT_NONE of common.h

// A convolution whose window covers its whole input and that reads every input map (C5) is a
// fully connected layer with the same weight layout: connection j = o*IC + i holds
// W[o][i][ky][kx] = W[o][(i*IH + ky)*IW + kx]. The fc kernels run it much better.
bool conv_is_fc(const LayerSpec& l) {
    return l.kind == LayerKind::Conv && l.kernel == l.in.h && l.kernel == l.in.w &&
           l.connections() == l.in.c * l.out.c;
}

cl::Buffer sub_buffer(cl::Buffer& parent, const DeviceLayout::Block& block) {
    cl_buffer_region region{block.device * sizeof(float), block.count * sizeof(float)};
    return parent.createSubBuffer(CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region);
}

cl::Buffer int_buffer(const cl::Context& context, const std::vector<int32_t>& values) {
    return cl::Buffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, values.size() * sizeof(int32_t),
                      const_cast<int32_t*>(values.data()));
}

size_t sub_buffer_align(const cl::Device& device) {
    return cl_checked([&] { return device.getInfo<CL_DEVICE_MEM_BASE_ADDR_ALIGN>() / (8 * sizeof(float)); });
}

}  // namespace

OpenCLEngine::OpenCLEngine(Network net, MemoryVariant memory, const OpenCLDevice& device)
    : net_(std::move(net)), memory_(memory), device_(device), layout_(net_, sub_buffer_align(device.device)) {
    const LayerSpec& last = net_.layers.back();
    if (!(last.kind == LayerKind::FullyConnected || conv_is_fc(last)) || last.activation != Activation::None)
        throw Error("the OpenCL variants need the last layer (" + last.name +
                    ") to be fully connected without activation: it is fused with the softmax");
    cl_checked([&] {
        const cl::Device& dev = device_.device;
        context_ = cl::Context(dev);
        queue_ = cl::CommandQueue(context_, dev, CL_QUEUE_PROFILING_ENABLE);
        // Work-group sizes from the device's limits: WG items for the element-wise kernels, REDUCE
        // (up to 1024) for the weight-gradient reductions, TILE x TILE for gpu-local's matrix
        // kernels, and up to 64 samples for the kernels that lay samples along dimension 0.
        const size_t max_group = dev.getInfo<CL_DEVICE_MAX_WORK_GROUP_SIZE>();
        const auto item_sizes = dev.getInfo<CL_DEVICE_MAX_WORK_ITEM_SIZES>();
        wg_ = floor_pow2(std::min({size_t{256}, max_group, item_sizes[0]}));
        reduce_ = floor_pow2(std::min({size_t{1024}, max_group, item_sizes[0]}));
        tile_ = 16;
        while (tile_ > 1 && (tile_ * tile_ > max_group || tile_ > item_sizes[0] || tile_ > item_sizes[1])) tile_ /= 2;
        sample_group_ = std::min<size_t>(wg_, 64);
        local_mem_ = dev.getInfo<CL_DEVICE_LOCAL_MEM_SIZE>();
        layers_.assign(net_.layers.size(), Layer{});
        build_programs();

        const size_t bytes = layout_.size() * sizeof(float);
        params_ = cl::Buffer(context_, CL_MEM_READ_WRITE, bytes);
        grads_ = cl::Buffer(context_, CL_MEM_READ_WRITE, bytes);
        velocity_ = cl::Buffer(context_, CL_MEM_READ_WRITE, bytes);
        // The host's byte -> input conversion (preprocess.h) of all 256 byte values: the device
        // converts by lookup, so both sides use the same floats.
        std::vector<uint8_t> all(256);
        std::iota(all.begin(), all.end(), uint8_t{0});
        std::vector<float> values(256);
        image_to_input(all.data(), 1, 256, Shape{1, 1, 256}, values.data());
        byte_values_ = cl::Buffer(context_, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, 256 * sizeof(float), values.data());
        plan_layers();
        set_params(std::vector<float>(net_.param_count, 0.0f));
    });
}

std::string OpenCLEngine::variant() const {
    switch (memory_) {
        case MemoryVariant::Global: return "gpu";
        case MemoryVariant::Constant: return "gpu-constant";
        case MemoryVariant::Local: return "gpu-local";
    }
    return "gpu";
}

void OpenCLEngine::build_programs() {
    const cl::Device& dev = device_.device;
    const std::string source = opencl_kernel_source();
    // When every convolution the conv kernels run has the same window, it is fixed at compile time.
    std::set<int> windows;
    for (const auto& l : net_.layers)
        if (l.kind == LayerKind::Conv && !conv_is_fc(l)) windows.insert(l.kernel);
    const std::string fixed = windows.size() == 1 ? " -DCONV_K=" + std::to_string(*windows.begin()) : "";
    // LENET5_CL_OPTIONS: extra options for the OpenCL compiler, for experiments.
    const char* env = std::getenv("LENET5_CL_OPTIONS");
    const std::string extra = env && *env ? std::string(" ") + env : "";
    auto build = [&](const char* memory) {
        return build_program(context_, dev, source,
                             "-cl-std=CL1.2 -DREDUCE=" + std::to_string(reduce_) + " -DTILE=" + std::to_string(tile_) +
                                 fixed + memory + extra);
    };
    const char* memory = memory_ == MemoryVariant::Constant ? " -DMEM_CONSTANT"
                         : memory_ == MemoryVariant::Local  ? " -DMEM_LOCAL"
                                                            : "";
    program_ = build(memory);
    // A compiled kernel may allow smaller groups than the device (NVIDIA: 256 for every kernel);
    // conv_pool_backward needs exactly REDUCE items, so build again with what it allows.
    const size_t allowed =
        floor_pow2(cl::Kernel(program_, "conv_pool_backward").getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(dev));
    if (allowed < reduce_) {
        reduce_ = allowed;
        program_ = build(memory);
    }
    if (memory_ != MemoryVariant::Constant) return;
    // A layer whose weights and biases exceed the device's __constant limit (C5's 192 KB against
    // NVIDIA's 64 KB) reads them from __global instead, through a second build.
    const cl_ulong limit = dev.getInfo<CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE>();
    for (size_t k = 0; k < net_.layers.size(); ++k) {
        const LayerSpec& l = net_.layers[k];
        const size_t bytes = (l.weight_count + l.bias_count) * sizeof(float);
        if (bytes <= limit) continue;
        layers_[k].weights_global = true;
        std::cerr << "lenet5: note: gpu-constant: layer " << l.name << " has " << bytes
                  << " bytes of weights and biases, over CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE (" << limit << " bytes) of "
                  << device_.name << "; it reads them from __global memory\n";
    }
    if (std::any_of(layers_.begin(), layers_.end(), [](const Layer& l) { return l.weights_global; }))
        global_program_ = build("");
}

void OpenCLEngine::plan_layers() {
    for (size_t k = 0; k < net_.layers.size(); ++k) {
        const LayerSpec& l = net_.layers[k];
        Layer& d = layers_[k];
        d.fc = l.kind == LayerKind::FullyConnected || conv_is_fc(l);
        d.W = sub_buffer(params_, layout_.weights(k));
        d.b = sub_buffer(params_, layout_.bias(k));
        d.gW = sub_buffer(grads_, layout_.weights(k));
        d.gb = sub_buffer(grads_, layout_.bias(k));
        if (d.fc) continue;
        // A convolution runs fused with the subsampling after it (conv_pool.cl).
        const bool pair_conv = l.kind == LayerKind::Conv && k + 1 < net_.layers.size() &&
                               net_.layers[k + 1].kind == LayerKind::Subsample;
        const bool pair_pool = l.kind == LayerKind::Subsample && k > 0 && layers_[k - 1].pair_conv;
        if (!pair_conv && !pair_pool)
            throw Error("the OpenCL variants run each convolution fused with a subsampling right after it; layer " +
                        l.name + " is not part of such a pair");
        d.pair_conv = pair_conv;
        if (pair_conv) {
            // The inverse of network.h's lists: the connections reading each input map, in order.
            std::vector<int32_t> in_begin, in_conn;
            for (int i = 0; i < l.in.c; ++i) {
                in_begin.push_back(static_cast<int32_t>(in_conn.size()));
                for (int j = 0; j < l.connections(); ++j)
                    if (l.conn_in[static_cast<size_t>(j)] == i) in_conn.push_back(j);
            }
            in_begin.push_back(static_cast<int32_t>(in_conn.size()));
            d.conn_begin = int_buffer(context_, l.conn_begin);
            d.conn_in = int_buffer(context_, l.conn_in);
            d.conn_out = int_buffer(context_, l.conn_out);
            d.in_begin = int_buffer(context_, in_begin);
            d.in_conn = int_buffer(context_, in_conn);
        }
        if (runs_.empty() || runs_.back().last + 1 != k) runs_.push_back({layout_.weights(k).device, 0, k, {}, {}});
        Run& run = runs_.back();
        run.last = k;
        run.n = layout_.bias(k).device + layout_.bias(k).count - run.begin;
        d.run = static_cast<int>(runs_.size() - 1);
    }
    const size_t n = layout_.size();
    update_ = {kernel(program_, "sgd_momentum", params_, velocity_, grads_, to_int(n), 0.0f, 0.0f, 0.0f),
               {round_up(n, wg_), 1}, {wg_, 1}};
    update_.label = "params sgd_momentum";
}

template <class... Args>
cl::Kernel OpenCLEngine::kernel(const cl::Program& program, const char* name, const Args&... args) {
    try {
        cl::Kernel k(program, name);
        cl_uint index = 0;
        (k.setArg(index++, args), ...);
        return k;
    } catch (const cl::Error& e) {
        throw Error(cl_failure(e).what() + std::string(" for kernel ") + name);
    }
}

// Buffers and launches for batches of up to `capacity` samples. Arguments that change per
// step (the batch count, the gathered rows, the loss scale and slot) are set by forward().
void OpenCLEngine::plan_batch(int capacity) {
    capacity_ = capacity;
    const size_t cap = static_cast<size_t>(capacity);
    acts_.clear();
    deltas_.clear();
    batch_in_ = cl::Buffer(context_, CL_MEM_READ_WRITE, cap * static_cast<size_t>(net_.input.size()) * sizeof(float));
    batch_labels_ = cl::Buffer(context_, CL_MEM_READ_WRITE, cap);
    for (const auto& l : net_.layers) {
        const size_t bytes = cap * static_cast<size_t>(l.out.size()) * sizeof(float);
        acts_.emplace_back(context_, CL_MEM_READ_WRITE, bytes);
        deltas_.emplace_back(context_, CL_MEM_READ_WRITE, bytes);
    }
    poison_activations();

    const bool local = memory_ == MemoryVariant::Local;
    const size_t T = tile_, sg = sample_group_;
    // The NDRange shapes. per_element: (round_up(n, WG), count), one item per element of a sample.
    // per_sample: (round_up(count, sg), n), samples along dimension 0. tiled: (round_up(n, TILE),
    // round_up(count, TILE)) in TILE x TILE groups. fixed: independent of the batch.
    auto per_element = [&](cl::Kernel k, size_t n, int count_arg = -1) {
        return Launch{std::move(k), {round_up(n, wg_), 1}, {wg_, 1}, 1, 1, 1, count_arg};
    };
    auto per_sample = [&](cl::Kernel k, size_t n, int count_arg) {
        return Launch{std::move(k), {1, n}, {sg, 1}, 0, sg, sg, count_arg};
    };
    auto tiled = [&](cl::Kernel k, size_t n, int count_arg) {
        return Launch{std::move(k), {round_up(n, T), 1}, {T, T}, 1, T, T, count_arg};
    };
    auto fixed = [&](cl::Kernel k, std::array<size_t, 2> global, std::array<size_t, 2> group, int count_arg) {
        return Launch{std::move(k), global, group, -1, 1, 1, count_arg};
    };
    // conv_pool_backward: work-groups of REDUCE items per chunk of samples, each with a reduction
    // scratch and a tile (conv_pool.cl): __local in gpu-local, else a __global slice per group.
    const size_t chunks = std::min<size_t>(cap, kMaxChunks);
    size_t most_groups = 1, most_tile = 1;
    for (size_t k = 0; k < net_.layers.size(); ++k)
        if (layers_[k].pair_conv) {
            most_groups = std::max(most_groups, pair_groups(k));
            most_tile = std::max(most_tile, pair_tile_floats(k));
        }
    if (!local) {
        scratch_ = cl::Buffer(context_, CL_MEM_READ_WRITE, chunks * most_groups * reduce_ * sizeof(float));
        tiles_ = cl::Buffer(context_, CL_MEM_READ_WRITE, chunks * most_groups * most_tile * sizeof(float));
    }
    auto per_chunk_groups = [&](cl::Kernel k, size_t groups, size_t tile_floats) {
        if (local) {
            k.setArg(32, cl::Local(reduce_ * sizeof(float)));
            k.setArg(33, cl::Local(tile_floats * sizeof(float)));
        } else {
            k.setArg(32, scratch_);
            k.setArg(33, tiles_);
        }
        k.setArg(34, to_int(tile_floats));
        Launch launch{std::move(k), {1, 1}, {reduce_, 1}, 0, 1, groups * reduce_, 30};
        launch.chunk_arg = 31;
        return launch;
    };

    // The data set, rows and first are set by forward().
    gather_ = per_element(kernel(program_, "gather_batch", cl::Buffer(), cl::Buffer(), cl::Buffer(), 0,
                                 net_.input.size(), batch_in_, batch_labels_),
                          static_cast<size_t>(net_.input.size()));
    for (auto& run : runs_) {
        const size_t bytes = chunks * run.n * sizeof(float);
        run.partial = cl::Buffer(context_, CL_MEM_READ_WRITE, bytes);
        queue_.enqueueFillBuffer(run.partial, 0.0f, 0, bytes);
        run.sum = fixed(kernel(program_, "sum_partials", run.partial, to_int(run.n), 0, 1, grads_, to_int(run.begin)),
                        {round_up(run.n, wg_), 1}, {wg_, 1}, 2);
        run.sum.chunk_arg = 3;
        check_fits(run.sum, net_.layers[run.last].name);
    }

    for (size_t k = 0; k < net_.layers.size(); ++k) {
        const LayerSpec& l = net_.layers[k];
        Layer& d = layers_[k];
        const cl::Program& program = d.weights_global ? global_program_ : program_;
        const cl::Buffer& in = k ? acts_[k - 1] : batch_in_;
        const cl::Buffer& out = acts_[k];
        const cl::Buffer& delta = deltas_[k];
        const int act = act_code(l.activation), prev_act = k ? act_code(net_.layers[k - 1].activation) : 0;
        const size_t in_size = static_cast<size_t>(l.in.size()), out_size = static_cast<size_t>(l.out.size());
        const int IC = l.in.c, IH = l.in.h, IW = l.in.w, OC = l.out.c, OH = l.out.h, OW = l.out.w, K = l.kernel;
        if (d.fc) {
            const int I = to_int(in_size), O = to_int(out_size);
            if (k + 1 == net_.layers.size()) {
                // Item (o, s): O rounded up to a power of two, times enough samples for ~64 items.
                // The loss scale and the slot are set per step.
                const size_t op = floor_pow2(2 * out_size - 1), samples = std::max(size_t{1}, sg / op);
                d.forward = {kernel(program, "output_forward", in, d.W, d.b, out, I, O, 0, batch_labels_, 1.0f, delta,
                                    losses_, hits_, 0),
                             {op, 1}, {op, samples}, 1, samples, samples, 6};
            } else {
                cl::Kernel forward = kernel(program, "fc_forward", in, d.W, d.b, out, I, O, act, 0);
                d.forward = local ? tiled(forward, out_size, 7) : per_sample(forward, out_size, 7);
            }
            cl::Kernel weights = kernel(program, "fc_backward_weights", in, delta, d.gW, d.gb, I, O, 0);
            d.weights = local ? fixed(weights, {round_up(in_size, T), round_up(out_size, T)}, {T, T}, 6)
                              : fixed(weights, {round_up(out_size * in_size + out_size, wg_), 1}, {wg_, 1}, 6);
            if (k) {
                cl::Kernel input =
                    kernel(program, "fc_backward_input", delta, d.W, acts_[k - 1], prev_act, deltas_[k - 1], I, O, 0);
                d.input = local ? tiled(input, in_size, 7) : per_sample(input, in_size, 7);
            }
        } else if (d.pair_conv) {
            // The pair: this convolution and the subsampling after it (layer k + 1), which has no
            // launches of its own.
            const LayerSpec& pool = net_.layers[k + 1];
            const Layer& p = layers_[k + 1];
            const Run& run = runs_[static_cast<size_t>(d.run)];
            auto at = [&](const DeviceLayout::Block& block) { return to_int(block.device - run.begin); };
            const int PK = pool.kernel, PH = pool.out.h, PW = pool.out.w;
            const int pool_act = act_code(pool.activation);
            d.forward = per_element(kernel(program, "conv_pool_forward", in, d.W, d.b, p.W, p.b, out, acts_[k + 1],
                                           d.conn_begin, d.conn_in, IC, IH, IW, OC, OH, OW, K, act, PK, PH, PW, pool_act),
                                    static_cast<size_t>(pool.out.size()));
            d.weights = per_chunk_groups(
                kernel(program, "conv_pool_backward", in, out, deltas_[k + 1], d.W, p.W, run.partial, to_int(run.n),
                       at(layout_.weights(k)), at(layout_.bias(k)), at(layout_.weights(k + 1)), at(layout_.bias(k + 1)),
                       d.conn_begin, d.conn_out, d.conn_in, d.in_begin, d.in_conn, IC, IH, IW, OC, OH, OW, K, act, PK, PH,
                       PW, prev_act, k ? 1 : 0, k ? deltas_[k - 1] : delta, 0, 1),
                pair_groups(k), pair_tile_floats(k));
            // gpu-local stages the sample's input, the weights and biases.
            if (local) d.forward.kernel.setArg(21, cl::Local((in_size + l.weight_count + l.bias_count) * sizeof(float)));
        } else {
            continue;  // the subsampling of a pair
        }
        check_fits(d.forward, l.name);
        check_fits(d.weights, l.name);
        if (d.fc && k) check_fits(d.input, l.name);
    }
    // A step: gather, every layer (or pair) forward; from the last layer down, its weight gradients
    // (for a pair: the samples' shares) and the previous layer's delta, which the next layer down
    // reads; then the samples' shares added up.
    auto has = [](const Launch& launch) { return launch.kernel() != nullptr; };
    forward_launches_ = {&gather_};
    for (auto& layer : layers_)
        if (has(layer.forward)) forward_launches_.push_back(&layer.forward);
    backward_launches_.clear();
    for (size_t k = layers_.size(); k-- > 0;) {
        if (has(layers_[k].weights)) backward_launches_.push_back(&layers_[k].weights);
        if (has(layers_[k].input)) backward_launches_.push_back(&layers_[k].input);
    }
    for (auto& run : runs_) backward_launches_.push_back(&run.sum);
    // Labels for the per-kernel profile: the layer (or run) and the kernel.
    auto label = [](Launch& launch, const std::string& owner) {
        launch.label = owner + " " + launch.kernel.getInfo<CL_KERNEL_FUNCTION_NAME>();
    };
    label(gather_, "batch");
    for (size_t k = 0; k < layers_.size(); ++k) {
        const std::string name = net_.layers[k].name + (layers_[k].pair_conv ? "+" + net_.layers[k + 1].name : "");
        for (Launch* launch : {&layers_[k].forward, &layers_[k].weights, &layers_[k].input})
            if (has(*launch)) label(*launch, name);
    }
    for (auto& run : runs_) label(run.sum, net_.layers[run.last].name);
}

// conv_pool_backward's work-groups per sample for the pair at conv layer k: one per output map,
// and unless it is the first layer, one per input map.
size_t OpenCLEngine::pair_groups(size_t k) const {
    const LayerSpec& l = net_.layers[k];
    return static_cast<size_t>(l.out.c + (k ? l.in.c : 0));
}

// The floats of conv_pool_backward's tile for the pair at conv layer k: the larger of what a
// gradient group and a previous-delta group stage (see conv_pool.cl).
size_t OpenCLEngine::pair_tile_floats(size_t k) const {
    const LayerSpec& l = net_.layers[k];
    const LayerSpec& pool = net_.layers[k + 1];
    const size_t C = static_cast<size_t>(l.out.h * l.out.w), P = static_cast<size_t>(pool.out.h * pool.out.w);
    const size_t M = static_cast<size_t>(l.in.h * l.in.w), maps = static_cast<size_t>(l.out.c);
    const bool local = memory_ == MemoryVariant::Local;
    size_t most_conn = 0;
    for (size_t o = 0; o < maps; ++o)
        most_conn = std::max(most_conn, static_cast<size_t>(l.conn_begin[o + 1] - l.conn_begin[o]));
    size_t floats = 2 * C + P + (local ? most_conn * M : 0);
    if (k) floats = std::max(floats, maps * C + (local ? l.weight_count : 0));
    return floats;
}

// Fails clearly, before any launch, when the device cannot run a launch's work-group.
void OpenCLEngine::check_fits(const Launch& launch, const std::string& layer) const {
    const cl::Device& dev = device_.device;
    const std::string name = launch.kernel.getInfo<CL_KERNEL_FUNCTION_NAME>();
    const size_t group = launch.local[0] * launch.local[1];
    const size_t max_group = launch.kernel.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(dev);
    if (group > max_group)
        throw Error(variant() + ": layer " + layer + ": kernel " + name + " needs work-groups of " +
                    std::to_string(group) + " items; " + device_.name + " allows " + std::to_string(max_group) +
                    " for it (CL_KERNEL_WORK_GROUP_SIZE)");
    const cl_ulong local = launch.kernel.getWorkGroupInfo<CL_KERNEL_LOCAL_MEM_SIZE>(dev);
    if (local > local_mem_)
        throw Error(variant() + ": layer " + layer + ": kernel " + name + " needs " + std::to_string(local) +
                    " bytes of __local memory; " + device_.name + " has " + std::to_string(local_mem_) +
                    " (CL_DEVICE_LOCAL_MEM_SIZE)");
}

void OpenCLEngine::enqueue(Launch& launch, int count, cl::Event* event) {
    if (launch.count_arg >= 0) launch.kernel.setArg(static_cast<cl_uint>(launch.count_arg), count);
    size_t step = launch.batch_step;
    if (launch.chunk_arg >= 0) {
        // Chunks of one sample up to kMaxChunks samples, then larger: at most kMaxChunks of them.
        const int chunk = (count + kMaxChunks - 1) / kMaxChunks;
        launch.kernel.setArg(static_cast<cl_uint>(launch.chunk_arg), chunk);
        step = static_cast<size_t>(chunk);
    }
    auto global = launch.global;
    if (launch.batch_dim >= 0)
        global[static_cast<size_t>(launch.batch_dim)] = (static_cast<size_t>(count) + step - 1) / step * launch.batch_items;
    queue_.enqueueNDRangeKernel(launch.kernel, cl::NullRange, cl::NDRange(global[0], global[1]),
                                cl::NDRange(launch.local[0], launch.local[1]), nullptr, event);
}

void OpenCLEngine::enqueue_phase(Phase phase, const std::vector<Launch*>& launches, int count) {
    Span span{{}, {}, phase};
    for (size_t i = 0; i < launches.size(); ++i) {
        cl::Event event;
        const bool edge = i == 0 || i + 1 == launches.size();
        enqueue(*launches[i], count, profile_ || edge ? &event : nullptr);
        if (i == 0) span.first = event;
        if (i + 1 == launches.size()) span.last = event;
        if (profile_) launch_events_.emplace_back(launches[i]->label, event);
    }
    spans_.push_back(std::move(span));
}

void OpenCLEngine::write(const cl::Buffer& buffer, const void* data, size_t bytes) {
    cl::Event event;
    queue_.enqueueWriteBuffer(buffer, CL_TRUE, 0, bytes, data, nullptr, &event);
    spans_.push_back({event, event, Phase::Transfer});
}

void OpenCLEngine::read(const cl::Buffer& buffer, void* data, size_t bytes) {
    cl::Event event;
    queue_.enqueueReadBuffer(buffer, CL_TRUE, 0, bytes, data, nullptr, &event);
    spans_.push_back({event, event, Phase::Transfer});
}

// NaN in every activation and delta, so that an element a kernel fails to write shows up.
void OpenCLEngine::poison_activations() {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (const auto* buffers : {&acts_, &deltas_})
        for (const auto& b : *buffers) queue_.enqueueFillBuffer(b, nan, 0, b.getInfo<CL_MEM_SIZE>());
}

void OpenCLEngine::upload(Split split, const Dataset& data) {
    cl_checked([&] {
        const Shape& in = net_.input;
        if (data.count <= 0) throw Error("cannot upload an empty data set");
        if (in.c != 1 || data.rows > in.h || data.cols > in.w)
            throw Error("images of " + std::to_string(data.rows) + "x" + std::to_string(data.cols) +
                        " do not fit the network's input " + std::to_string(in.c) + "x" + std::to_string(in.h) + "x" +
                        std::to_string(in.w));
        collect_counters();  // the loss slots may be replaced below
        SplitData& d = split == Split::Train ? train_ : test_;
        const size_t count = static_cast<size_t>(data.count);
        d.count = data.count;
        // The bytes go up once and are converted on the device; the byte buffer is released when
        // the conversion has run.
        cl::Buffer bytes(context_, CL_MEM_READ_ONLY, data.images.size());
        write(bytes, data.images.data(), data.images.size());
        d.inputs = cl::Buffer(context_, CL_MEM_READ_WRITE, count * static_cast<size_t>(in.size()) * sizeof(float));
        d.labels = cl::Buffer(context_, CL_MEM_READ_ONLY, count);
        write(d.labels, data.labels.data(), count);
        Launch convert{kernel(program_, "images_to_inputs", bytes, data.rows, data.cols, byte_values_, d.inputs, in.h, in.w),
                       {round_up(static_cast<size_t>(in.h * in.w), wg_), count},
                       {wg_, 1}};
        enqueue_phase(Phase::Transfer, {&convert}, 0);
        if (split == Split::Train) {
            order_ = cl::Buffer(context_, CL_MEM_READ_ONLY, count * sizeof(int32_t));
            order_set_ = false;
        }
        // The identity rows and the loss slots cover the larger split (a batch never exceeds it).
        const int larger = std::max(train_.count, test_.count);
        if (larger > slots_) {
            slots_ = larger;
            std::vector<int32_t> identity(static_cast<size_t>(larger));
            std::iota(identity.begin(), identity.end(), 0);
            identity_ = cl::Buffer(context_, CL_MEM_READ_ONLY, identity.size() * sizeof(int32_t));
            write(identity_, identity.data(), identity.size() * sizeof(int32_t));
            losses_ = cl::Buffer(context_, CL_MEM_READ_WRITE, identity.size() * sizeof(float));
            hits_ = cl::Buffer(context_, CL_MEM_READ_WRITE, identity.size() * sizeof(int32_t));
            capacity_ = 0;  // the launches refer to the old buffers: plan again
        }
    });
}

void OpenCLEngine::write_flat(const cl::Buffer& buffer, const std::vector<float>& values) {
    const auto device = layout_.to_device(values);
    write(buffer, device.data(), device.size() * sizeof(float));
}

std::vector<float> OpenCLEngine::read_flat(const cl::Buffer& buffer) {
    std::vector<float> device(layout_.size());
    read(buffer, device.data(), device.size() * sizeof(float));
    return layout_.to_host(device);
}

void OpenCLEngine::set_params(const std::vector<float>& params) {
    check_param_count(net_, params, "parameter buffer");
    cl_checked([&] {
        write_flat(params_, params);
        queue_.enqueueFillBuffer(velocity_, 0.0f, 0, layout_.size() * sizeof(float));
        // NaN in every gradient (zero in the padding, which the update reads too).
        write_flat(grads_, std::vector<float>(net_.param_count, std::numeric_limits<float>::quiet_NaN()));
        poison_activations();
    });
}

std::vector<float> OpenCLEngine::params() {
    return cl_checked([&] { return read_flat(params_); });
}

void OpenCLEngine::set_momentum_buffer(const std::vector<float>& velocity) {
    check_param_count(net_, velocity, "momentum buffer");
    cl_checked([&] { write_flat(velocity_, velocity); });
}

std::vector<float> OpenCLEngine::momentum_buffer() {
    return cl_checked([&] { return read_flat(velocity_); });
}

void OpenCLEngine::set_order(const std::vector<int32_t>& order) {
    if (order.size() != static_cast<size_t>(train_.count))
        throw Error("the training order has " + std::to_string(order.size()) + " entries, the training set " +
                    std::to_string(train_.count) + " samples");
    for (int32_t i : order)
        if (i < 0 || i >= train_.count) throw Error("the training order names sample " + std::to_string(i) + ", outside the training set");
    cl_checked([&] {
        // Non-blocking: the host copy must outlive the upload, so wait for the previous one first.
        if (order_written_()) order_written_.wait();
        order_host_ = order;
        queue_.enqueueWriteBuffer(order_, CL_FALSE, 0, order.size() * sizeof(int32_t), order_host_.data(), nullptr,
                                  &order_written_);
        spans_.push_back({order_written_, order_written_, Phase::Transfer});
        order_set_ = true;
    });
}

void OpenCLEngine::forward(Split split, int first, int count) {
    const bool train = split == Split::Train;
    const SplitData& data = train ? train_ : test_;
    if (data.count == 0) throw Error(std::string("forward() on the ") + (train ? "training" : "test") + " set before upload()");
    if (train && !order_set_) throw Error("forward() on the training set before set_order()");
    if (count <= 0 || first < 0 || first + count > data.count)
        throw Error("batch " + std::to_string(first) + "+" + std::to_string(count) + " is outside the " +
                    (train ? "training order" : "test set"));
    cl_checked([&] {
        if (count > capacity_) plan_batch(count);
        if (cursor_ + count > slots_) collect_counters();
        gather_.kernel.setArg(0, data.inputs);
        gather_.kernel.setArg(1, data.labels);
        gather_.kernel.setArg(2, train ? order_ : identity_);
        gather_.kernel.setArg(3, first);
        cl::Kernel& output = layers_.back().forward.kernel;
        output.setArg(8, 1.0f / static_cast<float>(count));
        output.setArg(12, cursor_);
        enqueue_phase(Phase::Forward, forward_launches_, count);
        cursor_ += count;
        count_ = count;
        last_was_train_ = train;
    });
}

void OpenCLEngine::backward() {
    if (!last_was_train_) throw Error("backward() needs a training forward() first");
    cl_checked([&] {
        enqueue_phase(Phase::Backward, backward_launches_, count_);
    });
}

void OpenCLEngine::update(float lr, float momentum, float weight_decay) {
    cl_checked([&] {
        update_.kernel.setArg(4, lr);
        update_.kernel.setArg(5, momentum);
        update_.kernel.setArg(6, weight_decay);
        enqueue_phase(Phase::Update, {&update_}, 0);
        queue_.flush();  // hand the step to the device now, without waiting for it
    });
}

// Reads back the per-sample losses and hits since the last collection and sums them in sample
// order (the order the host engine sums in).
void OpenCLEngine::collect_counters() {
    if (cursor_ == 0) return;
    const size_t n = static_cast<size_t>(cursor_);
    std::vector<float> loss(n);
    std::vector<int32_t> hit(n);
    read(losses_, loss.data(), n * sizeof(float));
    read(hits_, hit.data(), n * sizeof(int32_t));
    for (size_t s = 0; s < n; ++s) {
        counters_.loss_sum += loss[s];
        counters_.correct += hit[s];
    }
    counters_.samples += cursor_;
    cursor_ = 0;
}

Counters OpenCLEngine::take_counters() {
    return cl_checked([&] {
        collect_counters();
        const Counters c = counters_;
        counters_ = {};
        return c;
    });
}

PhaseTimes OpenCLEngine::take_times() {
    return cl_checked([&] {
        queue_.finish();
        PhaseTimes t;
        for (const auto& [first, last, phase] : spans_) {
            const auto start = first.getProfilingInfo<CL_PROFILING_COMMAND_START>();
            const auto end = last.getProfilingInfo<CL_PROFILING_COMMAND_END>();
            const double ms = static_cast<double>(end - start) * 1e-6;
            switch (phase) {
                case Phase::Forward: t.forward_ms += ms; break;
                case Phase::Backward: t.backward_ms += ms; break;
                case Phase::Update: t.update_ms += ms; break;
                case Phase::Transfer: t.transfer_ms += ms; break;
            }
        }
        spans_.clear();
        return t;
    });
}

std::vector<KernelTime> OpenCLEngine::take_kernel_times() {
    return cl_checked([&] {
        queue_.finish();
        std::vector<KernelTime> times;
        for (const auto& [label, event] : launch_events_) {
            const auto start = event.getProfilingInfo<CL_PROFILING_COMMAND_START>();
            const auto end = event.getProfilingInfo<CL_PROFILING_COMMAND_END>();
            add_kernel_time(times, label, 1, static_cast<double>(end - start) * 1e-6);
        }
        launch_events_.clear();
        return times;
    });
}

std::vector<float> OpenCLEngine::layer_output(size_t layer) {
    if (count_ == 0) throw Error("layer_output() before forward()");
    return cl_checked([&] {
        std::vector<float> v(static_cast<size_t>(count_) * static_cast<size_t>(net_.layers.at(layer).out.size()));
        read(acts_.at(layer), v.data(), v.size() * sizeof(float));
        return v;
    });
}

std::vector<float> OpenCLEngine::gradients() {
    return cl_checked([&] { return read_flat(grads_); });
}

std::unique_ptr<Engine> make_opencl_engine(const Network& net, const std::string& variant, int device) {
    MemoryVariant memory;
    if (variant == "gpu") memory = MemoryVariant::Global;
    else if (variant == "gpu-constant") memory = MemoryVariant::Constant;
    else if (variant == "gpu-local") memory = MemoryVariant::Local;
    else throw Error("'" + variant + "' is not an OpenCL variant");
    return std::make_unique<OpenCLEngine>(net, memory, select_opencl_device(device));
}

}  // namespace lenet5
