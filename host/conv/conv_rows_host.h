// The host's convolutions of few input maps at stride 1 (VGG16's first layer: 3 maps), where a
// GEMM's depth (maps x taps, 27) is too shallow to pay for its packing: each output row is summed
// tap by tap over the whole row, out[x] += w * in[x + kx], straight from padded input rows.
#pragma once
#include "host_ops.h"

namespace lenet5 {

struct ConvRowsShape {
    int C, IH, IW, OC, OH, OW;
    int kh, kw, pt, pl;  // kernel, top/left padding
    // Floats of scratch conv_rows needs: the padded input rows of one output row, and a sum row.
    int scratch() const { return (C * kh + 1) * (OW + kw - 1); }
};

// Rows y0 .. y0+ny-1 of output maps m0 .. m0+mw-1 of one sample: out (OC x OH x OW) from in
// (C x IH x IW), weight (OC x C x kh x kw), bias and activation.
void conv_rows(const ConvRowsShape& s, const float* in, const float* weight, const float* bias, Activation act, int y0,
               int ny, int m0, int mw, float* out, float* scratch);

}  // namespace lenet5
