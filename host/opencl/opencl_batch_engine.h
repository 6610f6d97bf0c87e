// The batch-level OpenCL engine: for networks whose activations or weights do not fit the
// per-sample engine's work-groups (opencl_engine.h), e.g. the seeds' CNN. Every layer is one
// launch (or a few) per pass over the whole batch (cl_kernels/batch_layers.cl): fully connected
// layers are GEMMs (forward, the previous layer's delta, and the weight gradient as a GEMM over
// the samples), convolutions, pooling and subsampling direct kernels, with each sample's share of
// their gradients added up in sample order. Everything stays on the device as in OpenCLEngine:
// both data sets (converted once), parameters, gradients, momentum, activations and the losses.
// It also runs Engine::infer (batch_inference.h), on a training engine or on one made for inference
// alone.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conv/opencl_conv.h"
#include "opencl/batch_inference.h"
#include "opencl/opencl_engine_base.h"

namespace lenet5 {

class OpenCLBatchEngine final : public OpenCLEngineBase {
public:
    // Throws Error when the device lacks what the variant needs (gpu-constant: a convolution's
    // or subsampling's weights larger than its __constant buffer, for the layers that read them so).
    // conv_algo: how convolutions whose maps all read every input map run (host/conv/): Direct,
    // Im2col, Winograd, CLBlast (its routines planned as launches that enqueue them on this engine's
    // queue), Own (this engine's own convolution kernels), or Auto (training: what `lenet5 tune
    // --conv` found fastest for the layer's shape and batch on this device, own included; untuned:
    // own; inference: batch_inference.h's rule).
    // inference_only: an engine for infer() alone (opencl_engine_base.h), without the buffers and
    // kernels of training; gpu-constant then checks only the layers whose inference reads __constant
    // memory (VGG16's convolutions go through OpenCLConv and __global memory).
    // rule: compiled into the kernels (opencl_engine_base.h).
    OpenCLBatchEngine(Network net, MemoryVariant memory, std::shared_ptr<DeviceRuntime> runtime,
                      conv::ConvAlgo conv_algo = conv::ConvAlgo::Auto, bool inference_only = false,
                      const TrainingRule& rule = {});

    std::string device() const override {
        return rt_->device().name + (tensor_cores_ ? " (batch-level), GEMMs on tensor cores (3xTF32)" : " (batch-level)");
    }

    void forward(Split split, int first, int count) override;
    void backward() override;
    void update(float lr, float momentum, float weight_decay) override;
    void infer(const float* inputs, int count, float* outputs, std::vector<double>* layer_ms) override;
    std::vector<float> layer_output(size_t layer) override;

private:
    using Launch = KernelLaunch;

    struct LayerData {
        cl::Buffer weights, bias;
        cl::Buffer conn_begin, conn_in, conn_out;  // by output map (network.h)
        cl::Buffer in_begin, in_conn;              // the connections that read each input map
        bool constant_fc = false;                  // gpu-constant: a fully connected layer read as __constant
        cl::Buffer grad_weights, grad_bias;        // a convolution's gradients in grads_ (host/conv/'s outputs)
    };

    void complete_gradients() override { complete_backward(); }
    bool reads_gradients_in_backward() const override { return true; }
    void gradients_given() override { pending_ = false; }
    void params_replaced() override;
    void inputs_changed(Split split, bool slots_replaced) override;

    void build_program();
    void plan(int count);
    void plan_layer(size_t k, int count);
    // The host/conv/ algorithm of convolution k at batch `count`, if it takes the layer; its launches.
    std::optional<conv::ConvAlgo> conv_algo_for(size_t k, int count) const;
    // Returns how many of its launches in `back` compute the layer's gradients (they come first).
    size_t plan_conv(size_t k, int count, conv::ConvAlgo algo, std::vector<Launch>& back);
    void gemm(std::vector<Launch>& into, const std::string& name, int M, int N, int K, const cl::Buffer& A, int a_off,
              int a_m, int a_k, const cl::Buffer& B, int b_off, int b_k, int b_n, const cl::Buffer& C, int c_off,
              int c_m, int c_n, int mode, int act, const cl::Buffer& E, int e_off);
    Launch sum_rows(const cl::Buffer& part, int rows, int cols, int split, int off_w, int off_b, const std::string& layer);
    void complete_backward();
    BatchInference& inference();  // made on first use

    // program_: every kernel, the GEMM with large tiles.
    cl::Program small_gemm_;  // the GEMM with small tiles
    bool tensor_cores_ = false;  // the large GEMMs run as gemm_tc_* (gemm_tc.cl), not gemm_fast_*
    int conv_fk_ = 0;         // the fast convolution kernels' kernel size (0: none of the layers fits them)
    std::vector<LayerData> layers_;
    conv::ConvAlgo conv_algo_;
    std::map<std::string, conv::ConvAlgo> tuned_conv_;  // lenet5 tune --conv's, by shape
    std::unique_ptr<conv::OpenCLConv> conv_;            // made when a layer first needs it
    std::unique_ptr<BatchInference> inference_;         // after conv_: it uses conv_

    // acts_[0]: the batch's inputs, acts_[k + 1]: layer k's outputs; deltas_[k]: layer k's deltas;
    // partials_: the gradient shares of a convolution (per sample or part of one) or subsampling (per sample).
    std::vector<cl::Buffer> acts_, deltas_;
    cl::Buffer partials_;
    std::vector<cl::Buffer> scratch_;  // the split GEMMs' slices
    int capacity_ = 0, planned_ = 0, count_ = 0;
    bool last_was_train_ = false;
    std::vector<Launch> forward_, backward_, update_;  // for batches of planned_ samples
    // Per layer with parameters, in backward_'s order: how many of backward_'s launches have run
    // once its gradients are final, and the layer (unused by the fused plan: see below).
    std::vector<std::pair<size_t, size_t>> grad_marks_;
    // The kernels that read the batch's inputs from the data set (arguments 0-2: the inputs, the
    // rows, first): gather_inputs, or a first convolution's fast kernels, which do it themselves.
    std::vector<cl::Kernel> input_readers_;
    // The generic layers' kernels that draw (generic_layers.h's set_draw), at step draw_step_.
    std::vector<cl::Kernel> draw_forward_, draw_backward_;
    // The fused update (kFusedBatch): the weight gradient of layer fused_ is computed by fc_sgd
    // (fused_update_); deferred_ computes it into grads_ instead, when gradients() asks between
    // backward and update. fused_data_ (kFusedDataBatch): fc_sgd_data also computes the delta below
    // layer fused_, so backward() leaves the layers below it (below_) to update(), which runs
    // fc_sgd_data, data_reduce_, below_ and below_update_ (batch_sgd of the other parameters);
    // fc_sgd_data updates the layer's biases too; complete_backward() runs data_ (that delta as
    // GEMMs, and the biases' gradient), below_ and deferred_ instead.
    int fused_ = -1;
    bool fused_data_ = false;
    bool head_ = false;  // the last layer runs as head_forward and head_backward
    std::vector<Launch> deferred_, fused_update_, data_, below_, data_reduce_, below_update_;
    size_t below_count_ = 0;  // plan(): backward_'s launches for the layers below fused_
    bool pending_ = false;    // backward() left the rest to the fused update
};

}  // namespace lenet5
