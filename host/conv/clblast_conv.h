// The clblast algorithm (opencl_conv.h): CLBlast's Convgemm forward, Im2col/Col2im and GEMMs
// backward. Built only with LENET5_HAVE_CLBLAST; each call enqueues on `queue` and appends its
// commands' events to `events` when given. `col` holds at least one sample's windows
// (in_c*k*k x out_h*out_w floats).
#pragma once
#include <vector>

#include "conv/conv_shape.h"
#include "opencl/opencl_runtime.h"

namespace lenet5::conv {

// out = conv(in, w) (no bias: the caller adds it with its activation).
void clblast_forward(cl::CommandQueue& queue, const ConvShape& s, const cl::Buffer& in, const cl::Buffer& w,
                     const cl::Buffer& out, std::vector<cl::Event>* events);
// d_in = dLoss/d_in, one sample at a time (GEMM into col, then Col2im).
void clblast_backward_data(cl::CommandQueue& queue, const ConvShape& s, const cl::Buffer& d_out, const cl::Buffer& w,
                           const cl::Buffer& d_in, const cl::Buffer& col, std::vector<cl::Event>* events);
// d_w = dLoss/dw summed over the batch, one sample at a time (Im2col, then a GEMM adding to d_w).
void clblast_backward_weights(cl::CommandQueue& queue, const ConvShape& s, const cl::Buffer& in,
                              const cl::Buffer& d_out, const cl::Buffer& d_w, const cl::Buffer& col,
                              std::vector<cl::Event>* events);

}  // namespace lenet5::conv
