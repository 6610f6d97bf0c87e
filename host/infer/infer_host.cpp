// The host variants of `lenet5 infer`: `cpu` computes every op with plain scalar loops, one
// thread (the reference); `omp` (on all cores) and `avx` (the same code on one thread) compute 3x3 stride-1 convolutions with Winograd F(4x4, 3x3)
// (winograd_host.h), other stride-1 ones of many input maps as a GEMM per tap, of few input maps
// row by row (conv_rows_host.h), the rest as im2col + GEMM over blocks of output pixels (each
// block's unrolled windows stay in cache), and fully connected layers as GEMMs over blocks of
// units; the blocks spread over OpenMP threads. The GEMM is OpenBLAS's sgemm, one
// thread per call, when the build has it, else a plain loop the compiler vectorises.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "conv/conv_rows_host.h"
#include "infer/infer_runner.h"
#include "conv/winograd_host.h"

#ifdef LENET5_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef LENET5_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace lenet5 {

namespace {

// The geometry of a 2-D windowed op: input C x IH x IW, output OC x OH x OW.
struct Window {
    int C, IH, IW, OC, OH, OW;
    Window(const InferGraph& g, const InferOp& op) {
        const auto& i = g.values[op.in].dims;
        const auto& o = g.values[op.out].dims;
        C = int(i[0]), IH = int(i[1]), IW = int(i[2]), OC = int(o[0]), OH = int(o[1]), OW = int(o[2]);
    }
};

// Calls f(iy, ix, ky, kx) for each tap of output pixel (oy, ox)'s window that lies inside the
// input (the padding's taps are skipped).
template <class F>
void for_window_taps(const InferOp& op, const Window& w, int oy, int ox, F&& f) {
    for (int ky = 0; ky < op.kh; ++ky) {
        const int iy = oy * op.sh - op.pt + ky;
        if (iy < 0 || iy >= w.IH) continue;
        for (int kx = 0; kx < op.kw; ++kx) {
            const int ix = ox * op.sw - op.pl + kx;
            if (ix < 0 || ix >= w.IW) continue;
            f(iy, ix, ky, kx);
        }
    }
}

// Row-major C[M][N] = A[M][K] op(B) (+ C when accumulate; leading dimensions lda, ldb, ldc), on
// the calling thread; op(B) = B[K][N], or with trans_b B^T for B stored [N][K].
void gemm(bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
          bool accumulate = false) {
    const float beta = accumulate ? 1.0f : 0.0f;
#ifdef LENET5_HAVE_OPENBLAS
    if (M == 1 && trans_b)  // one sample through a fully connected layer: W x, W read once
        cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, B, ldb, A, 1, beta, C, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb,
                    beta, C, ldc);
#else
    for (int m = 0; m < M; ++m) {
        float* c = C + size_t(m) * ldc;
        const float* a = A + size_t(m) * lda;
        if (trans_b) {
            for (int n = 0; n < N; ++n) {
                float sum = 0.0f;
                for (int k = 0; k < K; ++k) sum += a[k] * B[size_t(n) * ldb + k];
                c[n] = beta * c[n] + sum;
            }
            continue;
        }
        if (!accumulate) std::fill(c, c + N, 0.0f);
        for (int k = 0; k < K; ++k) {
            const float* b = B + size_t(k) * ldb;
            for (int n = 0; n < N; ++n) c[n] += a[k] * b[n];
        }
    }
#endif
}

class HostRunner final : public InferRunner {
public:
    HostRunner(const InferGraph& g, const InferRequest& r)
        : g_(g), variant_(r.variant), fast_(r.variant != "cpu"), batch_(r.batch) {
        threads_ = 1;
#ifdef LENET5_HAVE_OPENMP
        if (variant_ == "omp") threads_ = r.threads > 0 ? r.threads : omp_get_max_threads();
#endif
        if (variant_ == "omp" && !kOpenMP) throw Error("variant omp: this build has no OpenMP");
#ifdef LENET5_HAVE_OPENBLAS
        openblas_set_num_threads(1);  // the blocks are spread over OpenMP threads instead
#endif
        for (const int64_t floats : g_.slot_floats) slots_.emplace_back(size_t(floats) * size_t(batch_));
        ms_.assign(g_.ops.size(), 0.0);
        path_.assign(g_.ops.size(), ConvPath::Reference);
        if (!fast_) return;
        size_t scratch = 0, padded = 0;
        filters_.resize(g_.ops.size());
        for (size_t k = 0; k < g_.ops.size(); ++k) {
            const InferOp& op = g_.ops[k];
            if (op.kind != InferOpKind::Conv) continue;
            const Window w(g_, op);
            switch (path_[k] = conv_path(op, w)) {
                case ConvPath::Reference: break;
                case ConvPath::Winograd: {
                    const int nb = std::min(kWinoBlock, wino_shape(w, op).tiles());  // wino_blocks() makes none larger
                    scratch = std::max(scratch, size_t(kWinoXi) * nb * size_t(w.C + w.OC));
                    filters_[k] = winograd_filters(op.weight, w.OC, w.C);
                    break;
                }
                case ConvPath::Rows: scratch = std::max(scratch, size_t(rows_shape(w, op).scratch())); break;
                case ConvPath::Im2col: {
                    const size_t depth = size_t(w.C) * op.kh * op.kw;
                    scratch = std::max(scratch, depth * size_t(block_pixels(depth, w.OC, w.OH * w.OW)));
                    break;
                }
                case ConvPath::Shifted: {
                    const int PH = w.IH + op.pt + op.pb, PW = w.IW + op.pl + op.pr;
                    padded = std::max(padded, size_t(w.C) * PH * PW * batch_);
                    scratch = std::max(scratch, size_t(w.OC) * shift_block(w, (w.OH - 1) * PW + w.OW));
                    // filters_[k][t][o][c] = weight[o][c][t]: each tap's out maps x in maps, the GEMMs' A.
                    const int T = op.kh * op.kw;
                    auto& t = filters_[k];
                    t.resize(op.weight.size());
                    for (int o = 0; o < w.OC; ++o)
                        for (int c = 0; c < w.C; ++c)
                            for (int tap = 0; tap < T; ++tap)
                                t[(size_t(tap) * w.OC + o) * w.C + c] = op.weight[(size_t(o) * w.C + c) * T + tap];
                    break;
                }
            }
        }
        cols_.assign(size_t(threads_), std::vector<float>(scratch));
        padded_.resize(padded);
    }

    std::string variant() const override { return variant_; }
    std::string device() const override {
        std::string blas;
#ifdef LENET5_HAVE_OPENBLAS
        // The kernels OpenBLAS picked for this CPU (OPENBLAS_CORETYPE overrides: 0.3.21 takes
        // AMD Zen 4 for Haswell, AVX2 only, where SkylakeX's AVX-512 kernels are 1.6-2x faster).
        blas = std::string(", OpenBLAS ") + openblas_get_corename();
#endif
        if (!fast_) return "host";
        return "host (" + std::to_string(threads_) + (threads_ == 1 ? " thread" : " threads") + blas + ")";
    }
    std::vector<double> op_ms() const override { return ms_; }

    void run(const float* in, int count, float* out) override {
        if (count < 1 || count > batch_) throw Error("infer: batch of " + std::to_string(count) + " exceeds the planned " + std::to_string(batch_));
        std::memcpy(slot(g_.input), in, sizeof(float) * size_t(g_.values[g_.input].size()) * count);
        for (size_t k = 0; k < g_.ops.size(); ++k) {
            const auto start = std::chrono::steady_clock::now();
            step(k, count);
            ms_[k] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        }
        std::memcpy(out, slot(g_.output), sizeof(float) * size_t(g_.values[g_.output].size()) * count);
    }

private:
#ifdef LENET5_HAVE_OPENMP
    static constexpr bool kOpenMP = true;
#else
    static constexpr bool kOpenMP = false;
#endif

    // Element-wise ops and poolings smaller than this run on one thread: waking the others costs
    // more (much more on a busy machine, where a woken thread may wait for a time slice).
    static constexpr int64_t kParallelMin = 1 << 16;

    float* slot(int value) { return slots_[size_t(g_.slot_of[value])].data(); }

    // The calling OpenMP thread's scratch buffer (cols_).
    float* thread_scratch() {
#ifdef LENET5_HAVE_OPENMP
        return cols_[size_t(omp_get_thread_num())].data();
#else
        return cols_[0].data();
#endif
    }

    // Output pixels per im2col block: the block's windows (depth floats each) and its outputs
    // (maps floats each) within ~1 MiB each, so that the bias and activation find them in cache.
    static int block_pixels(size_t depth, int maps, int pixels) {
        const int fit = int(std::max<size_t>(64, (size_t(1) << 18) / std::max(depth, size_t(maps))) / 16 * 16);
        return std::min(pixels, fit);
    }

    void step(size_t k, int count) {
        const InferOp& op = g_.ops[k];
        const float* x = slot(op.in);
        float* y = slot(op.out);
        const int64_t in_size = g_.values[op.in].size(), out_size = g_.values[op.out].size();
        const int par = threads_;
        switch (op.kind) {
            case InferOpKind::Reshape: return;
            case InferOpKind::Conv:
                switch (path_[k]) {
                    case ConvPath::Reference: return conv_reference(op, x, y, count);
                    case ConvPath::Winograd: return conv_winograd(k, x, y, count);
                    case ConvPath::Shifted: return conv_shifted(k, x, y, count);
                    case ConvPath::Rows: return conv_by_rows(op, x, y, count);
                    case ConvPath::Im2col: return conv_fast(op, x, y, count);
                }
                return;
            case InferOpKind::Dense:
                if (fast_) dense_fast(op, x, y, count);
                else dense_reference(op, x, y, count);
                return;
            case InferOpKind::MaxPool:
            case InferOpKind::AvgPool: pool(op, x, y, count); return;
            case InferOpKind::Add:
            case InferOpKind::Affine:
            case InferOpKind::Act: {
                const float* x2 = op.in2 >= 0 ? slot(op.in2) : nullptr;
                const bool affine = op.kind == InferOpKind::Affine;
                const int64_t total = in_size * count;
#pragma omp parallel for num_threads(par) if (par > 1 && total >= kParallelMin)
                for (int64_t e = 0; e < total; ++e) {
                    float v = x[e];
                    if (x2) v += x2[e];
                    else if (affine) v = v * op.factor[size_t(e % in_size)] + op.addend[size_t(e % in_size)];
                    y[e] = activate(op.act, v);
                }
                return;
            }
            case InferOpKind::Pad: pad(op, x, y, count); return;
            case InferOpKind::Softmax:
                for (int s = 0; s < count; ++s) {
                    const float* a = x + s * in_size;
                    float* b = y + s * out_size;
                    const float top = *std::max_element(a, a + in_size);
                    double sum = 0.0;
                    for (int64_t e = 0; e < in_size; ++e) sum += b[e] = std::exp(a[e] - top);
                    for (int64_t e = 0; e < in_size; ++e) b[e] = float(b[e] / sum);
                }
                return;
        }
    }

    void pad(const InferOp& op, const float* x, float* y, int count) const {
        const auto &i = g_.values[size_t(op.in)].dims, &o = g_.values[size_t(op.out)].dims;
        const int64_t maps = i[0] * count, IH = i[1], IW = i[2], OH = o[1], OW = o[2];
        for (int64_t m = 0; m < maps; ++m) {
            float* out = y + m * OH * OW;
            std::fill(out, out + OH * OW, op.pad_value);
            for (int64_t r = 0; r < IH; ++r) std::copy_n(x + (m * IH + r) * IW, IW, out + (r + op.pt) * OW + op.pl);
        }
    }

    void conv_reference(const InferOp& op, const float* x, float* y, int count) const {
        const Window w(g_, op);
        for (int s = 0; s < count; ++s)
            for (int o = 0; o < w.OC; ++o)
                for (int oy = 0; oy < w.OH; ++oy)
                    for (int ox = 0; ox < w.OW; ++ox) {
                        float sum = op.bias[size_t(o)];
                        for (int c = 0; c < w.C; ++c)
                            for_window_taps(op, w, oy, ox, [&](int iy, int ix, int ky, int kx) {
                                sum += op.weight[((size_t(o) * w.C + c) * op.kh + ky) * op.kw + kx] *
                                       x[((size_t(s) * w.C + c) * w.IH + iy) * w.IW + ix];
                            });
                        y[((size_t(s) * w.OC + o) * w.OH + oy) * w.OW + ox] = activate(op.act, sum);
                    }
    }

    // How omp computes a convolution: at stride 1, 3x3 kernels over at least 16 input maps by
    // Winograd F(4x4, 3x3) (winograd_host.h), other kernels over that many by a GEMM per tap
    // (conv_shifted), fewer input maps row by row (conv_rows_host.h); other strides by im2col + GEMM.
    enum class ConvPath { Reference, Winograd, Shifted, Rows, Im2col };
    static ConvPath conv_path(const InferOp& op, const Window& w) {
        if (op.sh != 1 || op.sw != 1) return ConvPath::Im2col;
        if (w.C < 16) return ConvPath::Rows;
        return op.kh == 3 && op.kw == 3 ? ConvPath::Winograd : ConvPath::Shifted;
    }

    // Work items over (sample, block, block of output maps): the maps are split, into at most
    // max_mblocks, only when the samples' blocks are too few to give every thread one.
    struct Split {
        int blocks, mblocks, mb, items;
        int sample(int item) const { return item / (blocks * mblocks); }
        int block(int item) const { return item / mblocks % blocks; }
        int map0(int item) const { return item % mblocks * mb; }
    };
    Split split(int blocks, int count, int maps, int max_mblocks) const {
        const int all = blocks * count;
        const int mblocks = all >= threads_ ? 1 : std::min(max_mblocks, (threads_ + all - 1) / all);
        return {blocks, mblocks, (maps + mblocks - 1) / mblocks, all * mblocks};
    }
    static WinogradShape wino_shape(const Window& w, const InferOp& op) {
        return {w.C, w.IH, w.IW, w.OC, w.OH, w.OW, op.pt, op.pl};
    }
    static constexpr int kWinoXi = 36;  // GEMMs per layer: one per point of the 6x6 transform
    // Tiles per block: about 64 (measured best on VGG16's layers at batch 1: the GEMMs' operands
    // stay in cache), in blocks of equal size, as many per sample as it takes to give every
    // thread the same number of blocks when the samples alone do not.
    static constexpr int kWinoBlock = 64;
    int wino_blocks(int tiles, int count) const {
        int blocks = (tiles + kWinoBlock - 1) / kWinoBlock;
        if (blocks * count < 8 * threads_ && blocks * count >= threads_)
            while (blocks * count % threads_) ++blocks;
        return std::min(blocks, tiles);
    }

    // Each work item (Split: blocks of tiles) transforms its block's input, runs the 36 GEMMs and
    // transforms the products back into its outputs.
    void conv_winograd(size_t k, const float* x, float* y, int count) {
        const InferOp& op = g_.ops[k];
        const Window w(g_, op);
        const WinogradShape ws = wino_shape(w, op);
        const int tiles = ws.tiles(), want = wino_blocks(tiles, count), nb = (tiles + want - 1) / want;
        const Split sp = split((tiles + nb - 1) / nb, count, w.OC, w.OC / 16 + 1);
        const float* U = filters_[k].data();
        const int par = threads_;
#pragma omp parallel for schedule(dynamic) num_threads(par) if (par > 1)
        for (int item = 0; item < sp.items; ++item) {
            const int s = sp.sample(item), t0 = sp.block(item) * nb, m0 = sp.map0(item);
            const int nt = std::min(nb, tiles - t0), mw = std::min(sp.mb, w.OC - m0);
            float* V = thread_scratch();
            float* M = V + size_t(kWinoXi) * w.C * nt;
            winograd_input(ws, x + size_t(s) * w.C * w.IH * w.IW, t0, nt, V);
            for (int xi = 0; xi < kWinoXi; ++xi)  // A = U[o][xi][c] for o from m0: rows kWinoXi * C apart
                gemm(false, mw, nt, w.C, U + (size_t(m0) * kWinoXi + xi) * w.C, kWinoXi * w.C, V + size_t(xi) * w.C * nt,
                     nt, M + size_t(xi) * mw * nt, nt);
            winograd_output(ws, M, t0, nt, m0, mw, op.bias.data(), op.act, y + size_t(s) * w.OC * w.OH * w.OW);
        }
    }

    static ConvRowsShape rows_shape(const Window& w, const InferOp& op) {
        return {w.C, w.IH, w.IW, w.OC, w.OH, w.OW, op.kh, op.kw, op.pt, op.pl};
    }

    // Work items (Split): blocks of 8 output rows.
    void conv_by_rows(const InferOp& op, const float* x, float* y, int count) {
        const Window w(g_, op);
        const ConvRowsShape rs = rows_shape(w, op);
        const int rb = 8, par = threads_;
        const Split sp = split((w.OH + rb - 1) / rb, count, w.OC, w.OC);
#pragma omp parallel for schedule(dynamic) num_threads(par) if (par > 1)
        for (int item = 0; item < sp.items; ++item) {
            const int s = sp.sample(item), y0 = sp.block(item) * rb, m0 = sp.map0(item);
            conv_rows(rs, x + size_t(s) * w.C * w.IH * w.IW, op.weight.data(), op.bias.data(), op.act, y0,
                      std::min(rb, w.OH - y0), m0, std::min(sp.mb, w.OC - m0), y + size_t(s) * w.OC * w.OH * w.OW,
                      thread_scratch());
        }
    }

    // Stride-1 convolutions of at least 16 input maps, without im2col: on the zero-padded input's
    // grid (its row width PW), the output is the sum over the window's taps (ky, kx) of W_tap (out
    // maps x in maps) times the padded planes read from offset ky*PW + kx, so every tap's operand
    // is the padded input itself. A block of grid pixels sums its taps' GEMMs in a per-thread
    // buffer; its columns inside the output then get bias and activation on their way out.

    // Grid pixels per block: the block's sums and its stretch of the input within ~1 MiB each.
    static int shift_block(const Window& w, int pixels) {
        const int fit = std::max(64, (1 << 18) / std::max(w.C, w.OC)) / 16 * 16;
        return std::min(pixels, fit);
    }

    void conv_shifted(size_t k, const float* x, float* y, int count) {
        const InferOp& op = g_.ops[k];
        const Window w(g_, op);
        const int PH = w.IH + op.pt + op.pb, PW = w.IW + op.pl + op.pr, plane = PH * PW, P = w.OH * w.OW;
        const int grid = (w.OH - 1) * PW + w.OW, nb = shift_block(w, grid), par = threads_;
        float* xp = padded_.data();
        const int planes = count * w.C;
#pragma omp parallel for num_threads(par) if (par > 1)
        for (int pc = 0; pc < planes; ++pc) {
            float* dst = xp + size_t(pc) * plane;
            const float* src = x + size_t(pc) * w.IH * w.IW;
            std::fill(dst, dst + op.pt * PW, 0.0f);
            for (int iy = 0; iy < w.IH; ++iy) {
                float* row = dst + (op.pt + iy) * PW;
                std::fill(row, row + op.pl, 0.0f);
                std::memcpy(row + op.pl, src + size_t(iy) * w.IW, sizeof(float) * w.IW);
                std::fill(row + op.pl + w.IW, row + PW, 0.0f);
            }
            std::fill(dst + (op.pt + w.IH) * PW, dst + plane, 0.0f);
        }
        const Split sp = split((grid + nb - 1) / nb, count, w.OC, w.OC / 16 + 1);
        const int T = op.kh * op.kw;
        const float* taps = filters_[k].data();
#pragma omp parallel for schedule(dynamic) num_threads(par) if (par > 1)
        for (int item = 0; item < sp.items; ++item) {
            const int s = sp.sample(item), n0 = sp.block(item) * nb, m0 = sp.map0(item);
            const int nw = std::min(nb, grid - n0), mw = std::min(sp.mb, w.OC - m0);
            float* acc = thread_scratch();
            const float* in = xp + size_t(s) * w.C * plane + n0;
            for (int t = 0; t < T; ++t)
                gemm(false, mw, nw, w.C, taps + (size_t(t) * w.OC + m0) * w.C, w.C, in + (t / op.kw) * PW + t % op.kw,
                     plane, acc, nw, t > 0);
            for (int m = 0; m < mw; ++m) {
                const float b = op.bias[size_t(m0 + m)];
                const float* a = acc + size_t(m) * nw;
                float* out = y + (size_t(s) * w.OC + m0 + m) * P;
                for (int j = 0; j < nw;) {  // a row of the grid at a time: its first OW pixels are outputs
                    const int q = n0 + j, oy = q / PW, ox0 = q % PW, run = std::min(nw - j, PW - ox0);
                    for (int t = 0; t < run && ox0 + t < w.OW; ++t) out[oy * w.OW + ox0 + t] = activate(op.act, a[j + t] + b);
                    j += run;
                }
            }
        }
    }

    // Work items (Split): blocks of output pixels, each unrolled by im2col, then one GEMM.
    void conv_fast(const InferOp& op, const float* x, float* y, int count) {
        const Window w(g_, op);
        const int P = w.OH * w.OW, depth = w.C * op.kh * op.kw, pb = block_pixels(size_t(depth), w.OC, P);
        const Split sp = split((P + pb - 1) / pb, count, w.OC, w.OC / 16 + 1);
        const int par = threads_;
#pragma omp parallel for schedule(dynamic) num_threads(par) if (par > 1)
        for (int item = 0; item < sp.items; ++item) {
            const int s = sp.sample(item), p0 = sp.block(item) * pb, m0 = sp.map0(item);
            const int pw = std::min(pb, P - p0), mw = std::min(sp.mb, w.OC - m0);
            float* col = thread_scratch();
            im2col(op, w, x + size_t(s) * w.C * w.IH * w.IW, p0, pw, col);
            float* out = y + (size_t(s) * w.OC + m0) * P + p0;
            gemm(false, mw, pw, depth, op.weight.data() + size_t(m0) * depth, depth, col, pw, out, P);
            for (int m = 0; m < mw; ++m) {
                const float b = op.bias[size_t(m0 + m)];
                float* row = out + size_t(m) * P;
                for (int j = 0; j < pw; ++j) row[j] = activate(op.act, row[j] + b);
            }
        }
    }

    // col[(c*kh + ky)*kw + kx][j] = the input under tap (ky, kx) of output pixel p0 + j (0 in the
    // padding), a run of output pixels of one row at a time (one input row, no division per pixel).
    static void im2col(const InferOp& op, const Window& w, const float* in, int p0, int pw, float* col) {
        for (int c = 0; c < w.C; ++c)
            for (int ky = 0; ky < op.kh; ++ky)
                for (int kx = 0; kx < op.kw; ++kx) {
                    float* row = col + size_t((c * op.kh + ky) * op.kw + kx) * pw;
                    const float* plane = in + size_t(c) * w.IH * w.IW;
                    for (int j = 0; j < pw;) {
                        const int oy = (p0 + j) / w.OW, ox0 = (p0 + j) % w.OW, run = std::min(pw - j, w.OW - ox0);
                        const int iy = oy * op.sh - op.pt + ky;
                        if (iy < 0 || iy >= w.IH) {
                            std::fill(row + j, row + j + run, 0.0f);
                        } else {
                            const float* src = plane + size_t(iy) * w.IW;
                            for (int t = 0; t < run; ++t) {
                                const int ix = (ox0 + t) * op.sw - op.pl + kx;
                                row[j + t] = ix >= 0 && ix < w.IW ? src[ix] : 0.0f;
                            }
                        }
                        j += run;
                    }
                }
    }

    void dense_reference(const InferOp& op, const float* x, float* y, int count) const {
        const size_t O = op.bias.size(), I = op.weight.size() / O;
        for (int s = 0; s < count; ++s)
            for (size_t o = 0; o < O; ++o) {
                float sum = op.bias[o];
                for (size_t i = 0; i < I; ++i) sum += op.weight[o * I + i] * x[s * I + i];
                y[s * O + o] = activate(op.act, sum);
            }
    }

    // Blocks of at least 64 units (a multiple of 16), at least one per thread when there are enough.
    void dense_fast(const InferOp& op, const float* x, float* y, int count) {
        const int O = int(op.bias.size()), I = int(op.weight.size() / op.bias.size());
        const int ob = std::max(64, (O / threads_ + 15) / 16 * 16), blocks = (O + ob - 1) / ob, par = threads_;
#pragma omp parallel for num_threads(par) if (par > 1)
        for (int b = 0; b < blocks; ++b) {
            const int o0 = b * ob, ow = std::min(ob, O - o0);
            gemm(true, count, ow, I, x, I, op.weight.data() + size_t(o0) * I, I, y + o0, O);
            for (int s = 0; s < count; ++s)
                for (int o = o0; o < o0 + ow; ++o) y[size_t(s) * O + o] = activate(op.act, y[size_t(s) * O + o] + op.bias[size_t(o)]);
        }
    }

    void pool(const InferOp& op, const float* x, float* y, int count) const {
        const Window w(g_, op);
        const bool max = op.kind == InferOpKind::MaxPool;
        const int planes = count * w.C, par = fast_ ? threads_ : 1;
        const int64_t outputs = int64_t(planes) * w.OH * w.OW;
#pragma omp parallel for num_threads(par) if (par > 1 && outputs >= kParallelMin)
        for (int p = 0; p < planes; ++p) {
            const float* in = x + size_t(p) * w.IH * w.IW;
            float* out = y + size_t(p) * w.OH * w.OW;
            for (int oy = 0; oy < w.OH; ++oy)
                for (int ox = 0; ox < w.OW; ++ox) {
                    float acc = max ? -INFINITY : 0.0f;
                    int taps = 0;
                    for_window_taps(op, w, oy, ox, [&](int iy, int ix, int, int) {
                        const float v = in[iy * w.IW + ix];
                        acc = max ? std::max(acc, v) : acc + v;
                        ++taps;
                    });
                    if (!max) acc /= float(op.count_include_pad ? op.kh * op.kw : std::max(taps, 1));
                    out[oy * w.OW + ox] = acc;
                }
        }
    }

    const InferGraph& g_;
    std::string variant_;  // cpu, avx or omp
    bool fast_;
    int batch_, threads_ = 1;
    std::vector<std::vector<float>> slots_, cols_;  // cols_: per thread
    std::vector<ConvPath> path_;                     // per op: how a Conv is computed
    std::vector<std::vector<float>> filters_;        // per Conv: its weights as its path reads them
    std::vector<float> padded_;
    std::vector<double> ms_;
};

}  // namespace

std::unique_ptr<InferRunner> make_host_runner(const InferGraph& graph, const InferRequest& request) {
    return std::make_unique<HostRunner>(graph, request);
}

}  // namespace lenet5
