#include "opencl/batch_inference.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.h"
#include "opencl/generic_layers.h"

namespace lenet5 {
namespace {

constexpr int kDenseSamples = 16;  // infer_dense's samples per launch (infer.cl)
constexpr size_t kDenseGroup = 256;  // its work-group

// Records an OpenCLConv's calls as launches into `plan` while it lives.
class Recording {
public:
    Recording(conv::OpenCLConv& conv, std::vector<KernelLaunch>& plan) : conv_(conv) { conv_.record_launches(&plan); }
    ~Recording() { conv_.record_launches(nullptr); }
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

private:
    conv::OpenCLConv& conv_;
};

}  // namespace

BatchInference::BatchInference(const Network& net, std::shared_ptr<DeviceRuntime> runtime, cl::Program program,
                               std::vector<LayerBuffers> layers, conv::OpenCLConv& conv, conv::ConvAlgo algo, size_t wg)
    : net_(net),
      rt_(std::move(runtime)),
      program_(std::move(program)),
      layers_(std::move(layers)),
      conv_(conv),
      algo_(algo),
      wg_(wg),
      filters_(net_.layers.size()) {}

void BatchInference::grow(int count) {
    size_t largest = static_cast<size_t>(net_.input.size());
    for (const LayerSpec& l : net_.layers) largest = std::max(largest, static_cast<size_t>(l.out.size()));
    const size_t bytes = static_cast<size_t>(count) * largest * sizeof(float);
    for (cl::Buffer& b : acts_) b = rt_->buffer(bytes, CL_MEM_READ_WRITE, "a layer's activations");
    capacity_ = count;
    plans_.clear();  // they name the old buffers
}

const cl::Buffer& BatchInference::winograd_filters(size_t k, const conv::ConvShape& shape) {
    cl::Buffer& filters = filters_[k];
    if (!filters()) {
        filters = rt_->buffer(size_t{36} * static_cast<size_t>(shape.out_c) * static_cast<size_t>(shape.in_c) *
                              sizeof(float));
        Recording r(conv_, transforms_);
        conv_.winograd_transform(shape, layers_[k].weights, filters);
        filters_stale_ = true;
    }
    return filters;
}

BatchInference::Plan BatchInference::plan(int count) {
    Plan plan(net_.layers.size());
    const size_t n = static_cast<size_t>(count);
    for (size_t k = 0; k < net_.layers.size(); ++k) {
        const LayerSpec& l = net_.layers[k];
        const LayerBuffers& b = layers_[k];
        const cl::Buffer &X = acts_[k % 2], &Y = acts_[(k + 1) % 2];
        const int act = static_cast<int>(l.activation);  // network.h's order is batch_layers.cl's BA_*
        const int IC = l.in.c, IH = l.in.h, IW = l.in.w, OC = l.out.c, OH = l.out.h, OW = l.out.w;
        // One item per output, a group per row of output maps (conv_forward's __local weights: one map's).
        const cl::NDRange maps(round_up(static_cast<size_t>(OH * OW), wg_), n * static_cast<size_t>(OC)), group(wg_, 1);
        std::vector<KernelLaunch>& launches = plan[k];
        switch (l.kind) {
            case LayerKind::Conv: {
                if (inference_runs_own_conv(l, algo_)) {
                    launches.push_back({DeviceRuntime::kernel(program_, "conv_forward", X, Y, b.weights, b.bias,
                                                              b.conn_begin, b.conn_in, IC, IH, IW, OC, OH, OW, l.kernel,
                                                              l.stride, l.pad, act),
                                        maps, group, l.name + " conv_forward"});
                    break;
                }
                const conv::ConvShape s{count, IC, IH, IW, OC, l.kernel, l.stride, l.pad};
                if ((algo_ == conv::ConvAlgo::Auto || algo_ == conv::ConvAlgo::Winograd) &&
                    conv::OpenCLConv::winograd_takes(s)) {
                    const cl::Buffer& filters = winograd_filters(k, s);
                    Recording r(conv_, launches);
                    conv_.forward_winograd(s, X, filters, b.bias, Y, l.activation);
                } else {
                    Recording r(conv_, launches);
                    conv_.forward(algo_, s, X, b.weights, b.bias, Y, l.activation);
                }
                for (KernelLaunch& x : launches) x.name = l.name + " " + x.name;
                break;
            }
            case LayerKind::Subsample:
                launches.push_back({DeviceRuntime::kernel(program_, "subsample_forward", X, Y, b.weights, b.bias, OC,
                                                          IH, IW, OH, OW, l.kernel, act),
                                    maps, group, l.name + " subsample_forward"});
                break;
            case LayerKind::MaxPool:
            case LayerKind::AvgPool:
                launches.push_back({DeviceRuntime::kernel(program_, "pool_forward", X, Y, IH, IW, OH, OW, l.kernel,
                                                          l.stride, static_cast<int>(l.kind == LayerKind::MaxPool), act),
                                    maps, group, l.name + " pool_forward"});
                break;
            case LayerKind::FullyConnected: {
                const int I = l.in.size(), O = l.out.size();
                for (int s0 = 0; s0 < count; s0 += kDenseSamples)
                    launches.push_back({DeviceRuntime::kernel(program_, "infer_dense", X, s0 * I, b.weights, b.bias, Y,
                                                              s0 * O, I, O, std::min(kDenseSamples, count - s0), act),
                                        cl::NDRange(static_cast<size_t>(O) * kDenseGroup), cl::NDRange(kDenseGroup),
                                        l.name + " infer_dense"});
                break;
            }
            default:  // a kind with kernels of its own (cl_kernels/layers/), in inference
                launches.push_back(generic_forward(program_, net_, k, X, Y, count, wg_, 0));
                break;
        }
    }
    return plan;
}

void BatchInference::run(const float* inputs, int count, float* outputs, std::vector<double>* layer_ms) {
    const size_t L = net_.layers.size();
    if (count < 1) throw Error("infer() of " + std::to_string(count) + " samples");
    if (layer_ms && layer_ms->size() != L)
        throw Error("infer(): layer_ms has " + std::to_string(layer_ms->size()) + " entries; the network has " +
                    std::to_string(L) + " layers");
    cl_checked([&] {
        if (count > capacity_) grow(count);
        auto planned = plans_.find(count);
        if (planned == plans_.end()) planned = plans_.emplace(count, plan(count)).first;
        if (filters_stale_) {
            for (const KernelLaunch& t : transforms_) rt_->launch(t, nullptr);
            filters_stale_ = false;
        }
        const size_t n = static_cast<size_t>(count);
        // Non-blocking: the read below waits for it, and `inputs` lives until then.
        rt_->write(acts_[0], inputs, n * static_cast<size_t>(net_.input.size()) * sizeof(float), false);
        std::vector<std::vector<cl::Event>> events(layer_ms ? L : 0);
        for (size_t k = 0; k < L; ++k)
            for (const KernelLaunch& launch : planned->second[k]) rt_->launch(launch, layer_ms ? &events[k] : nullptr);
        rt_->read(acts_[L % 2], outputs, n * static_cast<size_t>(net_.layers.back().out.size()) * sizeof(float));
        for (size_t k = 0; k < events.size(); ++k)
            for (const cl::Event& e : events[k])
                (*layer_ms)[k] += static_cast<double>(e.getProfilingInfo<CL_PROFILING_COMMAND_END>() -
                                                      e.getProfilingInfo<CL_PROFILING_COMMAND_START>()) *
                                  1e-6;
    });
}

}  // namespace lenet5
