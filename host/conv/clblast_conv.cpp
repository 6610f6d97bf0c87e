#include "conv/clblast_conv.h"

#include <clblast.h>

#include <string>

namespace lenet5::conv {
namespace {

using clblast::KernelMode;
using clblast::Layout;
using clblast::StatusCode;
using clblast::Transpose;

// Runs one CLBlast call with an event; a failure throws Error naming the call and CLBlast's status.
template <class F>
void call(const char* what, std::vector<cl::Event>* events, F&& f) {
    cl_event event = nullptr;
    const StatusCode status = f(events ? &event : nullptr);
    if (status != StatusCode::kSuccess)
        throw Error(std::string("CLBlast ") + what + " failed with status " + std::to_string(static_cast<int>(status)));
    if (events) events->emplace_back(event);  // takes over the event's reference
}

}  // namespace

void clblast_forward(cl::CommandQueue& queue, const ConvShape& s, const cl::Buffer& in, const cl::Buffer& w,
                     const cl::Buffer& out, std::vector<cl::Event>* events) {
    cl_command_queue q = queue();
    call("Convgemm", events, [&](cl_event* e) {
        return clblast::Convgemm<float>(KernelMode::kCrossCorrelation, s.in_c, s.in_h, s.in_w, s.kernel, s.kernel,
                                        s.pad, s.pad, s.stride, s.stride, 1, 1, s.out_c, s.batch, in(), 0, w(), 0,
                                        out(), 0, &q, e);
    });
}

void clblast_backward_data(cl::CommandQueue& queue, const ConvShape& s, const cl::Buffer& d_out, const cl::Buffer& w,
                           const cl::Buffer& d_in, const cl::Buffer& col, std::vector<cl::Event>* events) {
    cl_command_queue q = queue();
    const size_t P = size_t(s.out_h()) * s.out_w(), CKK = size_t(s.in_c) * s.kernel * s.kernel;
    const size_t in_n = size_t(s.in_c) * s.in_h * s.in_w;
    const float zero = 0.0f;
    // Col2im adds into the image: start from zeros; col too, in case a GEMM with beta 0 reads it.
    queue.enqueueFillBuffer(d_in, zero, 0, s.input_size() * sizeof(float), nullptr, nullptr);
    queue.enqueueFillBuffer(col, zero, 0, CKK * P * sizeof(float), nullptr, nullptr);
    for (int n = 0; n < s.batch; ++n) {
        call("Gemm", events, [&](cl_event* e) {  // col [CKK][P] = w^T [CKK][OC] x d_out[n] [OC][P]
            return clblast::Gemm<float>(Layout::kRowMajor, Transpose::kYes, Transpose::kNo, CKK, P, s.out_c, 1.0f,
                                        w(), 0, CKK, d_out(), n * s.out_c * P, P, 0.0f, col(), 0, P, &q, e);
        });
        call("Col2im", events, [&](cl_event* e) {
            return clblast::Col2im<float>(KernelMode::kCrossCorrelation, s.in_c, s.in_h, s.in_w, s.kernel, s.kernel,
                                          s.pad, s.pad, s.stride, s.stride, 1, 1, col(), 0, d_in(), n * in_n, &q, e);
        });
    }
}

void clblast_backward_weights(cl::CommandQueue& queue, const ConvShape& s, const cl::Buffer& in,
                              const cl::Buffer& d_out, const cl::Buffer& d_w, const cl::Buffer& col,
                              std::vector<cl::Event>* events) {
    cl_command_queue q = queue();
    const size_t P = size_t(s.out_h()) * s.out_w(), CKK = size_t(s.in_c) * s.kernel * s.kernel;
    const size_t in_n = size_t(s.in_c) * s.in_h * s.in_w;
    const float zero = 0.0f;
    queue.enqueueFillBuffer(d_w, zero, 0, s.weight_size() * sizeof(float), nullptr, nullptr);
    for (int n = 0; n < s.batch; ++n) {
        call("Im2col", events, [&](cl_event* e) {
            return clblast::Im2col<float>(KernelMode::kCrossCorrelation, s.in_c, s.in_h, s.in_w, s.kernel, s.kernel,
                                          s.pad, s.pad, s.stride, s.stride, 1, 1, in(), n * in_n, col(), 0, &q, e);
        });
        call("Gemm", events, [&](cl_event* e) {  // d_w [OC][CKK] += d_out[n] [OC][P] x col^T [P][CKK]
            return clblast::Gemm<float>(Layout::kRowMajor, Transpose::kNo, Transpose::kYes, s.out_c, CKK, P, 1.0f,
                                        d_out(), n * s.out_c * P, P, col(), 0, P, 1.0f, d_w(), 0, CKK,
                                        &q, e);
        });
    }
}

}  // namespace lenet5::conv
