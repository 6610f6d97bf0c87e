// The host's convolutions (conv_shape.h's layout), the reference every OpenCL algorithm is checked
// against: `direct` is the plain scalar loop nest (the reference itself), `im2col` unrolls the
// windows into a matrix and multiplies with the host GEMM (OpenBLAS's sgemm when the build has it,
// else a plain loop). Pure gradients: the backward passes apply no activation derivative.
#pragma once
#include "conv/conv_shape.h"
#include "model/network.h"

namespace lenet5::conv {

// out = act(conv(in, w) + b).
void host_forward(ConvAlgo algo, const ConvShape& s, const float* in, const float* w, const float* b, float* out,
                  Activation act);
// d_in = dLoss/d_in from d_out = dLoss/d_out (before the activation).
void host_backward_data(ConvAlgo algo, const ConvShape& s, const float* d_out, const float* w, float* d_in);
// d_w, d_b = dLoss/dw, dLoss/db summed over the batch.
void host_backward_weights(ConvAlgo algo, const ConvShape& s, const float* in, const float* d_out, float* d_w,
                           float* d_b);

// Single elements of the scalar reference (what host_* Direct computes for every element): output
// i of the forward, element i of d_in, weight i of d_w, bias o of d_b. convbench checks large cases
// at sampled elements with these. They accumulate in double: the weight and bias gradients of a
// large image sum millions of products, and a float sum of those is off by ~1e-4 of the result
// (the seed's 2050x2050 stride-3 case), more than the algorithms being checked.
float reference_output(const ConvShape& s, const float* in, const float* w, const float* b, Activation act, size_t i);
float reference_d_in(const ConvShape& s, const float* d_out, const float* w, size_t i);
float reference_d_w(const ConvShape& s, const float* in, const float* d_out, size_t i);
float reference_d_b(const ConvShape& s, const float* d_out, int o);

// max_i |v_i - ref_i| / max_i |ref_i| (max_i |v_i| when ref is all zeros): the error relative to
// the whole tensor's magnitude (not element by element, which near-zero elements would blow up),
// what convbench reports and the tests bound; infinite for a NaN.
double max_relative_error(const float* v, const float* ref, size_t n);

}  // namespace lenet5::conv
