#include "engine/host_inference.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/error.h"
#include "conv/conv_rows_host.h"
#include "conv/winograd_host.h"

#ifdef LENET5_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef LENET5_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace lenet5 {

namespace {

// Element-wise work (pooling) smaller than this runs on one thread: waking the others costs more
// (much more on a busy machine, where a woken thread may wait for a time slice).
constexpr long long kParallelMin = 1 << 16;
constexpr int kWinoXi = 36;  // GEMMs per Winograd layer: one per point of the 6x6 transform
// Tiles per Winograd block: about 64 (measured best on VGG16's layers at batch 1: the GEMMs'
// operands stay in cache).
constexpr int kWinoBlock = 64;
constexpr int kRowBlock = 8;  // output rows per work item of the Rows path

// Every output map reads every input map, in order: the weights are [out][in][K][K].
bool full_table(const LayerSpec& l) {
    if (l.connections() != l.out.c * l.in.c) return false;
    for (int j = 0; j < l.connections(); ++j)
        if (l.conn_in[static_cast<size_t>(j)] != j % l.in.c) return false;
    return true;
}

WinogradShape wino_shape(const LayerSpec& l) {
    return {l.in.c, l.in.h, l.in.w, l.out.c, l.out.h, l.out.w, l.pad, l.pad};
}

ConvRowsShape rows_shape(const LayerSpec& l) {
    return {l.in.c, l.in.h, l.in.w, l.out.c, l.out.h, l.out.w, l.kernel, l.kernel, l.pad, l.pad};
}

// Output pixels per im2col block: the block's windows (depth floats each) and its outputs (maps
// floats each) within ~1 MiB each, so that the bias and activation find them in cache.
int block_pixels(size_t depth, int maps, int pixels) {
    const size_t most = std::max(depth, static_cast<size_t>(maps));
    const int fit = static_cast<int>(std::max<size_t>(64, (size_t{1} << 18) / most) / 16 * 16);
    return std::min(pixels, fit);
}

// Grid pixels per Shifted block: the block's sums and its stretch of the input within ~1 MiB each.
int shift_block(const LayerSpec& l, int pixels) {
    const int fit = std::max(64, (1 << 18) / std::max(l.in.c, l.out.c)) / 16 * 16;
    return std::min(pixels, fit);
}

// The Shifted path's grid: the padded input's row width and the grid pixels that cover the output.
int padded_width(const LayerSpec& l) { return l.in.w + 2 * l.pad; }
int shift_grid(const LayerSpec& l) { return (l.out.h - 1) * padded_width(l) + l.out.w; }

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
        float* c = C + static_cast<size_t>(m) * ldc;
        const float* a = A + static_cast<size_t>(m) * lda;
        if (trans_b) {
            for (int n = 0; n < N; ++n) {
                float sum = 0.0f;
                for (int k = 0; k < K; ++k) sum += a[k] * B[static_cast<size_t>(n) * ldb + k];
                c[n] = beta * c[n] + sum;
            }
            continue;
        }
        if (!accumulate) std::fill(c, c + N, 0.0f);
        for (int k = 0; k < K; ++k) {
            const float* b = B + static_cast<size_t>(k) * ldb;
            for (int n = 0; n < N; ++n) c[n] += a[k] * b[n];
        }
    }
#endif
}

// col[(c*K + ky)*K + kx][j] = the input under tap (ky, kx) of output pixel p0 + j (0 in the
// padding), a run of output pixels of one row at a time (one input row, no division per pixel).
void im2col(const LayerSpec& l, const float* in, int p0, int pw, float* col) {
    const int K = l.kernel, S = l.stride, P = l.pad, IH = l.in.h, IW = l.in.w, OW = l.out.w;
    for (int c = 0; c < l.in.c; ++c)
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx) {
                float* row = col + static_cast<size_t>((c * K + ky) * K + kx) * pw;
                const float* plane = in + static_cast<size_t>(c) * IH * IW;
                for (int j = 0; j < pw;) {
                    const int oy = (p0 + j) / OW, ox0 = (p0 + j) % OW, run = std::min(pw - j, OW - ox0);
                    const int iy = oy * S - P + ky;
                    if (iy < 0 || iy >= IH) {
                        std::fill(row + j, row + j + run, 0.0f);
                    } else {
                        const float* src = plane + static_cast<size_t>(iy) * IW;
                        for (int t = 0; t < run; ++t) {
                            const int ix = (ox0 + t) * S - P + kx;
                            row[j + t] = ix >= 0 && ix < IW ? src[ix] : 0.0f;
                        }
                    }
                    j += run;
                }
            }
}

}  // namespace

HostInference::HostInference(const Network& net, const HostOps& ops, bool fast, int threads, int batch)
    : net_(net), ops_(ops), threads_(std::max(1, threads)), batch_(batch) {
#ifndef LENET5_HAVE_OPENMP
    threads_ = 1;
#endif
    if (batch < 1) throw Error("inference: a batch of at least one sample");
#ifdef LENET5_HAVE_OPENBLAS
    if (fast) openblas_set_num_threads(1);  // the blocks are spread over OpenMP threads instead
#endif
    const size_t L = net_.layers.size();
    path_.assign(L, Path::PerSample);
    filters_.resize(L);
    size_t scratch = 0, largest = 0;
    for (size_t k = 0; k < L; ++k) {
        if (fast) scratch = std::max(scratch, plan(k));
        if (k + 1 < L) largest = std::max(largest, static_cast<size_t>(net_.layers[k].out.size()));
    }
    for (auto& a : acts_) a.resize(largest * static_cast<size_t>(batch_));
    scratch_.assign(static_cast<size_t>(threads_), std::vector<float>(scratch));
}

// How omp computes a convolution with a full table: at stride 1, 3x3 kernels over at least 16
// input maps by Winograd, other kernels over that many by a GEMM per tap (conv_shifted), fewer
// input maps row by row; other strides by im2col + GEMM.
size_t HostInference::plan(size_t k) {
    const LayerSpec& l = net_.layers[k];
    const size_t C = static_cast<size_t>(l.in.c), OC = static_cast<size_t>(l.out.c);
    if (l.kind == LayerKind::FullyConnected) path_[k] = Path::Dense;
    if (l.kind == LayerKind::MaxPool || l.kind == LayerKind::AvgPool) path_[k] = Path::Pool;
    if (l.kind != LayerKind::Conv || !full_table(l)) return 0;  // the others one sample at a time (ops_)
    if (l.stride != 1) {
        path_[k] = Path::Im2col;
        const size_t depth = C * static_cast<size_t>(l.kernel) * static_cast<size_t>(l.kernel);
        return depth * static_cast<size_t>(block_pixels(depth, l.out.c, l.out.h * l.out.w));
    }
    if (l.in.c < 16) {
        path_[k] = Path::Rows;
        return static_cast<size_t>(rows_shape(l).scratch());
    }
    if (l.kernel == 3) {
        path_[k] = Path::Winograd;  // wino_blocks() makes no block larger than this
        return kWinoXi * static_cast<size_t>(std::min(kWinoBlock, wino_shape(l).tiles())) * (C + OC);
    }
    path_[k] = Path::Shifted;
    filters_[k].resize(l.weight_count);
    const size_t plane = static_cast<size_t>(l.in.h + 2 * l.pad) * static_cast<size_t>(padded_width(l));
    padded_.resize(std::max(padded_.size(), C * plane * static_cast<size_t>(batch_)));
    return OC * static_cast<size_t>(shift_block(l, shift_grid(l)));
}

void HostInference::load(const float* params) {
    for (size_t k = 0; k < net_.layers.size(); ++k) {
        const LayerSpec& l = net_.layers[k];
        const float* weight = params + l.weight_offset;
        const int OC = l.out.c, C = l.in.c;
        if (path_[k] == Path::Winograd) {
            filters_[k] = winograd_filters(std::vector<float>(weight, weight + l.weight_count), OC, C);
        } else if (path_[k] == Path::Shifted) {
            // filters_[k][t][o][c] = weight[o][c][t]: each tap's out maps x in maps, the GEMMs' A.
            const int T = l.kernel * l.kernel;
            float* t = filters_[k].data();
            for (int o = 0; o < OC; ++o)
                for (int c = 0; c < C; ++c)
                    for (int tap = 0; tap < T; ++tap)
                        t[(static_cast<size_t>(tap) * OC + o) * C + c] = weight[(static_cast<size_t>(o) * C + c) * T + tap];
        }
    }
}

void HostInference::run(const float* params, const float* inputs, int count, float* outputs,
                        std::vector<double>* layer_ms) {
    if (count < 1 || count > batch_)
        throw Error("inference: a batch of " + std::to_string(count) + " samples, planned for 1 to " +
                    std::to_string(batch_));
    const size_t L = net_.layers.size();
    if (layer_ms && layer_ms->size() != L)
        throw Error("inference: layer times for " + std::to_string(layer_ms->size()) + " layers, the network has " +
                    std::to_string(L));
    const float* x = inputs;
    for (size_t k = 0; k < L; ++k) {
        float* y = k + 1 == L ? outputs : acts_[k % 2].data();
        const auto start = std::chrono::steady_clock::now();
        step(k, params, x, y, count);
        if (layer_ms)
            (*layer_ms)[k] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        x = y;
    }
}

void HostInference::step(size_t k, const float* params, const float* x, float* y, int count) {
    const LayerSpec& l = net_.layers[k];
    switch (path_[k]) {
        case Path::PerSample: return per_sample(l, params, x, y, count);
        case Path::Winograd: return conv_winograd(k, params, x, y, count);
        case Path::Shifted: return conv_shifted(k, params, x, y, count);
        case Path::Rows: return conv_by_rows(l, params, x, y, count);
        case Path::Im2col: return conv_im2col(l, params, x, y, count);
        case Path::Dense: return dense(l, params, x, y, count);
        case Path::Pool: return pool(l, x, y, count);
    }
}

// The calling OpenMP thread's scratch buffer.
float* HostInference::thread_scratch() {
#ifdef LENET5_HAVE_OPENMP
    return scratch_[static_cast<size_t>(omp_get_thread_num())].data();
#else
    return scratch_[0].data();
#endif
}

HostInference::Items HostInference::split(int blocks, int count, int maps, int max_mblocks) const {
    const int all = blocks * count;
    const int mblocks = all >= threads_ ? 1 : std::min(max_mblocks, (threads_ + all - 1) / all);
    return {blocks, mblocks, (maps + mblocks - 1) / mblocks, all * mblocks};
}

// Winograd blocks of equal size, as many per sample as it takes to give every thread the same
// number of blocks when the samples alone do not.
int HostInference::wino_blocks(int tiles, int count) const {
    int blocks = (tiles + kWinoBlock - 1) / kWinoBlock;
    if (blocks * count < 8 * threads_ && blocks * count >= threads_)
        while (blocks * count % threads_) ++blocks;
    return std::min(blocks, tiles);
}

// The engine's per-sample forward, the samples spread over the threads.
void HostInference::per_sample(const LayerSpec& l, const float* params, const float* x, float* y, int count) {
    const size_t I = static_cast<size_t>(l.in.size()), O = static_cast<size_t>(l.out.size());
#pragma omp parallel for num_threads(std::min(threads_, count)) if (threads_ > 1 && count > 1)
    for (int s = 0; s < count; ++s) ops_.forward(l, params, x + static_cast<size_t>(s) * I, y + static_cast<size_t>(s) * O);
}

// Each work item (Items: blocks of tiles) transforms its block's input, runs the 36 GEMMs and
// transforms the products back into its outputs.
void HostInference::conv_winograd(size_t k, const float* params, const float* x, float* y, int count) {
    const LayerSpec& l = net_.layers[k];
    const WinogradShape ws = wino_shape(l);
    const int C = l.in.c, OC = l.out.c;
    const int tiles = ws.tiles(), want = wino_blocks(tiles, count), nb = (tiles + want - 1) / want;
    const Items sp = split((tiles + nb - 1) / nb, count, OC, OC / 16 + 1);
    const float* U = filters_[k].data();
    const float* bias = params + l.bias_offset;
    const Activation act = l.activation;
#pragma omp parallel for schedule(dynamic) num_threads(threads_) if (threads_ > 1)
    for (int item = 0; item < sp.items; ++item) {
        const int s = sp.sample(item), t0 = sp.block(item) * nb, m0 = sp.map0(item);
        const int nt = std::min(nb, tiles - t0), mw = std::min(sp.mb, OC - m0);
        float* V = thread_scratch();
        float* M = V + static_cast<size_t>(kWinoXi) * C * nt;
        winograd_input(ws, x + static_cast<size_t>(s) * l.in.size(), t0, nt, V);
        for (int xi = 0; xi < kWinoXi; ++xi)  // A = U[o][xi][c] for o from m0: rows kWinoXi * C apart
            gemm(false, mw, nt, C, U + (static_cast<size_t>(m0) * kWinoXi + xi) * C, kWinoXi * C,
                 V + static_cast<size_t>(xi) * C * nt, nt, M + static_cast<size_t>(xi) * mw * nt, nt);
        winograd_output(ws, M, t0, nt, m0, mw, bias, act, y + static_cast<size_t>(s) * l.out.size());
    }
}

// Stride-1 convolutions of at least 16 input maps, without im2col: on the zero-padded input's
// grid (its row width PW), the output is the sum over the window's taps (ky, kx) of W_tap (out
// maps x in maps) times the padded planes read from offset ky*PW + kx, so every tap's operand
// is the padded input itself. A block of grid pixels sums its taps' GEMMs in a per-thread
// buffer; its columns inside the output then get bias and activation on their way out.
void HostInference::conv_shifted(size_t k, const float* params, const float* x, float* y, int count) {
    const LayerSpec& l = net_.layers[k];
    const int C = l.in.c, OC = l.out.c, IH = l.in.h, IW = l.in.w, OW = l.out.w, K = l.kernel, pad = l.pad;
    const int PW = padded_width(l), plane = (IH + 2 * pad) * PW, P = l.out.h * OW;
    const int grid = shift_grid(l), nb = shift_block(l, grid);
    float* xp = padded_.data();
    const int planes = count * C;
#pragma omp parallel for num_threads(threads_) if (threads_ > 1)
    for (int pc = 0; pc < planes; ++pc) {
        float* dst = xp + static_cast<size_t>(pc) * plane;
        const float* src = x + static_cast<size_t>(pc) * IH * IW;
        std::fill(dst, dst + pad * PW, 0.0f);
        for (int iy = 0; iy < IH; ++iy) {
            float* row = dst + (pad + iy) * PW;
            std::fill(row, row + pad, 0.0f);
            std::memcpy(row + pad, src + static_cast<size_t>(iy) * IW, sizeof(float) * static_cast<size_t>(IW));
            std::fill(row + pad + IW, row + PW, 0.0f);
        }
        std::fill(dst + (pad + IH) * PW, dst + plane, 0.0f);
    }
    const Items sp = split((grid + nb - 1) / nb, count, OC, OC / 16 + 1);
    const float* taps = filters_[k].data();
    const float* bias = params + l.bias_offset;
#pragma omp parallel for schedule(dynamic) num_threads(threads_) if (threads_ > 1)
    for (int item = 0; item < sp.items; ++item) {
        const int s = sp.sample(item), n0 = sp.block(item) * nb, m0 = sp.map0(item);
        const int nw = std::min(nb, grid - n0), mw = std::min(sp.mb, OC - m0);
        float* acc = thread_scratch();
        const float* in = xp + static_cast<size_t>(s) * C * plane + n0;
        for (int t = 0; t < K * K; ++t)
            gemm(false, mw, nw, C, taps + (static_cast<size_t>(t) * OC + m0) * C, C, in + (t / K) * PW + t % K, plane,
                 acc, nw, t > 0);
        for (int m = 0; m < mw; ++m) {
            const float b = bias[m0 + m];
            const float* a = acc + static_cast<size_t>(m) * nw;
            float* out = y + (static_cast<size_t>(s) * OC + m0 + m) * P;
            for (int j = 0; j < nw;) {  // a row of the grid at a time: its first OW pixels are outputs
                const int q = n0 + j, oy = q / PW, ox0 = q % PW, run = std::min(nw - j, PW - ox0);
                for (int t = 0; t < run && ox0 + t < OW; ++t) out[oy * OW + ox0 + t] = activate(l.activation, a[j + t] + b);
                j += run;
            }
        }
    }
}

// Work items (Items): blocks of kRowBlock output rows.
void HostInference::conv_by_rows(const LayerSpec& l, const float* params, const float* x, float* y, int count) {
    const ConvRowsShape rs = rows_shape(l);
    const int OH = l.out.h, OC = l.out.c;
    const Items sp = split((OH + kRowBlock - 1) / kRowBlock, count, OC, OC);
    const float* weight = params + l.weight_offset;
    const float* bias = params + l.bias_offset;
    const Activation act = l.activation;
#pragma omp parallel for schedule(dynamic) num_threads(threads_) if (threads_ > 1)
    for (int item = 0; item < sp.items; ++item) {
        const int s = sp.sample(item), y0 = sp.block(item) * kRowBlock, m0 = sp.map0(item);
        conv_rows(rs, x + static_cast<size_t>(s) * l.in.size(), weight, bias, act, y0, std::min(kRowBlock, OH - y0),
                          m0, std::min(sp.mb, OC - m0), y + static_cast<size_t>(s) * l.out.size(), thread_scratch());
    }
}

// Work items (Items): blocks of output pixels, each unrolled by im2col, then one GEMM.
void HostInference::conv_im2col(const LayerSpec& l, const float* params, const float* x, float* y, int count) {
    const int OC = l.out.c, P = l.out.h * l.out.w, depth = l.in.c * l.kernel * l.kernel;
    const int pb = block_pixels(static_cast<size_t>(depth), OC, P);
    const Items sp = split((P + pb - 1) / pb, count, OC, OC / 16 + 1);
    const float* weight = params + l.weight_offset;
    const float* bias = params + l.bias_offset;
#pragma omp parallel for schedule(dynamic) num_threads(threads_) if (threads_ > 1)
    for (int item = 0; item < sp.items; ++item) {
        const int s = sp.sample(item), p0 = sp.block(item) * pb, m0 = sp.map0(item);
        const int pw = std::min(pb, P - p0), mw = std::min(sp.mb, OC - m0);
        float* col = thread_scratch();
        im2col(l, x + static_cast<size_t>(s) * l.in.size(), p0, pw, col);
        float* out = y + (static_cast<size_t>(s) * OC + m0) * P + p0;
        gemm(false, mw, pw, depth, weight + static_cast<size_t>(m0) * depth, depth, col, pw, out, P);
        for (int m = 0; m < mw; ++m) {
            const float b = bias[m0 + m];
            float* row = out + static_cast<size_t>(m) * P;
            for (int j = 0; j < pw; ++j) row[j] = activate(l.activation, row[j] + b);
        }
    }
}

// Blocks of at least 64 units (a multiple of 16), at least one per thread when there are enough.
void HostInference::dense(const LayerSpec& l, const float* params, const float* x, float* y, int count) {
    const int O = l.out.size(), I = l.in.size();
    const int ob = std::max(64, (O / threads_ + 15) / 16 * 16), blocks = (O + ob - 1) / ob;
    const float* weight = params + l.weight_offset;
    const float* bias = params + l.bias_offset;
#pragma omp parallel for num_threads(threads_) if (threads_ > 1)
    for (int b = 0; b < blocks; ++b) {
        const int o0 = b * ob, ow = std::min(ob, O - o0);
        gemm(true, count, ow, I, x, I, weight + static_cast<size_t>(o0) * I, I, y + o0, O);
        for (int s = 0; s < count; ++s)
            for (int o = o0; o < o0 + ow; ++o) {
                float& v = y[static_cast<size_t>(s) * O + o];
                v = activate(l.activation, v + bias[o]);
            }
    }
}

// The maps of the batch spread over the threads; each window as cpu_ops' pooling computes it.
void HostInference::pool(const LayerSpec& l, const float* x, float* y, int count) {
    const int K = l.kernel, S = l.stride, IH = l.in.h, IW = l.in.w, OH = l.out.h, OW = l.out.w;
    const bool max = l.kind == LayerKind::MaxPool;
    const int planes = count * l.in.c;
#pragma omp parallel for num_threads(threads_) if (threads_ > 1 && static_cast<long long>(planes) * OH * OW >= kParallelMin)
    for (int p = 0; p < planes; ++p) {
        const float* in = x + static_cast<size_t>(p) * IH * IW;
        float* out = y + static_cast<size_t>(p) * OH * OW;
        for (int oy = 0; oy < OH; ++oy)
            for (int ox = 0; ox < OW; ++ox) {
                const float* w = in + oy * S * IW + ox * S;
                float r = max ? w[0] : 0.0f;
                for (int ky = 0; ky < K; ++ky)
                    for (int kx = 0; kx < K; ++kx) r = max ? std::max(r, w[ky * IW + kx]) : r + w[ky * IW + kx];
                out[oy * OW + ox] = activate(l.activation, max ? r : r / static_cast<float>(K * K));
            }
    }
}

}  // namespace lenet5
