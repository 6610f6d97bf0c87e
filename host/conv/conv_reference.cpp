#include "conv/conv_reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "host_ops.h"

#ifdef LENET5_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace lenet5::conv {
namespace {

// Row-major C[M][N] = beta*C + op(A) op(B), op(A) [M][K], op(B) [K][N]; ta/tb: A is stored [K][M],
// B [N][K].
void host_gemm(bool ta, bool tb, int M, int N, int K, const float* A, const float* B, float beta, float* C) {
#ifdef LENET5_HAVE_OPENBLAS
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
                ta ? M : K, B, tb ? K : N, beta, C, N);
#else
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            float sum = 0.0f;
            for (int k = 0; k < K; ++k)
                sum += A[ta ? size_t(k) * M + m : size_t(m) * K + k] * B[tb ? size_t(n) * K + k : size_t(k) * N + n];
            C[size_t(m) * N + n] = beta == 0.0f ? sum : beta * C[size_t(m) * N + n] + sum;
        }
#endif
}

// Input (c, y*S + ky - P, x*S + kx - P) of output (y, x) and tap (ky, kx), or -1 in the padding.
long tap(const ConvShape& s, int c, int y, int x, int ky, int kx) {
    const int iy = y * s.stride + ky - s.pad, ix = x * s.stride + kx - s.pad;
    if (iy < 0 || iy >= s.in_h || ix < 0 || ix >= s.in_w) return -1;
    return (long(c) * s.in_h + iy) * s.in_w + ix;
}

// One sample's windows: col[(c*K + ky)*K + kx][y*OW + x] (im2col), or back (col2im, adding up).
void im2col(const ConvShape& s, const float* in, float* col) {
    const int K = s.kernel, P = s.out_h() * s.out_w();
    for (int c = 0; c < s.in_c; ++c)
        for (int t = 0; t < K * K; ++t)
            for (int p = 0; p < P; ++p) {
                const long at = tap(s, c, p / s.out_w(), p % s.out_w(), t / K, t % K);
                col[(size_t(c) * K * K + t) * P + p] = at < 0 ? 0.0f : in[at];
            }
}

void col2im(const ConvShape& s, const float* col, float* in) {
    const int K = s.kernel, P = s.out_h() * s.out_w();
    for (size_t i = 0; i < size_t(s.in_c) * s.in_h * s.in_w; ++i) in[i] = 0.0f;
    for (int c = 0; c < s.in_c; ++c)
        for (int t = 0; t < K * K; ++t)
            for (int p = 0; p < P; ++p) {
                const long at = tap(s, c, p / s.out_w(), p % s.out_w(), t / K, t % K);
                if (at >= 0) in[at] += col[(size_t(c) * K * K + t) * P + p];
            }
}

ConvAlgo host_algo(ConvAlgo algo, const ConvShape& s) {
    s.validate();
    if (algo == ConvAlgo::CLBlast) throw Error("the clblast convolution algorithm runs on OpenCL devices only");
    return algo == ConvAlgo::Im2col ? ConvAlgo::Im2col : ConvAlgo::Direct;
}

}  // namespace

float reference_output(const ConvShape& s, const float* in, const float* w, const float* b, Activation act,
                       size_t i) {
    const int K = s.kernel, OH = s.out_h(), OW = s.out_w();
    const int x = int(i % OW), y = int(i / OW % OH), m = int(i / (size_t(OW) * OH) % s.out_c);
    const size_t n = i / (size_t(OW) * OH * s.out_c);
    const float* src = in + n * s.in_c * s.in_h * s.in_w;
    double sum = 0.0;
    for (int c = 0; c < s.in_c; ++c)
        for (int t = 0; t < K * K; ++t) {
            const long at = tap(s, c, y, x, t / K, t % K);
            if (at >= 0) sum += double(src[at]) * w[(size_t(m) * s.in_c + c) * K * K + t];
        }
    return activate(act, float(sum + b[m]));
}

float reference_d_in(const ConvShape& s, const float* d_out, const float* w, size_t i) {
    const int K = s.kernel, OH = s.out_h(), OW = s.out_w(), S = s.stride;
    const int ix = int(i % s.in_w), iy = int(i / s.in_w % s.in_h), c = int(i / (size_t(s.in_w) * s.in_h) % s.in_c);
    const size_t n = i / (size_t(s.in_w) * s.in_h * s.in_c);
    double sum = 0.0;
    for (int m = 0; m < s.out_c; ++m)
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx) {
                const int ty = iy + s.pad - ky, tx = ix + s.pad - kx;  // = y*S, x*S
                if (ty < 0 || tx < 0 || ty % S || tx % S || ty / S >= OH || tx / S >= OW) continue;
                sum += double(d_out[((n * s.out_c + m) * OH + ty / S) * OW + tx / S]) *
                       w[((size_t(m) * s.in_c + c) * K + ky) * K + kx];
            }
    return float(sum);
}

float reference_d_w(const ConvShape& s, const float* in, const float* d_out, size_t i) {
    const int K = s.kernel, OH = s.out_h(), OW = s.out_w(), t = int(i % (K * K));
    const int c = int(i / (K * K) % s.in_c), m = int(i / (size_t(K) * K * s.in_c));
    const size_t in_n = size_t(s.in_c) * s.in_h * s.in_w, out_n = size_t(s.out_c) * OH * OW;
    double sum = 0.0;
    for (int n = 0; n < s.batch; ++n)
        for (int y = 0; y < OH; ++y)
            for (int x = 0; x < OW; ++x) {
                const long at = tap(s, c, y, x, t / K, t % K);
                if (at >= 0) sum += double(d_out[n * out_n + (size_t(m) * OH + y) * OW + x]) * in[n * in_n + at];
            }
    return float(sum);
}

float reference_d_b(const ConvShape& s, const float* d_out, int o) {
    const size_t P = size_t(s.out_h()) * s.out_w();
    double sum = 0.0;
    for (int n = 0; n < s.batch; ++n)
        for (size_t p = 0; p < P; ++p) sum += d_out[(size_t(n) * s.out_c + o) * P + p];
    return float(sum);
}

void host_forward(ConvAlgo algo, const ConvShape& s, const float* in, const float* w, const float* b, float* out,
                  Activation act) {
    const int K = s.kernel, P = s.out_h() * s.out_w(), CKK = s.in_c * K * K;
    const size_t in_n = size_t(s.in_c) * s.in_h * s.in_w, out_n = size_t(s.out_c) * P;
    if (host_algo(algo, s) == ConvAlgo::Direct) {
        for (size_t i = 0; i < s.output_size(); ++i) out[i] = reference_output(s, in, w, b, act, i);
        return;
    }
    std::vector<float> col(size_t(CKK) * P);
    for (int n = 0; n < s.batch; ++n) {
        im2col(s, in + n * in_n, col.data());
        float* o = out + n * out_n;
        host_gemm(false, false, s.out_c, P, CKK, w, col.data(), 0.0f, o);
        for (int m = 0; m < s.out_c; ++m)
            for (int p = 0; p < P; ++p) o[size_t(m) * P + p] = activate(act, o[size_t(m) * P + p] + b[m]);
    }
}

void host_backward_data(ConvAlgo algo, const ConvShape& s, const float* d_out, const float* w, float* d_in) {
    const int K = s.kernel, P = s.out_h() * s.out_w(), CKK = s.in_c * K * K;
    const size_t in_n = size_t(s.in_c) * s.in_h * s.in_w, out_n = size_t(s.out_c) * P;
    if (host_algo(algo, s) == ConvAlgo::Direct) {
        for (size_t i = 0; i < s.input_size(); ++i) d_in[i] = reference_d_in(s, d_out, w, i);
        return;
    }
    std::vector<float> col(size_t(CKK) * P);
    for (int n = 0; n < s.batch; ++n) {
        host_gemm(true, false, CKK, P, s.out_c, w, d_out + n * out_n, 0.0f, col.data());
        col2im(s, col.data(), d_in + n * in_n);
    }
}

void host_backward_weights(ConvAlgo algo, const ConvShape& s, const float* in, const float* d_out, float* d_w,
                           float* d_b) {
    const int K = s.kernel, P = s.out_h() * s.out_w(), CKK = s.in_c * K * K;
    const size_t in_n = size_t(s.in_c) * s.in_h * s.in_w, out_n = size_t(s.out_c) * P;
    for (int m = 0; m < s.out_c; ++m) d_b[m] = reference_d_b(s, d_out, m);
    if (host_algo(algo, s) == ConvAlgo::Direct) {
        for (size_t i = 0; i < s.weight_size(); ++i) d_w[i] = reference_d_w(s, in, d_out, i);
        return;
    }
    std::vector<float> col(size_t(CKK) * P);
    for (int n = 0; n < s.batch; ++n) {
        im2col(s, in + n * in_n, col.data());
        host_gemm(false, true, s.out_c, CKK, P, d_out + n * out_n, col.data(), n == 0 ? 0.0f : 1.0f, d_w);
    }
}

double max_relative_error(const float* v, const float* ref, size_t n) {
    double diff = 0.0, scale = 0.0, norm_v = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double d = std::fabs(double(v[i]) - ref[i]);
        if (!std::isfinite(d)) return INFINITY;
        diff = std::max(diff, d);
        scale = std::max(scale, std::fabs(double(ref[i])));
        norm_v = std::max(norm_v, std::fabs(double(v[i])));
    }
    return scale > 0.0 ? diff / scale : norm_v;
}

}  // namespace lenet5::conv
