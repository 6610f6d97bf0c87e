// Winograd F(4x4, 3x3) for the host's 3x3 stride-1 convolutions (Lavin & Gray, 2015): each 4x4
// block of outputs ("tile") comes from its 6x6 input patch d as Y = A^T [ (G g G^T) . (B^T d B) ] A,
// so a layer becomes 36 GEMMs, U[xi] (out maps x in maps) times V[xi] (in maps x tiles), with
// 36 products per tile and map pair where the direct sum takes 144: 4x fewer multiply-adds.
// The interpolation points 0, +-1, +-2 keep fp32's error near 1e-6 per layer (tested against the
// direct sum, and VGG16's outputs against onnxruntime's).
//
// The caller walks blocks of tiles: winograd_input fills V for a block, 36 GEMMs make M, and
// winograd_output turns M into the block's outputs with bias and activation.
#pragma once
#include <vector>

#include "host_ops.h"

namespace lenet5 {

struct WinogradShape {
    int C, IH, IW, OC, OH, OW, pt, pl;  // input maps and size, output maps and size, top/left padding
    int tiles_w() const { return (OW + 3) / 4; }
    int tiles() const { return tiles_w() * ((OH + 3) / 4); }
};

// U[o][xi][c] = (G g G^T)[xi] (xi < 36) for each 3x3 filter g = weight[o][c] (weight OC x C x 3 x 3):
// GEMM xi's A is U + xi*C with rows 36*C apart, on the host and in OpenCLConv::forward_winograd.
std::vector<float> winograd_filters(const std::vector<float>& weight, int OC, int C);

// V[xi][c][j] = (B^T d B)[xi] (xi < 36) for tile t0 + j (j < nt) of one sample's input (C x IH x IW) and
// each input map c; the padding reads as zeros.
void winograd_input(const WinogradShape& s, const float* in, int t0, int nt, float* V);

// out[m0 + m] (one sample's output, OC x OH x OW) at tiles t0 .. t0+nt-1 = act(A^T M A + bias)
// for m < mw, from M[xi][m][j] (36 x mw x nt); a tile's outputs past the edge are dropped.
void winograd_output(const WinogradShape& s, const float* M, int t0, int nt, int m0, int mw, const float* bias,
                     Activation act, float* out);

}  // namespace lenet5
