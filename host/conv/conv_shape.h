// A batch-level convolution's shape and the algorithms that compute it (issue 12).
//
// Layout everywhere (host and device): NCHW tensors, input [batch][in_c][in_h][in_w], output
// [batch][out_c][out_h][out_w]; weights [out_c][in_c][kernel][kernel]; bias [out_c]. Every input
// map feeds every output map; the zero padding `pad` is the same on all four sides, the stride the
// same along both axes. The output is act(convolution + bias) (a cross-correlation, as in cuDNN
// and PyTorch).
#pragma once
#include <cstddef>
#include <string>

namespace lenet5::conv {

struct ConvShape {
    int batch = 1, in_c = 1, in_h = 1, in_w = 1, out_c = 1, kernel = 1, stride = 1, pad = 0;

    int out_h() const { return (in_h + 2 * pad - kernel) / stride + 1; }
    int out_w() const { return (in_w + 2 * pad - kernel) / stride + 1; }
    size_t input_size() const { return size_t(batch) * in_c * in_h * in_w; }
    size_t output_size() const { return size_t(batch) * out_c * out_h() * out_w(); }
    size_t weight_size() const { return size_t(out_c) * in_c * kernel * kernel; }
    // Multiply-adds x 2 of the direct convolution (the measure of GFLOP/s in convbench).
    double flops() const { return 2.0 * double(output_size()) * in_c * kernel * kernel; }
    // "16x64x224x224 k3 s1 p1 -> 64": batch x maps x height x width, kernel, stride, pad, out maps.
    std::string describe() const;
    // Throws Error (one line naming the shape) when a size is not positive, the padding is negative
    // or not smaller than the kernel, or the window does not fit the padded input.
    void validate() const;
};

// direct: tiled kernels that read the input where it lies; im2col: the windows unrolled into a
// matrix, then a GEMM; winograd: F(4x4, 3x3) for the forward pass and the input gradient of 3x3
// stride-1 convolutions over a multiple of 4 maps, at least 16 (direct for other shapes; the
// weight gradient by im2col); clblast: CLBlast's Convgemm / Im2col / Col2im / GEMM. auto: what `lenet5 tune`
// measured fastest for the shape on the device, else conv_default_algo. own: not OpenCLConv's but
// the batch-level engine's own convolution kernels (train/eval, `tune --conv` times them too);
// OpenCLConv refuses it, and its Auto reads a tuned `own` as direct.
enum class ConvAlgo { Auto, Direct, Im2col, Winograd, CLBlast, Own };

// Auto's choice for a shape `lenet5 tune --conv` has not measured: direct, unless the output has
// few positions over the batch (VGG16's 28x28 and 14x14 layers at batch 1 on the H100: 1.3-3.5x
// faster through im2col, whose GEMM tiles the maps too and so keeps more of the device busy).
ConvAlgo conv_default_algo(const ConvShape& shape);

const char* algo_name(ConvAlgo algo);
// "auto", "direct", "im2col", "winograd", "clblast" or "own"; anything else throws UsageError naming the value.
ConvAlgo parse_algo(const std::string& name);
// Whether this build has the algorithm (clblast needs LENET5_HAVE_CLBLAST).
bool algo_built(ConvAlgo algo);

}  // namespace lenet5::conv
