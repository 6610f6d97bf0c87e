#include "conv/opencl_conv.h"

#include <algorithm>
#include <functional>
#include <array>

#include "conv/conv_tuning.h"
#include "opencl/opencl_kernels.h"
#ifdef LENET5_HAVE_CLBLAST
#include "conv/clblast_conv.h"
#endif

namespace lenet5::conv {
namespace {

int as_int(size_t n) { return static_cast<int>(n); }

// batch_layers.cl's GEMM, built with its large tiles (128 x 128 of C per group of 16 x 16 items,
// 16 deep per round) and __local staging; its epilogues.
constexpr int kTile = 128, kTileDepth = 16, kGemmItems = 16;
constexpr int kStore = 0, kBiasActM = 3;
// A split GEMM's slices are at least this deep.
constexpr size_t kMinSplitDepth = 256;

// im2col's window matrix holds at most this many floats (512 MiB); larger batches go in chunks.
constexpr size_t kColFloats = size_t{1} << 27;
// The direct weight gradient's shares: about this many items in all, at most this many floats.
constexpr size_t kShareItems = size_t{1} << 20, kShareFloats = size_t{1} << 24;

// The direct forward kernels' tiles (conv.cl's CV_DIRECT): output maps, rows and columns per group.
struct DirectTile {
    const char* name;
    int maps, rows, cols;
};
constexpr std::array<DirectTile, 3> kDirectTiles{{{"cv_direct_m64", 64, 8, 16},
                                                  {"cv_direct_m16", 16, 8, 64},
                                                  {"cv_direct_m4", 4, 16, 128}}};
// At most this many output maps at strides above 1: cv_direct_few instead (conv.cl's CV_FEW_MAPS).
constexpr int kFewMaps = 4;

// The scratch buffers of one OpenCLConv.
enum Scratch { kCol, kReorder, kSlices, kFlipped, kZeros, kWinoFilters, kScratchCount };

}  // namespace

struct OpenCLConv::Impl {
    std::shared_ptr<DeviceRuntime> rt;
    cl::Program program;
    std::map<std::string, cl::Kernel> kernels;
    std::array<cl::Buffer, kScratchCount> scratch;
    std::array<size_t, kScratchCount> scratch_floats{};
    size_t wg = 256, compute_units = 1, local_floats = 0;
    std::vector<cl::Event>** events = nullptr;
    std::vector<Launch>** plan = nullptr;
    std::vector<cl::Buffer> outgrown;  // scratch buffers that planned launches may still use

    // The scratch buffer `which` with room for `floats` (grown when needed; kZeros filled with 0).
    const cl::Buffer& buffer(Scratch which, size_t floats) {
        if (scratch_floats[which] < floats) {
            if (scratch_floats[which]) outgrown.push_back(scratch[which]);
            scratch[which] = rt->buffer(std::max<size_t>(floats, 1) * sizeof(float));
            scratch_floats[which] = floats;
            if (which == kZeros) rt->fill(scratch[which], 0.0f, floats * sizeof(float));
        }
        return scratch[which];
    }

    template <class... Args>
    void launch(const char* name, const cl::NDRange& global, const cl::NDRange& local, const Args&... args) {
        if (*plan) {
            cl::Kernel k(program, name);
            cl_uint index = 0;
            (k.setArg(index++, args), ...);
            (*plan)->push_back({k, global, local, name});
            return;
        }
        auto it = kernels.find(name);
        if (it == kernels.end()) it = kernels.emplace(name, cl::Kernel(program, name)).first;
        cl::Kernel& k = it->second;
        cl_uint index = 0;
        (k.setArg(index++, args), ...);
        cl::Event event;
        rt->launch(k, global, local, *events ? &event : nullptr);
        if (*events) (*events)->push_back(event);
    }

    // CLBlast's commands for one routine (`call` enqueues them on the runtime's queue): run now, or
    // recorded into the plan as one launch that calls it.
    void clblast(const char* name, std::function<void(std::vector<cl::Event>*)> call) {
        if (*plan) (*plan)->push_back({cl::Kernel(), cl::NullRange, cl::NullRange, name, std::move(call)});
        else call(*events);
    }

    // How a GEMM of M x N over K is split over k: (splits, slice depth). Split when its tiles are
    // fewer than two per compute unit and k is deep enough.
    std::pair<size_t, size_t> split(int M, int N, int K) const {
        const size_t tiles = ((size_t(M) + kTile - 1) / kTile) * ((size_t(N) + kTile - 1) / kTile);
        const size_t want = 2 * compute_units;
        size_t splits = tiles >= want ? 1 : std::min((want + tiles - 1) / tiles, (size_t(K) + kMinSplitDepth - 1) / kMinSplitDepth);
        splits = std::max<size_t>(splits, 1);
        const size_t k_len = round_up((size_t(K) + splits - 1) / splits, kTileDepth);
        return {(size_t(K) + k_len - 1) / k_len, k_len};
    }

    // gemm's C(m, n) = sum over k in [z*k_len, (z+1)*k_len) of A(m, k) B(k, n) (A(m, k) = A[a_off +
    // m*a_m + k*a_k], B likewise) for z < splits, stored by `mode` at C[c_off + z*c_z + m*c_m + n*c_n].
    void gemm_launch(int M, int N, int K, size_t splits, size_t k_len, const cl::Buffer& A, size_t a_off, int a_m,
                     int a_k, const cl::Buffer& B, size_t b_off, int b_k, int b_n, const cl::Buffer& C, size_t c_off,
                     int c_m, int c_n, int c_z, int mode, int act, const cl::Buffer& E) {
        const size_t tn = (size_t(N) + kTile - 1) / kTile, tm = (size_t(M) + kTile - 1) / kTile;
        launch("gemm", cl::NDRange(tn * kGemmItems, tm * kGemmItems, splits), cl::NDRange(kGemmItems, kGemmItems, 1),
               M, N, K, as_int(k_len), A, as_int(a_off), a_m, a_k, B, as_int(b_off), b_k, b_n, C, as_int(c_off), c_m,
               c_n, c_z, mode, act, E, 0);
    }

    // C = A B with the epilogue `mode` (E: the bias by row); a split GEMM's slices go to scratch and
    // gemm_reduce adds them up in order.
    void gemm(int M, int N, int K, const cl::Buffer& A, size_t a_off, int a_m, int a_k, const cl::Buffer& B,
              size_t b_off, int b_k, int b_n, const cl::Buffer& C, size_t c_off, int c_m, int c_n, int mode, int act,
              const cl::Buffer& E) {
        const auto [splits, k_len] = split(M, N, K);
        if (splits == 1) {
            gemm_launch(M, N, K, 1, k_len, A, a_off, a_m, a_k, B, b_off, b_k, b_n, C, c_off, c_m, c_n, 0, mode, act, E);
            return;
        }
        const size_t slice = size_t(M) * N;
        const cl::Buffer& part = buffer(kSlices, splits * slice);
        gemm_launch(M, N, K, splits, k_len, A, a_off, a_m, a_k, B, b_off, b_k, b_n, part, 0, N, 1, as_int(slice), kStore,
                    0, E);
        launch("gemm_reduce", cl::NDRange(round_up(slice, wg)), cl::NDRange(wg), part, as_int(splits), M, N, C,
               as_int(c_off), c_m, c_n, mode, act, E, 0);
    }

    // Samples per im2col chunk: as many as the window matrix's limit allows (at least one).
    static int chunk(const ConvShape& s) {
        const size_t per = size_t(s.in_c) * s.kernel * s.kernel * s.out_h() * s.out_w();
        return static_cast<int>(std::clamp<size_t>(kColFloats / std::max<size_t>(per, 1), 1, size_t(s.batch)));
    }

    void im2col(const ConvShape& s, const cl::Buffer& in, const cl::Buffer& col, int s0, int cn) {
        const size_t P = size_t(s.out_h()) * s.out_w();
        launch("cv_im2col", cl::NDRange(round_up(cn * P, wg), size_t(s.in_c) * s.kernel * s.kernel), cl::NDRange(wg, 1),
               in, col, s0, cn, s.in_c, s.in_h, s.in_w, s.out_h(), s.out_w(), s.kernel, s.stride, s.pad);
    }

    // Samples s0 .. s0+cn-1 of an NCHW tensor of C maps between [s][c][p] and [c][s][p] (cv_reorder).
    void reorder(const cl::Buffer& src, const cl::Buffer& dst, int s0, int cn, int C, size_t P, bool to_cm) {
        launch("cv_reorder", cl::NDRange(round_up(P, wg), size_t(cn) * C), cl::NDRange(wg, 1), src, dst, s0, cn, C,
               as_int(P), to_cm ? 1 : 0);
    }

    void bias_grad(const ConvShape& s, const cl::Buffer& d_out, const cl::Buffer& d_bias) {
        launch("cv_bias_grad", cl::NDRange(size_t(s.out_c) * 256), cl::NDRange(256), d_out, d_bias, s.batch, s.out_c,
               s.out_h() * s.out_w());
    }

    void direct_forward(const ConvShape& s, const cl::Buffer& in, const cl::Buffer& w, const cl::Buffer& b,
                        const cl::Buffer& out, int act);
};

OpenCLConv::OpenCLConv(std::shared_ptr<DeviceRuntime> runtime) : impl_(std::make_unique<Impl>()) {
    Impl& m = *impl_;
    m.rt = std::move(runtime);
    const OpenCLDevice& device = m.rt->device();
    m.events = &events_;
    m.plan = &plan_;
    cl_checked([&] {
        const size_t limit = m.rt->max_group();
        if (limit < 256)
            throw Error("the convolution kernels need work-groups of 256 items; " + device.name + " allows " +
                        std::to_string(limit));
        m.compute_units = m.rt->compute_units();
        // NVIDIA's OpenCL gives a group at most 48 KiB of __local memory whatever the device has.
        m.local_floats = std::min<size_t>(m.rt->local_memory(), 48 * 1024) / sizeof(float) - 64;
        const std::string options = "-cl-std=CL1.2 -DLENET5_BATCH -DLENET5_CONV -DMEM_LOCAL -DCONV_LOCAL_FLOATS=1"
                                    " -DGEMM_TM=128 -DGEMM_TN=128 -DGEMM_TK=16 -DGEMM_RM=8 -DGEMM_RN=8";
        m.program = m.rt->program(opencl_kernel_file("update_rule.h") + opencl_kernel_file("batch_layers.cl") +  // its SGD's
                                      opencl_kernel_file("conv.cl"),
                                  options);
        // Auto's choices: what `lenet5 tune --conv` measured on this device and driver.
        chosen_ = tuned_conv_algos(device.platform_name, device.name, device.driver);
        for (auto it = chosen_.begin(); it != chosen_.end();)  // the engine's own kernels: OpenCLConv's default
            it = it->second == ConvAlgo::Own ? chosen_.erase(it) : std::next(it);
    });
}

OpenCLConv::~OpenCLConv() = default;

ConvAlgo OpenCLConv::resolve(ConvAlgo algo, const ConvShape& shape) const {
    if (algo != ConvAlgo::Auto) return algo;
    const auto it = chosen_.find(shape.describe());
    return it != chosen_.end() ? it->second : conv_default_algo(shape);
}

void OpenCLConv::choose(const ConvShape& shape, ConvAlgo algo) { chosen_[shape.describe()] = algo; }

namespace {

ConvAlgo checked(ConvAlgo algo, const ConvShape& s) {
    s.validate();
    if (!algo_built(algo))
        throw Error("the clblast convolution algorithm needs CLBlast, and this build has none (apt-get install "
                    "libclblast-dev, then rebuild with LENET5_CLBLAST=ON)");
    if (algo == ConvAlgo::Own)
        throw Error("the own convolution algorithm is the batch-level engine's (train, eval): use direct, im2col, winograd or clblast");
    return algo;
}

}  // namespace

void OpenCLConv::Impl::direct_forward(const ConvShape& s, const cl::Buffer& in, const cl::Buffer& w,
                                      const cl::Buffer& b, const cl::Buffer& out, int act) {
    if (s.out_c <= kFewMaps && s.stride > 1) {  // memory-bound: cv_direct_few reads the input where it lies
        launch("cv_direct_few", cl::NDRange(round_up(size_t(s.out_w()), wg), size_t(s.out_h()), size_t(s.batch)),
               cl::NDRange(wg, 1, 1), in, w, b, out, s.in_c, s.in_h, s.in_w, s.out_c, s.out_h(), s.out_w(), s.kernel,
               s.stride, s.pad, act);
        return;
    }
    // The tile for the number of maps, else the first whose one-channel round fits __local memory.
    const size_t first = s.out_c >= 48 ? 0 : s.out_c >= 12 ? 1 : 2;
    const bool k3 = s.kernel == 3 && s.stride == 1;
    for (size_t i = 0; i < kDirectTiles.size(); ++i) {
        const DirectTile& t = kDirectTiles[(first + i) % kDirectTiles.size()];
        const size_t ph = size_t(t.rows - 1) * s.stride + s.kernel, pw = size_t(t.cols - 1) * s.stride + s.kernel;
        const size_t per_channel = ph * pw + size_t(t.maps) * s.kernel * s.kernel;
        if (per_channel > local_floats) continue;
        const int ci = static_cast<int>(std::min<size_t>({local_floats / per_channel, size_t(s.in_c), 16}));
        const size_t tiles = ((size_t(s.out_h()) + t.rows - 1) / t.rows) * ((size_t(s.out_w()) + t.cols - 1) / t.cols);
        const std::string name = std::string(t.name) + (k3 ? "_k3" : "");
        launch(name.c_str(), cl::NDRange(tiles * 256, (size_t(s.out_c) + t.maps - 1) / t.maps, size_t(s.batch)),
               cl::NDRange(256, 1, 1), in, w, b, out, s.in_c, s.in_h, s.in_w, s.out_c, s.out_h(), s.out_w(), s.kernel,
               s.stride, s.pad, act, ci, cl::Local(ci * ph * pw * sizeof(float)),
               cl::Local(size_t(ci) * t.maps * s.kernel * s.kernel * sizeof(float)));
        return;
    }
    throw Error("direct convolution " + s.describe() + ": a kernel this large does not fit the device's " +
                std::to_string(local_floats * sizeof(float)) + " bytes of __local memory; use im2col");
}

bool OpenCLConv::winograd_takes(const ConvShape& s) {
    const size_t T = size_t(s.batch) * ((s.out_h() + 3) / 4) * ((s.out_w() + 3) / 4);
    return s.kernel == 3 && s.stride == 1 && s.in_c >= 16 && s.in_c % 4 == 0 &&
           size_t(36) * std::max(s.in_c, s.out_c) * T < (size_t(1) << 31);
}

void OpenCLConv::winograd_transform(const ConvShape& s, const cl::Buffer& weights, const cl::Buffer& filters) {
    Impl& m = *impl_;
    cl_checked([&] {
        m.launch("cv_wino_filters", cl::NDRange(round_up(size_t(s.out_c) * s.in_c, m.wg)), cl::NDRange(m.wg), weights,
                 filters, s.out_c, s.in_c, 0);
    });
}

void OpenCLConv::forward_winograd(const ConvShape& s, const cl::Buffer& in, const cl::Buffer& filters,
                                  const cl::Buffer& b, const cl::Buffer& out, Activation act) {
    Impl& m = *impl_;
    s.validate();
    if (!winograd_takes(s))
        throw Error("winograd convolution " + s.describe() + ": needs a 3x3 kernel, stride 1 and a multiple of 4 input maps, at least 16");
    cl_checked([&] {
        const int tiles_w = (s.out_w() + 3) / 4, tiles = tiles_w * ((s.out_h() + 3) / 4), T = s.batch * tiles;
        const int K = 36 * s.in_c;
        const cl::Buffer& V = m.buffer(kCol, size_t(K) * T);
        const cl::Buffer& M = m.buffer(kReorder, size_t(36) * s.out_c * T);
        m.launch("cv_wino_input", cl::NDRange(round_up(size_t(T), m.wg), size_t(s.in_c)), cl::NDRange(m.wg, 1), in, V,
                 s.in_c, s.in_h, s.in_w, s.pad, tiles_w, tiles, T);
        // M[xi] = U[xi] V[xi] for the 36 points at once, as the fast GEMM's 36 slices over k: slice
        // xi reads A's columns xi*in_c .. (U[o][xi][c]), B's rows xi*in_c .. (V[xi][c][t]) and writes
        // C + xi*out_c*T.
        const size_t tiles_n = (size_t(T) + kTile - 1) / kTile, tiles_m = (size_t(s.out_c) + kTile - 1) / kTile;
        m.launch("gemm_fast_kn", cl::NDRange(tiles_n * 256, tiles_m, 36), cl::NDRange(256, 1, 1), s.out_c, T, K, s.in_c,
                 filters, 0, K, 1, V, 0, T, 1, M, 0, T, 1, as_int(size_t(s.out_c) * T), kStore, 0, b, 0, 1,
                 int(T % 4 == 0));
        m.launch("cv_wino_output", cl::NDRange(round_up(size_t(T), m.wg), size_t(s.out_c)), cl::NDRange(m.wg, 1), M, b,
                 out, s.out_c, s.out_h(), s.out_w(), tiles_w, tiles, T, static_cast<int>(act));
    });
}

void OpenCLConv::forward(ConvAlgo algo, const ConvShape& s, const cl::Buffer& in, const cl::Buffer& w,
                         const cl::Buffer& b, const cl::Buffer& out, Activation act) {
    Impl& m = *impl_;
    const int a = static_cast<int>(act);  // network.h's order is batch_layers.cl's BA_*
    cl_checked([&] {
        switch (checked(resolve(algo, s), s)) {
            case ConvAlgo::Winograd:
                if (winograd_takes(s)) {
                    const cl::Buffer& U = m.buffer(kWinoFilters, size_t(36) * s.out_c * s.in_c);
                    winograd_transform(s, w, U);
                    forward_winograd(s, in, U, b, out, act);
                    return;
                }
                [[fallthrough]];
            case ConvAlgo::Auto:
            case ConvAlgo::Own:  // refused by checked()
            case ConvAlgo::Direct: m.direct_forward(s, in, w, b, out, a); return;
            case ConvAlgo::CLBlast: {
#ifdef LENET5_HAVE_CLBLAST
                m.clblast("clblast_convgemm", [rt = m.rt, s, in, w, out](std::vector<cl::Event>* events) {
                    clblast_forward(rt->queue(), s, in, w, out, events);
                });
                const size_t P = size_t(s.out_h()) * s.out_w();
                m.launch("cv_bias_act", cl::NDRange(round_up(P, m.wg), size_t(s.batch) * s.out_c), cl::NDRange(m.wg, 1),
                         out, b, s.out_c, as_int(P), a);
#endif
                return;
            }
            case ConvAlgo::Im2col: break;
        }
        // out[s] [OC][P] = act(w [OC][CKK] x col [CKK][P] + b), a chunk of samples at a time.
        const int CKK = s.in_c * s.kernel * s.kernel, chunk = Impl::chunk(s);
        const size_t P = size_t(s.out_h()) * s.out_w();
        for (int s0 = 0; s0 < s.batch; s0 += chunk) {
            const int cn = std::min(chunk, s.batch - s0), N = as_int(cn * P);
            const cl::Buffer& col = m.buffer(kCol, size_t(CKK) * N);
            m.im2col(s, in, col, s0, cn);
            // One sample's [OC][P] is its place in out; several go through kReorder ([OC][j*P + p]).
            const cl::Buffer& to = cn == 1 ? out : m.buffer(kReorder, size_t(s.out_c) * N);
            m.gemm(s.out_c, N, CKK, w, 0, CKK, 1, col, 0, N, 1, to, cn == 1 ? s0 * s.out_c * P : 0, N, 1, kBiasActM, a, b);
            if (cn > 1) m.reorder(to, out, s0, cn, s.out_c, P, false);
        }
    });
}

void OpenCLConv::backward_data(ConvAlgo algo, const ConvShape& s, const cl::Buffer& d_out, const cl::Buffer& w,
                               const cl::Buffer& d_in, Activation in_act, const cl::Buffer& in) {
    Impl& m = *impl_;
    pure_backward_data(algo, s, d_out, w, d_in);
    if (in_act != Activation::None)
        cl_checked([&] {
            m.launch("cv_delta", cl::NDRange(round_up(s.input_size(), m.wg)), cl::NDRange(m.wg), d_in, in,
                     as_int(s.input_size()), static_cast<int>(in_act));
        });
}

void OpenCLConv::pure_backward_data(ConvAlgo algo, const ConvShape& s, const cl::Buffer& d_out, const cl::Buffer& w,
                                    const cl::Buffer& d_in) {
    Impl& m = *impl_;
    cl_checked([&] {
        const int K = s.kernel, CKK = s.in_c * K * K;
        const size_t P = size_t(s.out_h()) * s.out_w();
        // The input gradient of a stride-1 convolution: the forward convolution of d_out with the
        // flipped, transposed weights, padded by K-1-P.
        const ConvShape t{s.batch, s.out_c, s.out_h(), s.out_w(), s.in_c, K, 1, K - 1 - s.pad};
        switch (checked(resolve(algo, s), s)) {
            case ConvAlgo::Winograd:
                if (s.stride == 1 && winograd_takes(t)) {
                    const cl::Buffer& U = m.buffer(kWinoFilters, size_t(36) * s.out_c * s.in_c);
                    m.launch("cv_wino_filters", cl::NDRange(round_up(size_t(s.out_c) * s.in_c, m.wg)), cl::NDRange(m.wg),
                             w, U, s.in_c, s.out_c, 1);
                    forward_winograd(t, d_out, U, m.buffer(kZeros, size_t(s.in_c)), d_in);
                    return;
                }
                [[fallthrough]];
            case ConvAlgo::Auto:
            case ConvAlgo::Own:  // refused by checked()
            case ConvAlgo::Direct:
                if (s.stride == 1) {
                    const cl::Buffer& wf = m.buffer(kFlipped, s.weight_size());
                    m.launch("cv_flip_weights", cl::NDRange(round_up(s.weight_size(), m.wg)), cl::NDRange(m.wg), w, wf,
                             s.in_c, s.out_c, K);
                    m.direct_forward(t, d_out, wf, m.buffer(kZeros, size_t(s.in_c)), d_in,
                                     static_cast<int>(Activation::None));
                } else {
                    m.launch("cv_backward_data", cl::NDRange(round_up(size_t(s.in_h) * s.in_w, m.wg), size_t(s.batch) * s.in_c),
                             cl::NDRange(m.wg, 1), d_out, w, d_in, s.in_c, s.in_h, s.in_w, s.out_c, s.out_h(),
                             s.out_w(), K, s.stride, s.pad);
                }
                return;
            case ConvAlgo::CLBlast:
#ifdef LENET5_HAVE_CLBLAST
                m.clblast("clblast_backward_data", [rt = m.rt, s, d_out, w, d_in, col = m.buffer(kCol, size_t(CKK) * P)](
                                                       std::vector<cl::Event>* events) {
                    clblast_backward_data(rt->queue(), s, d_out, w, d_in, col, events);
                });
#endif
                return;
            case ConvAlgo::Im2col: break;
        }
        // col [CKK][j*P + p] = w^T [CKK][OC] x d_out [OC][j*P + p], then col2im, a chunk at a time.
        const int chunk = Impl::chunk(s);
        for (int s0 = 0; s0 < s.batch; s0 += chunk) {
            const int cn = std::min(chunk, s.batch - s0), N = as_int(cn * P);
            const cl::Buffer& col = m.buffer(kCol, size_t(CKK) * N);
            const cl::Buffer& from = cn == 1 ? d_out : m.buffer(kReorder, size_t(s.out_c) * N);
            if (cn > 1) m.reorder(d_out, from, s0, cn, s.out_c, P, true);
            m.gemm(CKK, N, s.out_c, w, 0, 1, CKK, from, cn == 1 ? s0 * s.out_c * P : 0, N, 1, col, 0, N, 1, kStore, 0, w);
            m.launch("cv_col2im", cl::NDRange(round_up(size_t(s.in_h) * s.in_w, m.wg), size_t(cn) * s.in_c),
                     cl::NDRange(m.wg, 1), col, d_in, s0, cn, s.in_c, s.in_h, s.in_w, s.out_h(), s.out_w(), K,
                     s.stride, s.pad);
        }
    });
}

void OpenCLConv::backward_weights(ConvAlgo algo, const ConvShape& s, const cl::Buffer& in, const cl::Buffer& d_out,
                                  const cl::Buffer& d_w, const cl::Buffer& d_b) {
    Impl& m = *impl_;
    cl_checked([&] {
        const int K = s.kernel, CKK = s.in_c * K * K, OH = s.out_h();
        const size_t P = size_t(OH) * s.out_w(), W = s.weight_size();
        switch (checked(resolve(algo, s), s)) {
            case ConvAlgo::Winograd: break;  // the weight gradient as im2col's GEMMs (below)
            case ConvAlgo::Auto:
            case ConvAlgo::Own:  // refused by checked()
            case ConvAlgo::Direct: {
                // Shares of `per` samples x `rows` output rows, enough for about kShareItems items.
                const size_t cols = W + size_t(s.out_c);
                size_t shares = std::clamp<size_t>(kShareItems / cols, 1, std::max<size_t>(1, kShareFloats / cols));
                int per = 1, chunks = 1;
                if (shares >= size_t(s.batch)) {
                    chunks = static_cast<int>(std::min<size_t>(shares / s.batch, size_t(OH)));
                } else {
                    per = static_cast<int>((size_t(s.batch) + shares - 1) / shares);
                }
                const int rows = (OH + chunks - 1) / chunks;
                chunks = (OH + rows - 1) / rows;
                shares = size_t((s.batch + per - 1) / per) * chunks;
                const cl::Buffer& part = m.buffer(kSlices, shares * cols);
                m.launch("cv_weight_partials", cl::NDRange(round_up(cols, m.wg), shares), cl::NDRange(m.wg, 1), in,
                         d_out, part, s.batch, s.in_c, s.in_h, s.in_w, s.out_c, OH, s.out_w(), K, s.stride, s.pad, per,
                         rows);
                m.launch("cv_sum_shares", cl::NDRange(round_up(cols, m.wg)), cl::NDRange(m.wg), part, as_int(shares),
                         as_int(W), s.out_c, d_w, d_b);
                return;
            }
            case ConvAlgo::CLBlast:
#ifdef LENET5_HAVE_CLBLAST
                m.clblast("clblast_backward_weights", [rt = m.rt, s, in, d_out, d_w, col = m.buffer(kCol, size_t(CKK) * P)](
                                                          std::vector<cl::Event>* events) {
                    clblast_backward_weights(rt->queue(), s, in, d_out, d_w, col, events);
                });
                m.bias_grad(s, d_out, d_b);
#endif
                return;
            case ConvAlgo::Im2col: break;
        }
        // d_w [OC][CKK] = sum over chunks of d_out [OC][j*P + p] x col^T [j*P + p][CKK], each chunk's
        // GEMM (split over k when its tiles are few) into slices that gemm_reduce adds up in order.
        const int chunk = Impl::chunk(s);
        size_t slices = 0;
        for (int s0 = 0; s0 < s.batch; s0 += chunk) slices += m.split(s.out_c, CKK, as_int(std::min(chunk, s.batch - s0) * P)).first;
        const cl::Buffer& part = m.buffer(kSlices, slices * W);
        size_t slice = 0;
        for (int s0 = 0; s0 < s.batch; s0 += chunk) {
            const int cn = std::min(chunk, s.batch - s0), N = as_int(cn * P);
            const cl::Buffer& col = m.buffer(kCol, size_t(CKK) * N);
            m.im2col(s, in, col, s0, cn);
            const cl::Buffer* dm = &d_out;
            size_t d_off = s0 * s.out_c * P;
            if (cn > 1) {
                dm = &m.buffer(kReorder, size_t(s.out_c) * N);
                m.reorder(d_out, *dm, s0, cn, s.out_c, P, true);
                d_off = 0;
            }
            const auto [splits, k_len] = m.split(s.out_c, CKK, N);
            const cl::Buffer& to = slices == 1 ? d_w : part;
            m.gemm_launch(s.out_c, CKK, N, splits, k_len, *dm, d_off, N, 1, col, 0, 1, N, to, slice * W, CKK, 1,
                          as_int(W), kStore, 0, d_w);
            slice += splits;
        }
        if (slices > 1)
            m.launch("gemm_reduce", cl::NDRange(round_up(W, m.wg)), cl::NDRange(m.wg), part, as_int(slices), s.out_c,
                     CKK, d_w, 0, CKK, 1, kStore, 0, d_w, 0);
        m.bias_grad(s, d_out, d_b);
    });
}

}  // namespace lenet5::conv
