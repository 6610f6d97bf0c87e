// The OpenCL variants of `lenet5 infer`: every op on the device. The weights are uploaded once
// when the runner is made, the batch's input is written once per run and its output read once;
// the activations in between stay in device buffers (the graph's slots). Convolutions go through
// host/conv's OpenCLConv (--conv-algo; under `auto`, 3x3 stride-1 layers of 16 or more input
// maps take Winograd F(4x4, 3x3), the others what `auto` picks for the shape), square unpadded
// poolings through batch_layers.cl's pool_forward, the rest through cl_kernels/infer.cl. The
// variant picks batch_layers.cl's memory knob (-DMEM_CONSTANT, -DMEM_LOCAL); the inference
// kernels themselves read __global memory in all three.
#include <algorithm>
#include <map>

#include "conv/opencl_conv.h"
#include "common/error.h"
#include "infer/infer_runner.h"
#include "opencl/device_runtime.h"
#include "opencl/opencl_kernels.h"
#include "conv/winograd_host.h"

namespace lenet5 {

namespace {

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

constexpr int kDenseSamples = 16;  // infer_dense's samples per launch

int act_code(InferAct a) {  // batch_layers.cl's BA_* (network.h's Activation order)
    switch (a) {
        case InferAct::Tanh: return 0;
        case InferAct::Sigmoid: return 2;
        case InferAct::Relu: return 3;
        case InferAct::None: break;
    }
    return 1;
}

Activation activation(InferAct a) {
    switch (a) {
        case InferAct::Tanh: return Activation::Tanh;
        case InferAct::Sigmoid: return Activation::Sigmoid;
        case InferAct::Relu: return Activation::ReLU;
        case InferAct::None: break;
    }
    return Activation::None;
}

class OpenCLRunner final : public InferRunner {
public:
    OpenCLRunner(const InferGraph& g, const InferRequest& r)
        : g_(g), variant_(r.variant), batch_(r.batch), rt_(std::make_shared<DeviceRuntime>(select_opencl_device(r.device))) {
        cl_checked([&] { setup(r); });
    }

    std::string variant() const override { return variant_; }
    std::string device() const override { return rt_->device().name + " [" + rt_->device().platform_name + "]"; }
    std::vector<double> op_ms() const override { return ms_; }

    void run(const float* in, int count, float* out) override {
        if (count < 1 || count > batch_) throw Error("infer: batch of " + std::to_string(count) + " exceeds the planned " + std::to_string(batch_));
        cl_checked([&] {
            rt_->write(slot(g_.input), in, sizeof(float) * size_t(g_.values[g_.input].size()) * count, false);
            std::vector<std::vector<cl::Event>> events(g_.ops.size());
            for (size_t k = 0; k < g_.ops.size(); ++k) {
                conv_->record_events(&events[k]);
                enqueue(k, count, events[k]);
            }
            conv_->record_events(nullptr);
            rt_->read(slot(g_.output), out, sizeof(float) * size_t(g_.values[g_.output].size()) * count);
            for (size_t k = 0; k < events.size(); ++k)
                for (const cl::Event& e : events[k])
                    ms_[k] += double(e.getProfilingInfo<CL_PROFILING_COMMAND_END>() - e.getProfilingInfo<CL_PROFILING_COMMAND_START>()) * 1e-6;
        });
    }

private:
    void setup(const InferRequest& r) {
        wg_ = std::min<size_t>(256, rt_->max_group());
        if (rt_->max_group() < 256) throw Error(rt_->device().name + ": infer needs work-groups of 256 items");
        const char* memory = variant_ == "gpu-constant" ? " -DMEM_CONSTANT" : variant_ == "gpu-local" ? " -DMEM_LOCAL" : "";
        // batch_layers.cl with its small GEMM tiles (none of its GEMMs runs here; it must compile).
        const std::string options = std::string("-cl-std=CL1.2 -DLENET5_BATCH -DCONV_LOCAL_FLOATS=1") + memory +
                                    " -DGEMM_TM=16 -DGEMM_TN=64 -DGEMM_TK=16 -DGEMM_RM=1 -DGEMM_RN=4";
        program_ = rt_->program(opencl_kernel_file("batch_layers.cl") + opencl_kernel_file("infer.cl"), options);
        conv_ = std::make_unique<conv::OpenCLConv>(rt_);
        algo_ = r.conv_algo;
        for (const int64_t floats : g_.slot_floats)
            slots_.push_back(rt_->buffer(sizeof(float) * size_t(floats) * size_t(batch_)));
        ms_.assign(g_.ops.size(), 0.0);
        for (const InferOp& op : g_.ops) {
            if (op.kind == InferOpKind::Conv) check_conv(op);
            Weights w;
            const bool winograd = op.kind == InferOpKind::Conv &&
                                  (algo_ == conv::ConvAlgo::Auto || algo_ == conv::ConvAlgo::Winograd) &&
                                  conv::OpenCLConv::winograd_takes(conv_shape(op, batch_));
            if (winograd) {
                const conv::ConvShape s = conv_shape(op, batch_);
                w.winograd = upload(winograd_filters(op.weight, s.out_c, s.in_c));
            } else if (!op.weight.empty()) {
                w.weight = upload(op.weight);
            }
            if (!op.bias.empty()) w.bias = upload(op.bias);
            if (op.kind == InferOpKind::Affine) {
                w.factor = upload(op.factor);
                w.addend = upload(op.addend);
            }
            weights_.push_back(std::move(w));
        }
        rt_->finish();
    }

    cl::Buffer upload(const std::vector<float>& v) { return rt_->buffer(v.data(), v.size() * sizeof(float)); }

    void check_conv(const InferOp& op) const {
        if (op.kh != op.kw || op.sh != op.sw || op.pt != op.pl || op.pt != op.pb || op.pt != op.pr)
            throw Error("node '" + op.name + "' (Conv): the OpenCL variants take square kernels with equal strides and "
                        "padding on all sides (this is " + std::to_string(op.kh) + "x" + std::to_string(op.kw) +
                        "); use --variant omp");
    }

    const cl::Buffer& slot(int value) const { return slots_[size_t(g_.slot_of[value])]; }

    conv::ConvShape conv_shape(const InferOp& op, int count) const {
        const auto& in = g_.values[op.in].dims;
        conv::ConvShape s;
        s.batch = count, s.in_c = int(in[0]), s.in_h = int(in[1]), s.in_w = int(in[2]);
        s.out_c = int(g_.values[op.out].dims[0]), s.kernel = op.kh, s.stride = op.sh, s.pad = op.pt;
        return s;
    }

    template <class... Args>
    void launch(std::vector<cl::Event>& events, const char* name, const cl::NDRange& global, const cl::NDRange& local,
                const Args&... args) {
        auto it = kernels_.find(name);
        if (it == kernels_.end()) it = kernels_.emplace(name, cl::Kernel(program_, name)).first;
        cl_uint index = 0;
        (it->second.setArg(index++, args), ...);
        events.emplace_back();
        rt_->launch(it->second, global, local, &events.back());
    }

    void enqueue(size_t k, int count, std::vector<cl::Event>& events) {
        const InferOp& op = g_.ops[k];
        const Weights& w = weights_[k];
        const cl::Buffer &x = slot(op.in), &y = slot(op.out);
        const int in_size = int(g_.values[op.in].size()), out_size = int(g_.values[op.out].size());
        switch (op.kind) {
            case InferOpKind::Reshape: return;
            case InferOpKind::Conv:
                if (w.winograd()) conv_->forward_winograd(conv_shape(op, count), x, w.winograd, w.bias, y, activation(op.act));
                else conv_->forward(algo_, conv_shape(op, count), x, w.weight, w.bias, y, activation(op.act));
                return;
            case InferOpKind::Dense:
                for (int s0 = 0; s0 < count; s0 += kDenseSamples)
                    launch(events, "infer_dense", cl::NDRange(size_t(out_size) * 256), cl::NDRange(256), x, s0 * in_size,
                           w.weight, w.bias, y, s0 * out_size, in_size, out_size, std::min(kDenseSamples, count - s0),
                           act_code(op.act));
                return;
            case InferOpKind::MaxPool:
            case InferOpKind::AvgPool: {
                const auto &i = g_.values[op.in].dims, &o = g_.values[op.out].dims;
                const int IH = int(i[1]), IW = int(i[2]), OH = int(o[1]), OW = int(o[2]), is_max = op.kind == InferOpKind::MaxPool;
                const cl::NDRange global(round_up(size_t(OH) * OW, wg_), size_t(count) * i[0]), local(wg_, 1);
                const bool square = op.kh == op.kw && op.sh == op.sw && !op.pt && !op.pl && !op.pb && !op.pr;
                if (square) launch(events, "pool_forward", global, local, x, y, IH, IW, OH, OW, op.kh, op.sh, is_max, 1);
                else
                    launch(events, "infer_pool", global, local, x, y, IH, IW, OH, OW, op.kh, op.kw, op.sh, op.sw, op.pt, op.pl,
                           is_max, int(op.count_include_pad));
                return;
            }
            case InferOpKind::Add:
            case InferOpKind::Act: {
                const int n = in_size * count;
                launch(events, "infer_eltwise", cl::NDRange(round_up(size_t(n), wg_)), cl::NDRange(wg_), x,
                       op.in2 >= 0 ? slot(op.in2) : x, y, n, int(op.in2 >= 0), act_code(op.act));
                return;
            }
            case InferOpKind::Affine: {
                const int n = in_size * count;
                launch(events, "infer_affine", cl::NDRange(round_up(size_t(n), wg_)), cl::NDRange(wg_), x, w.factor,
                       w.addend, y, n, in_size, act_code(op.act));
                return;
            }
            case InferOpKind::Pad: {
                const auto &i = g_.values[op.in].dims, &o = g_.values[op.out].dims;
                const int OH = int(o[1]), OW = int(o[2]);
                launch(events, "infer_pad", cl::NDRange(round_up(size_t(OH) * OW, wg_), size_t(count) * i[0]),
                       cl::NDRange(wg_, 1), x, y, int(i[1]), int(i[2]), OH, OW, op.pt, op.pl, op.pad_value);
                return;
            }
            case InferOpKind::Softmax:
                launch(events, "infer_softmax", cl::NDRange(round_up(size_t(count), wg_)), cl::NDRange(wg_), x, y, in_size, count);
                return;
        }
    }

    struct Weights {
        cl::Buffer weight, bias, factor, addend;
        cl::Buffer winograd;  // instead of weight, a Conv that auto computes by Winograd: winograd_filters()
    };

    const InferGraph& g_;
    std::string variant_;
    int batch_;
    std::shared_ptr<DeviceRuntime> rt_;
    cl::Program program_;
    std::map<std::string, cl::Kernel> kernels_;
    std::unique_ptr<conv::OpenCLConv> conv_;
    conv::ConvAlgo algo_ = conv::ConvAlgo::Auto;
    size_t wg_ = 256;
    std::vector<cl::Buffer> slots_;
    std::vector<Weights> weights_;
    std::vector<double> ms_;
};

}  // namespace

std::unique_ptr<InferRunner> make_opencl_runner(const InferGraph& graph, const InferRequest& request) {
    return std::make_unique<OpenCLRunner>(graph, request);
}

}  // namespace lenet5
