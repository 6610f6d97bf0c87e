#include "conv/conv_shape.h"

#include "common/error.h"

namespace lenet5::conv {

std::string ConvShape::describe() const {
    return std::to_string(batch) + "x" + std::to_string(in_c) + "x" + std::to_string(in_h) + "x" +
           std::to_string(in_w) + " k" + std::to_string(kernel) + " s" + std::to_string(stride) + " p" +
           std::to_string(pad) + " -> " + std::to_string(out_c);
}

void ConvShape::validate() const {
    const std::string what = "convolution " + describe() + ": ";
    if (batch < 1 || in_c < 1 || in_h < 1 || in_w < 1 || out_c < 1 || kernel < 1 || stride < 1)
        throw Error(what + "every size, the kernel and the stride must be at least 1");
    if (pad < 0 || pad >= kernel) throw Error(what + "the padding must be at least 0 and smaller than the kernel");
    if (in_h + 2 * pad < kernel || in_w + 2 * pad < kernel)
        throw Error(what + "the kernel is larger than the padded input");
}

ConvAlgo conv_default_algo(const ConvShape& shape) {
    const long positions = long(shape.batch) * shape.out_h() * shape.out_w();
    return positions < 2048 ? ConvAlgo::Im2col : ConvAlgo::Direct;
}

const char* algo_name(ConvAlgo algo) {
    switch (algo) {
        case ConvAlgo::Auto: return "auto";
        case ConvAlgo::Direct: return "direct";
        case ConvAlgo::Im2col: return "im2col";
        case ConvAlgo::Winograd: return "winograd";
        case ConvAlgo::CLBlast: return "clblast";
        case ConvAlgo::Own: return "own";
    }
    return "auto";
}

ConvAlgo parse_algo(const std::string& name) {
    for (ConvAlgo a : {ConvAlgo::Auto, ConvAlgo::Direct, ConvAlgo::Im2col, ConvAlgo::Winograd, ConvAlgo::CLBlast, ConvAlgo::Own})
        if (name == algo_name(a)) return a;
    throw UsageError("unknown convolution algorithm '" + name + "' (auto, direct, im2col, winograd, clblast or own)");
}

bool algo_built(ConvAlgo algo) {
#ifdef LENET5_HAVE_CLBLAST
    (void)algo;
    return true;
#else
    return algo != ConvAlgo::CLBlast;
#endif
}

}  // namespace lenet5::conv
