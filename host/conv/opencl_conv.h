// Batch-level convolutions on an OpenCL device, three algorithms (conv_shape.h): the API the
// batch-level engine and VGG16 inference call.
//
//   lenet5::conv::OpenCLConv conv(runtime);   // builds the kernels once per runtime
//   conv.forward(ConvAlgo::Direct, shape, in, weights, bias, out, Activation::ReLU);
//   conv.backward_data(ConvAlgo::Im2col, shape, d_out, weights, d_in);
//   conv.backward_weights(ConvAlgo::Im2col, shape, in, d_out, d_weights, d_bias);
//   runtime->finish();
//
// The buffers are the caller's, already on the device, in conv_shape.h's layout (NCHW; weights
// [out_c][in_c][k][k]), each holding at least its tensor from offset 0. Every call only enqueues
// on the runtime's in-order queue and returns; the results are there once the queue has run them.
// Calls of one OpenCLConv share its scratch buffers, so use one OpenCLConv per runtime and thread.
// The backward passes are pure gradients (d_out is dLoss/d(pre-activation)); backward_data
// overwrites d_in, backward_weights overwrites d_weights and d_bias with the batch's sums. Sums
// run in a fixed order: the same inputs give the same bits.
//
// Algorithms: Direct (tiled kernels with the input tile and the filters in __local memory, 32
// outputs per item; the fastest for 3x3 layers of many maps; at most 4 output maps at strides
// above 1, a kernel that reads the input from global memory once, one output per item), Im2col (the windows as a matrix, then
// batch_layers.cl's GEMM), CLBlast (Convgemm; Im2col/Col2im + GEMM backward; an Error when the build
// has no CLBlast), Auto (resolve()). Errors (bad shape, a device that cannot run it, an OpenCL
// failure) throw lenet5::Error with one line.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "conv/conv_shape.h"
#include "model/network.h"
#include "opencl/device_runtime.h"

namespace lenet5::conv {

class OpenCLConv {
public:
    explicit OpenCLConv(std::shared_ptr<DeviceRuntime> runtime);
    ~OpenCLConv();
    OpenCLConv(const OpenCLConv&) = delete;
    OpenCLConv& operator=(const OpenCLConv&) = delete;

    // out = act(conv(in, weights) + bias).
    void forward(ConvAlgo algo, const ConvShape& shape, const cl::Buffer& in, const cl::Buffer& weights,
                 const cl::Buffer& bias, const cl::Buffer& out, Activation act = Activation::None);
    // d_in = dLoss/d_in; with `in_act` (not None), times that activation's derivative at the
    // outputs `in` it produced (d_in is then dLoss/d(the previous layer's pre-activation)).
    void backward_data(ConvAlgo algo, const ConvShape& shape, const cl::Buffer& d_out, const cl::Buffer& weights,
                       const cl::Buffer& d_in, Activation in_act = Activation::None, const cl::Buffer& in = {});
    // d_weights, d_bias = dLoss/d_weights, dLoss/d_bias summed over the batch.
    void backward_weights(ConvAlgo algo, const ConvShape& shape, const cl::Buffer& in, const cl::Buffer& d_out,
                          const cl::Buffer& d_weights, const cl::Buffer& d_bias);

    // The forward pass of a 3x3 stride-1 convolution by Winograd F(4x4, 3x3) with filters already
    // transformed (inference, which transforms them once; forward(Winograd) transforms them per call), 4x
    // fewer multiplies than the direct sum: the tiles' input transforms, the 36 GEMMs in one
    // launch, the output transforms with bias and activation. `filters`: the transformed weights
    // [out_c][36][in_c] (host/conv/winograd_host.h's winograd_filters). Throws Error
    // for a shape winograd_takes() refuses.
    void forward_winograd(const ConvShape& shape, const cl::Buffer& in, const cl::Buffer& filters,
                          const cl::Buffer& bias, const cl::Buffer& out, Activation act = Activation::None);
    // 3x3, stride 1, at least 16 input maps and a multiple of 4 (the GEMM's float4 loads), and
    // transformed tensors under 2^31 floats.
    static bool winograd_takes(const ConvShape& shape);
    // The filters forward_winograd takes, from `weights` [out_c][in_c][3][3] into `filters`
    // (36 * out_c * in_c floats), on the device: winograd_filters' arithmetic in float.
    void winograd_transform(const ConvShape& shape, const cl::Buffer& weights, const cl::Buffer& filters);

    // The algorithm Auto stands for: the one choose() was given for the shape (at first, what the
    // convolution tuning cache of conv_tuning.h holds for this device and driver), else Direct.
    // Others are returned as they are.
    ConvAlgo resolve(ConvAlgo algo, const ConvShape& shape) const;
    // What Auto picks for `shape` (batch included) from now on.
    void choose(const ConvShape& shape, ConvAlgo algo);

    // Every command enqueued from now on appends its event here (convbench's kernel time: first
    // start to last end); nullptr stops it.
    void record_events(std::vector<cl::Event>* sink) { events_ = sink; }

    // A kernel launch as the calls above would enqueue it (its kernel its own object, arguments set).
    using Launch = KernelLaunch;
    // From now on the calls append their launches to `plan` instead of enqueuing them, for a caller
    // that replays a planned step (the batch-level engine); nullptr enqueues again. The scratch
    // buffers they use stay alive with this OpenCLConv. A CLBlast routine is one launch whose `call`
    // enqueues its commands on the runtime's queue when the plan runs.
    void record_launches(std::vector<Launch>* plan) { plan_ = plan; }

private:
    void pure_backward_data(ConvAlgo algo, const ConvShape& shape, const cl::Buffer& d_out, const cl::Buffer& weights,
                            const cl::Buffer& d_in);

    struct Impl;
    std::unique_ptr<Impl> impl_;
    std::vector<cl::Event>* events_ = nullptr;
    std::vector<Launch>* plan_ = nullptr;
    std::map<std::string, ConvAlgo> chosen_;
};

}  // namespace lenet5::conv
