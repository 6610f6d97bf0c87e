#include "opencl_engine.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <numeric>
#include <set>
#include <array>

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
        const size_t max_group = dev.getInfo<CL_DEVICE_MAX_WORK_GROUP_SIZE>();
        const auto item_sizes = dev.getInfo<CL_DEVICE_MAX_WORK_ITEM_SIZES>();
        wg_ = floor_pow2(std::min({size_t{256}, max_group, item_sizes[0]}));
        // A per-sample work-group shares each layer's outputs among its items: a GPU runs one
        // group per sample on a compute unit and wants as many items there as it can run (the
        // kernels are latency-bound); a CPU runs a group's items one after another on a core.
        sample_group_ = floor_pow2(std::min({device_.is_gpu ? size_t{1024} : size_t{64}, max_group, item_sizes[0]}));
        local_mem_ = dev.getInfo<CL_DEVICE_LOCAL_MEM_SIZE>();
        compile_program();

        const size_t bytes = layout_.size() * sizeof(float);
        params_ = cl::Buffer(context_, CL_MEM_READ_WRITE, bytes);
        grads_ = cl::Buffer(context_, CL_MEM_READ_WRITE, bytes);
        velocity_ = cl::Buffer(context_, CL_MEM_READ_WRITE, bytes);
        if (memory_ == MemoryVariant::Constant) {
            const cl_buffer_region region{0, std::max<size_t>(const_floats_, 1) * sizeof(float)};
            const_params_ = params_.createSubBuffer(CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &region);
        }
        // The host's byte -> input conversion (preprocess.h) of all 256 byte values: the device
        // converts by lookup, so both sides use the same floats.
        std::vector<uint8_t> all(256);
        std::iota(all.begin(), all.end(), uint8_t{0});
        std::vector<float> values(256);
        image_to_input(all.data(), 1, 256, Shape{1, 1, 256}, values.data());
        byte_values_ = cl::Buffer(context_, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, 256 * sizeof(float), values.data());
        plan_table();
        const size_t n = layout_.size();
        update_ = {kernel("sgd_momentum", params_, velocity_, grads_, to_int(n), 0.0f, 0.0f, 0.0f), round_up(n, wg_), wg_};
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

void OpenCLEngine::compile_program() {
    const cl::Device& dev = device_.device;
    const char* memory = memory_ == MemoryVariant::Constant ? " -DMEM_CONSTANT"
                         : memory_ == MemoryVariant::Local  ? " -DMEM_LOCAL"
                                                            : "";
    // Window edges shared by every convolution (those not run as fully connected) or every
    // subsampling are fixed at compile time.
    std::set<int> conv_windows, pool_windows;
    for (const auto& l : net_.layers) {
        if (l.kind == LayerKind::Conv && !conv_is_fc(l)) conv_windows.insert(l.kernel);
        if (l.kind == LayerKind::Subsample) pool_windows.insert(l.kernel);
    }
    std::string windows;
    if (conv_windows.size() == 1) windows += " -DCONV_K=" + std::to_string(*conv_windows.begin());
    if (pool_windows.size() == 1) windows += " -DPOOL_K=" + std::to_string(*pool_windows.begin());
    // NVIDIA's compiler sizes registers for 256 items per group unless told the budget; its
    // extensions say how many registers a group has and take the limit per item.
    const std::string extensions = dev.getInfo<CL_DEVICE_EXTENSIONS>();
    cl_uint registers = 0;
    if (extensions.find("cl_nv_compiler_options") != std::string::npos &&
        extensions.find("cl_nv_device_attribute_query") != std::string::npos)
        registers = dev.getInfo<CL_DEVICE_REGISTERS_PER_BLOCK_NV>();
    auto build = [&] {
        std::string options = "-cl-std=CL1.2 -DSAMPLE_GROUP=" + std::to_string(sample_group_) + windows + memory;
        if (registers) options += " -cl-nv-maxrregcount=" + std::to_string(std::min<size_t>(255, registers / sample_group_));
        program_ = build_program(context_, dev, opencl_kernel_source(), options);
    };
    build();
    // A compiled kernel may still allow fewer items than asked for (registers): halve until it fits.
    auto allowed = [&] {
        size_t n = sample_group_;
        for (const char* name : {"forward_samples", "backward_samples"})
            n = std::min(n, cl::Kernel(program_, name).getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(dev));
        return n;
    };
    while (sample_group_ > 1 && allowed() < sample_group_) {
        sample_group_ = floor_pow2(allowed());
        build();
    }
    if (memory_ != MemoryVariant::Constant) return;
    // __constant takes the parameters up to the first layer whose weights and biases would pass
    // the device's limit (C5's 192 KB against NVIDIA's 64 KB); the kernels read the rest from __global.
    const cl_ulong limit = dev.getInfo<CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE>();
    for (size_t k = 0; k < net_.layers.size(); ++k) {
        const auto& bias = layout_.bias(k);
        const size_t end = bias.device + bias.count;
        if (end * sizeof(float) > limit) {
            std::cerr << "lenet5: note: gpu-constant: the parameters from layer " << net_.layers[k].name
                      << " on pass CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE (" << limit << " bytes) of " << device_.name
                      << "; they are read from __global memory\n";
            return;
        }
        const_floats_ = end;
    }
}

// The layer table and connection lists of common.h, and the arena offsets.
void OpenCLEngine::plan_table() {
    std::vector<int32_t> table, pool;
    auto append = [&](const std::vector<int32_t>& list) {
        pool.insert(pool.end(), list.begin(), list.end());
        return static_cast<int32_t>(pool.size() - list.size());
    };
    size_t at = static_cast<size_t>(net_.input.size());  // the network's input comes first
    out_at_.clear();
    for (size_t k = 0; k < net_.layers.size(); ++k) {
        const LayerSpec& l = net_.layers[k];
        // The fields in common.h's order (L_KIND ... L_NCONN).
        std::array<int32_t, 20> row{};
        row[0] = l.kind == LayerKind::Subsample ? 1 : (l.kind == LayerKind::FullyConnected || conv_is_fc(l)) ? 2 : 0;
        row[1] = act_code(l.activation);
        row[2] = k ? act_code(net_.layers[k - 1].activation) : 0;
        row[3] = l.in.c, row[4] = l.in.h, row[5] = l.in.w;
        row[6] = l.out.c, row[7] = l.out.h, row[8] = l.out.w;
        row[9] = l.kernel;
        row[10] = to_int(layout_.weights(k).device);
        row[11] = to_int(layout_.bias(k).device);
        row[12] = to_int(k ? out_at_[k - 1] : 0);
        row[13] = to_int(at);
        if (row[0] == 0) {
            // The inverse of network.h's lists: the connections reading each input map, in order.
            std::vector<int32_t> in_begin, in_conn;
            for (int i = 0; i < l.in.c; ++i) {
                in_begin.push_back(static_cast<int32_t>(in_conn.size()));
                for (int j = 0; j < l.connections(); ++j)
                    if (l.conn_in[static_cast<size_t>(j)] == i) in_conn.push_back(j);
            }
            in_begin.push_back(static_cast<int32_t>(in_conn.size()));
            row[14] = append(l.conn_begin);
            row[15] = append(l.conn_in);
            row[16] = append(l.conn_out);
            row[17] = append(in_begin);
            row[18] = append(in_conn);
            row[19] = l.connections();
        }
        table.insert(table.end(), row.begin(), row.end());
        out_at_.push_back(at);
        at += static_cast<size_t>(l.out.size());
    }
    // The fully connected layers' partial sums follow (forward.cl): fc_parts_ per output, as many
    // (up to 32, a power of two) as leave the arena within the device's __local memory.
    parts_at_ = at;
    size_t widest = 0;
    for (const LayerSpec& l : net_.layers)
        if (l.kind == LayerKind::FullyConnected || conv_is_fc(l)) widest = std::max(widest, static_cast<size_t>(l.out.size()));
    fc_parts_ = 32;
    while (fc_parts_ > 1 && (at + widest * fc_parts_) * sizeof(float) > local_mem_) fc_parts_ /= 2;
    arena_ = at + widest * fc_parts_;
    pool.push_back(0);  // never empty (a network without convolutions)
    table_ = int_buffer(context_, table);
    pool_ = int_buffer(context_, pool);
}

template <class... Args>
cl::Kernel OpenCLEngine::kernel(const char* name, const Args&... args) {
    try {
        cl::Kernel k(program_, name);
        set_args(k, 0, args...);
        return k;
    } catch (const cl::Error& e) {
        throw Error(cl_failure(e).what() + std::string(" for kernel ") + name);
    }
}

template <class... Args>
void OpenCLEngine::set_args(cl::Kernel& k, cl_uint first, const Args&... args) {
    (k.setArg(first++, args), ...);
}

// The parameter arguments (PARAMS_ARG of common.h) from argument `first` on; returns the next.
cl_uint OpenCLEngine::set_param_args(cl::Kernel& k, cl_uint first) {
    k.setArg(first++, params_);
    if (memory_ != MemoryVariant::Constant) return first;
    set_args(k, first, const_params_, to_int(const_floats_));
    return first + 2;
}

// A kernel of common.h's per-sample kind: a work-group of SAMPLE_GROUP items per sample.
template <class... Args>
OpenCLEngine::Launch OpenCLEngine::per_sample(const char* name, const Args&... args) {
    return Launch{kernel(name, args...), 0, sample_group_, sample_group_, -1};
}

// Buffers and launches for batches of up to `capacity` samples. Arguments that change per
// step (the data set, the first row, the loss scale and slot) are set by forward().
void OpenCLEngine::plan_batch(int capacity) {
    capacity_ = capacity;
    bound_ = nullptr;
    const size_t cap = static_cast<size_t>(capacity), n = layout_.size();
    const size_t classes = static_cast<size_t>(net_.layers.back().out.size());
    const bool local = memory_ == MemoryVariant::Local;
    const int layers = to_int(net_.layers.size()), A = to_int(arena_);
    acts_ = cl::Buffer(context_, CL_MEM_READ_WRITE, cap * arena_ * sizeof(float));
    out_delta_ = cl::Buffer(context_, CL_MEM_READ_WRITE, cap * classes * sizeof(float));
    if (!local) arenas_ = cl::Buffer(context_, CL_MEM_READ_WRITE, cap * arena_ * sizeof(float));
    // Zero once: the kernels never write the layout's padding, which sum_samples adds up too.
    sample_grads_ = cl::Buffer(context_, CL_MEM_READ_WRITE, cap * n * sizeof(float));
    queue_.enqueueFillBuffer(sample_grads_, 0.0f, 0, cap * n * sizeof(float));
    poison_activations();

    // forward_samples: the data set, rows and first (0-3), the loss scale and slot are set per step.
    forward_ = per_sample("forward_samples", cl::Buffer(), cl::Buffer(), cl::Buffer(), 0);
    cl_uint next = set_param_args(forward_.kernel, 4);
    set_args(forward_.kernel, next, table_, pool_, layers, A, to_int(parts_at_), to_int(fc_parts_), acts_, out_delta_,
             1.0f, losses_, hits_, 0);
    forward_scale_arg_ = next + 8;
    forward_slot_arg_ = next + 11;
    if (local) forward_.kernel.setArg(next + 12, cl::Local(arena_ * sizeof(float)));

    backward_ = per_sample("backward_samples");
    next = set_param_args(backward_.kernel, 0);
    set_args(backward_.kernel, next, table_, pool_, layers, A, to_int(parts_at_), to_int(arena_ - parts_at_), acts_,
             out_delta_, to_int(n), sample_grads_);
    if (local) backward_.kernel.setArg(next + 10, cl::Local(arena_ * sizeof(float)));
    else backward_.kernel.setArg(next + 10, arenas_);

    sum_ = {kernel("sum_samples", sample_grads_, to_int(n), 0, grads_), round_up(n, wg_), wg_, 0, 2};
    for (const Launch* launch : {&forward_, &backward_, &sum_, &update_}) check_fits(*launch);
}

// Fails clearly, before any launch, when the device cannot run a launch's work-group.
void OpenCLEngine::check_fits(const Launch& launch) const {
    const cl::Device& dev = device_.device;
    const std::string name = launch.kernel.getInfo<CL_KERNEL_FUNCTION_NAME>();
    const size_t max_group = launch.kernel.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(dev);
    if (launch.local > max_group)
        throw Error(variant() + ": kernel " + name + " needs work-groups of " + std::to_string(launch.local) +
                    " items; " + device_.name + " allows " + std::to_string(max_group) +
                    " for it (CL_KERNEL_WORK_GROUP_SIZE)");
    const cl_ulong local = launch.kernel.getWorkGroupInfo<CL_KERNEL_LOCAL_MEM_SIZE>(dev);
    if (local > local_mem_)
        throw Error(variant() + ": kernel " + name + " needs " + std::to_string(local) + " bytes of __local memory (" +
                    std::to_string(arena_) + " floats of activations per sample of " + net_.name + "); " +
                    device_.name + " has " + std::to_string(local_mem_) + " (CL_DEVICE_LOCAL_MEM_SIZE)");
}

void OpenCLEngine::enqueue(Launch& launch, int count, cl::Event* event) {
    if (launch.count_arg >= 0) launch.kernel.setArg(static_cast<cl_uint>(launch.count_arg), count);
    const size_t global = launch.per_sample ? static_cast<size_t>(count) * launch.per_sample : launch.global;
    queue_.enqueueNDRangeKernel(launch.kernel, cl::NullRange, cl::NDRange(global), cl::NDRange(launch.local), nullptr,
                                event);
}

void OpenCLEngine::enqueue_phase(Phase phase, const std::vector<Launch*>& launches, int count) {
    Span span{{}, {}, phase};
    for (size_t i = 0; i < launches.size(); ++i)
        enqueue(*launches[i], count, i == 0 ? &span.first : i + 1 == launches.size() ? &span.last : nullptr);
    if (launches.size() == 1) span.last = span.first;
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

// NaN in every activation and output delta, so that an element a kernel fails to write shows up.
void OpenCLEngine::poison_activations() {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (const cl::Buffer* b : {&acts_, &out_delta_})
        if ((*b)()) queue_.enqueueFillBuffer(*b, nan, 0, b->getInfo<CL_MEM_SIZE>());
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
        bound_ = nullptr;  // forward_ may point at the buffers replaced here
        const size_t count = static_cast<size_t>(data.count);
        d.count = data.count;
        // The bytes go up once and are converted on the device; the byte buffer is released when
        // the conversion has run.
        cl::Buffer bytes(context_, CL_MEM_READ_ONLY, data.images.size());
        write(bytes, data.images.data(), data.images.size());
        d.inputs = cl::Buffer(context_, CL_MEM_READ_WRITE, count * static_cast<size_t>(in.size()) * sizeof(float));
        d.labels = cl::Buffer(context_, CL_MEM_READ_ONLY, count);
        write(d.labels, data.labels.data(), count);
        // One item per input pixel: NDRange (round_up(H*W, WG), count).
        cl::Kernel convert = kernel("images_to_inputs", bytes, data.rows, data.cols, byte_values_, d.inputs, in.h, in.w);
        cl::Event converted;
        queue_.enqueueNDRangeKernel(convert, cl::NullRange, cl::NDRange(round_up(static_cast<size_t>(in.h * in.w), wg_), count),
                                    cl::NDRange(wg_, 1), nullptr, &converted);
        spans_.push_back({converted, converted, Phase::Transfer});
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

void OpenCLEngine::check_size(const std::vector<float>& v, const char* what) const {
    if (v.size() != net_.param_count)
        throw Error(std::string(what) + " has " + std::to_string(v.size()) + " values, the network needs " +
                    std::to_string(net_.param_count));
}

void OpenCLEngine::set_params(const std::vector<float>& params) {
    check_size(params, "parameter buffer");
    cl_checked([&] {
        const auto device = layout_.to_device(params);
        write(params_, device.data(), device.size() * sizeof(float));
        queue_.enqueueFillBuffer(velocity_, 0.0f, 0, device.size() * sizeof(float));
        // NaN in every gradient (zero in the padding, which the update reads too).
        const auto poison = layout_.to_device(std::vector<float>(net_.param_count, std::numeric_limits<float>::quiet_NaN()));
        write(grads_, poison.data(), poison.size() * sizeof(float));
        poison_activations();
    });
}

std::vector<float> OpenCLEngine::params() {
    return cl_checked([&] {
        std::vector<float> device(layout_.size());
        read(params_, device.data(), device.size() * sizeof(float));
        return layout_.to_host(device);
    });
}

void OpenCLEngine::set_momentum_buffer(const std::vector<float>& velocity) {
    check_size(velocity, "momentum buffer");
    cl_checked([&] {
        const auto device = layout_.to_device(velocity);
        write(velocity_, device.data(), device.size() * sizeof(float));
    });
}

std::vector<float> OpenCLEngine::momentum_buffer() {
    return cl_checked([&] {
        std::vector<float> device(layout_.size());
        read(velocity_, device.data(), device.size() * sizeof(float));
        return layout_.to_host(device);
    });
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
        if (bound_ != &data) {
            set_args(forward_.kernel, 0, data.inputs, data.labels, train ? order_ : identity_);
            bound_ = &data;
        }
        forward_.kernel.setArg(3, first);
        forward_.kernel.setArg(forward_scale_arg_, 1.0f / static_cast<float>(count));
        forward_.kernel.setArg(forward_slot_arg_, cursor_);
        enqueue_phase(Phase::Forward, {&forward_}, count);
        cursor_ += count;
        count_ = count;
        last_was_train_ = train;
    });
}

void OpenCLEngine::backward() {
    if (!last_was_train_) throw Error("backward() needs a training forward() first");
    cl_checked([&] {
        enqueue_phase(Phase::Backward, {&backward_, &sum_}, count_);
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

std::vector<float> OpenCLEngine::layer_output(size_t layer) {
    if (count_ == 0) throw Error("layer_output() before forward()");
    return cl_checked([&] {
        // The layer's slice of every sample's arena.
        const size_t size = static_cast<size_t>(net_.layers.at(layer).out.size()), count = static_cast<size_t>(count_);
        std::vector<float> arenas(count * arena_), v;
        read(acts_, arenas.data(), arenas.size() * sizeof(float));
        for (size_t s = 0; s < count; ++s) {
            const auto at = arenas.begin() + static_cast<std::ptrdiff_t>(s * arena_ + out_at_[layer]);
            v.insert(v.end(), at, at + static_cast<std::ptrdiff_t>(size));
        }
        return v;
    });
}

std::vector<float> OpenCLEngine::gradients() {
    return cl_checked([&] {
        std::vector<float> device(layout_.size());
        read(grads_, device.data(), device.size() * sizeof(float));
        return layout_.to_host(device);
    });
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
