#include "opencl/opencl_batch_engine.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

#include "conv/conv_tuning.h"
#include "opencl/generic_layers.h"
#include "opencl/opencl_kernels.h"

namespace lenet5 {
namespace {

// The GEMM's tiles (batch_layers.cl): tm x tn of C per work-group, tk deep per round, each item a
// rm x rn block; 256 items either way. Small tiles for C with few rows (a small batch's forward
// and input gradients), where the large ones would mostly compute padding.
struct GemmTiles {
    int tm, tn, tk, rm, rn;
    int items_n() const { return tn / rn; }
    int items_m() const { return tm / rm; }
};
constexpr GemmTiles kLargeTiles{128, 128, 16, 8, 8}, kSmallTiles{16, 64, 16, 1, 4};
constexpr int kSmallRows = 32;  // C with at most this many rows takes the small tiles

// Items per compute unit that a convolution's gradient shares should give (conv_partials).
constexpr size_t kPartialItems = 2048;

// At batches up to this size, the fully connected layer with the most weights (at least
// kFusedWeights, inputs and outputs multiples of 4: fc_sgd's float4) gets its weight gradient
// inside the update (fc_sgd), not written out by a GEMM.
constexpr int kFusedBatch = 32;
constexpr size_t kFusedWeights = 65536;
// ... and at batches up to this size (batch_layers.cl's FD_SAMPLES), unless it is the first layer,
// the delta below it too (fc_sgd_data), reading the weights once for both.
constexpr int kFusedDataBatch = 16;
constexpr size_t kFusedDataRows = 128;  // fc_sgd_data's FD_ROWS

// gemm_skinny_n's items per work-group (batch_layers.cl's SK_GROUP).
constexpr size_t kSkinnyGroup = 64;

// gpu-local, at batches up to kFusedBatch: a last layer that is fully connected with at most this
// many outputs runs as head_forward (with the loss) and head_backward, not GEMMs.
constexpr int kHeadOutputs = 32;

// A training step of at most kFusedBatch samples is timed once in this many steps (and stands for
// the others): an event costs host time, which such a step's dozen launches must keep below the
// device's.
constexpr int kTimeEvery = 8;

// gemm_tc takes a GEMM at least this deep (gemm_fast the shallower ones).
constexpr int kMinTensorCoreDepth = 64;

// A split GEMM's slices are at least this deep.
constexpr int kMinSplitDepth = 256;

// batch_layers.cl's GEMM epilogues.
constexpr int kStore = 0, kBiasAct = 1, kDelta = 2, kBiasActM = 3;

// The fast convolution kernels' limits (batch_layers.cl, CONV_FK): the zero-padded input plane
// (rows of IW + 2P + 3) and one work-group's weights, in floats of __local memory.
constexpr size_t kConvPlane = 4096, kConvWeights = 4096;

// Whether gpu-local's large GEMMs can run on the device's tensor cores (gemm_tc.cl, 3xTF32 through
// NVIDIA's inline PTX): an NVIDIA GPU of compute capability 8.0 or more, unless the environment
// says LENET5_GEMM_TC=0 (to compare with the fast GEMM).
bool has_tf32_tensor_cores(const cl::Device& dev) {
    const char* env = std::getenv("LENET5_GEMM_TC");
    if (env && std::string(env) == "0") return false;
    if (dev.getInfo<CL_DEVICE_EXTENSIONS>().find("cl_nv_device_attribute_query") == std::string::npos) return false;
    constexpr cl_device_info kComputeCapabilityMajor = 0x4000;  // CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV
    cl_uint major = 0;
    return clGetDeviceInfo(dev(), kComputeCapabilityMajor, sizeof(major), &major, nullptr) == CL_SUCCESS && major >= 8;
}

// The fast convolution kernels take a layer with one input map, stride 1 and kernels of fk x fk.
bool fast_conv(const LayerSpec& l, int fk) {
    if (l.kind != LayerKind::Conv || l.in.c != 1 || l.stride != 1 || l.kernel != fk || l.out.c > 256) return false;
    if (static_cast<size_t>(l.in.h + 2 * l.pad) * static_cast<size_t>(l.in.w + 2 * l.pad + 3) > kConvPlane) return false;
    if (static_cast<size_t>(l.out.c * l.kernel * l.kernel) > kConvWeights) return false;
    for (int o = 0; o <= l.out.c; ++o)
        if (l.conn_begin[static_cast<size_t>(o)] != o) return false;  // every map has its one connection
    return true;
}

int as_int(size_t n) { return static_cast<int>(n); }

cl::NDRange rows_of(size_t per_row, size_t rows, size_t wg) { return cl::NDRange(round_up(per_row, wg), rows); }

}  // namespace

OpenCLBatchEngine::OpenCLBatchEngine(Network net, MemoryVariant memory, std::shared_ptr<DeviceRuntime> runtime,
                                     conv::ConvAlgo conv_algo, bool inference_only, const TrainingRule& rule)
    : OpenCLEngineBase(std::move(net), memory, std::move(runtime), kTimeEvery, inference_only, rule),
      conv_algo_(conv_algo),
      tuned_conv_(conv::tuned_conv_algos(rt_->device().platform_name, rt_->device().name, rt_->device().driver)) {
    cl_checked([&] {
        const cl::Device& dev = rt_->cl_device();
        for (const GemmTiles& t : {kLargeTiles, kSmallTiles})
            if (static_cast<size_t>(t.items_n() * t.items_m()) > rt_->max_group())
                throw Error("the batch-level GEMM needs work-groups of " + std::to_string(t.items_n() * t.items_m()) +
                            " items; " + rt_->device().name + " allows " + std::to_string(rt_->max_group()));
        build_program();

        const cl_ulong constant_limit = dev.getInfo<CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE>();
        const cl::Buffer none = rt_->buffer(sizeof(float), CL_MEM_READ_ONLY);  // for layers without parameters
        auto block = [&](const DeviceLayout::Block& b) {
            return b.count ? DeviceRuntime::floats_of(params_, b.device, b.count) : none;
        };
        auto table = [&](const std::vector<int32_t>& v) { return rt_->buffer(v.data(), v.size() * sizeof(int32_t)); };
        for (size_t k = 0; k < net_.layers.size(); ++k) {
            const LayerSpec& l = net_.layers[k];
            LayerData d;
            d.weights = block(layout_.weights(k));
            d.bias = block(layout_.bias(k));
            const size_t param_bytes = (l.weight_count + l.bias_count) * sizeof(float);
            const bool small_weights = l.kind == LayerKind::Subsample ||
                                       (l.kind == LayerKind::Conv &&
                                        (!inference_only_ || inference_runs_own_conv(l, conv_algo_)));
            if (memory_ == MemoryVariant::Constant && small_weights && param_bytes > constant_limit)
                throw Error("gpu-constant: layer " + l.name + "'s parameters take " + std::to_string(param_bytes) +
                            " bytes; " + rt_->device().name + " allows " + std::to_string(constant_limit) +
                            " of __constant memory (CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE)");
            d.constant_fc = memory_ == MemoryVariant::Constant && l.kind == LayerKind::FullyConnected &&
                            param_bytes <= constant_limit;
            if (l.kind == LayerKind::Conv) {
                d.conn_begin = table(l.conn_begin);
                d.conn_in = table(l.conn_in);
                d.conn_out = table(l.conn_out);
                // The connections that read each input map, in connection order.
                std::vector<int32_t> in_begin(static_cast<size_t>(l.in.c) + 1, 0), in_conn;
                for (int i = 0; i < l.in.c; ++i) {
                    for (int j = 0; j < l.connections(); ++j)
                        if (l.conn_in[static_cast<size_t>(j)] == i) in_conn.push_back(j);
                    in_begin[static_cast<size_t>(i) + 1] = static_cast<int32_t>(in_conn.size());
                }
                d.in_begin = table(in_begin);
                d.in_conn = table(in_conn.empty() ? std::vector<int32_t>{0} : in_conn);
                if (!inference_only_) {
                    d.grad_weights = DeviceRuntime::floats_of(grads_, layout_.weights(k).device, l.weight_count);
                    d.grad_bias = DeviceRuntime::floats_of(grads_, layout_.bias(k).device, l.bias_count);
                }
            }
            layers_.push_back(std::move(d));
        }
        if (inference_only_) {
            inference();  // its kernels built now, not in the first infer()
        } else {
            const size_t n = layout_.size();
            update_ = {{rule_.adam() ? adam_kernel()
                                     : kernel(program_, "batch_sgd", params_, velocity_, grads_, as_int(n), 0.0f, 0.0f,
                                              0.0f, 0, 0),
                        cl::NDRange(round_up(n, wg_)), cl::NDRange(wg_), rule_.adam() ? "adam_update" : "batch_sgd"}};
        }
        set_params(std::vector<float>(net_.param_count, 0.0f));
    });
}

BatchInference& OpenCLBatchEngine::inference() {
    if (!inference_) {
        if (!conv_) conv_ = std::make_unique<conv::OpenCLConv>(rt_);
        std::vector<BatchInference::LayerBuffers> buffers;
        for (const LayerData& d : layers_) buffers.push_back({d.weights, d.bias, d.conn_begin, d.conn_in});
        inference_ = std::make_unique<BatchInference>(net_, rt_, program_, std::move(buffers), *conv_, conv_algo_, wg_);
    }
    return *inference_;
}

void OpenCLBatchEngine::params_replaced() {
    if (inference_) inference_->params_changed();
}

void OpenCLBatchEngine::infer(const float* inputs, int count, float* outputs, std::vector<double>* layer_ms) {
    cl_checked([&] { inference().run(inputs, count, outputs, layer_ms); });
}

void OpenCLBatchEngine::inputs_changed(Split, bool slots_replaced) {
    if (slots_replaced) planned_ = 0;  // the loss launch refers to the old buffers: plan again
}

void OpenCLBatchEngine::build_program() {
    const cl::Device& dev = rt_->cl_device();
    // gpu-local stages a convolution output map's weights: the largest such set (inference alone:
    // of the convolutions that run conv_forward).
    size_t conv_local = 1;
    for (const auto& l : net_.layers)
        if (l.kind == LayerKind::Conv && (!inference_only_ || inference_runs_own_conv(l, conv_algo_)))
            for (int o = 0; o < l.out.c; ++o)
                conv_local = std::max(conv_local, static_cast<size_t>(l.conn_begin[static_cast<size_t>(o) + 1] -
                                                                      l.conn_begin[static_cast<size_t>(o)]) *
                                                      static_cast<size_t>(l.kernel * l.kernel));
    const cl_ulong local_mem = rt_->local_memory();
    if (memory_ == MemoryVariant::Local && conv_local * sizeof(float) > local_mem)
        throw Error("gpu-local: a convolution output map's weights take " + std::to_string(conv_local * sizeof(float)) +
                    " bytes; " + rt_->device().name + " has " + std::to_string(local_mem) +
                    " of __local memory (CL_DEVICE_LOCAL_MEM_SIZE)");
    // The fast convolution kernels (training only: inference runs conv_forward) are built for the
    // kernel size of the first layer they can take.
    conv_fk_ = 0;
    for (const auto& l : net_.layers)
        if (!inference_only_ && conv_fk_ == 0 && fast_conv(l, l.kernel)) conv_fk_ = l.kernel;
    std::string conv_fast;
    if (conv_fk_) {
        const size_t sums = 256 * static_cast<size_t>(conv_fk_ * conv_fk_ + 1);
        conv_fast = " -DCONV_FK=" + std::to_string(conv_fk_) + " -DCONV_PLANE=" + std::to_string(kConvPlane) +
                    " -DCONV_FW=" + std::to_string(kConvWeights) + " -DCONV_SHARED=" +
                    std::to_string(memory_ == MemoryVariant::Local ? std::max(sums, kConvPlane) : sums);
    }
    const std::string options =
        build_options(" -DLENET5_BATCH -DCONV_LOCAL_FLOATS=" + std::to_string(conv_local) + conv_fast);
    auto tiles = [](const GemmTiles& t) {
        return " -DGEMM_TM=" + std::to_string(t.tm) + " -DGEMM_TN=" + std::to_string(t.tn) +
               " -DGEMM_TK=" + std::to_string(t.tk) + " -DGEMM_RM=" + std::to_string(t.rm) +
               " -DGEMM_RN=" + std::to_string(t.rn);
    };
    const std::string source = opencl_kernel_file("data.cl") + opencl_kernel_file("update_rule.h") +
                               opencl_kernel_file("update.cl") + opencl_kernel_file("batch_layers.cl") +
                               opencl_kernel_file("infer.cl") + generic_layer_sources(net_);
    tensor_cores_ = false;
    if (!inference_only_ && memory_ == MemoryVariant::Local && has_tf32_tensor_cores(dev)) {
        try {  // gemm_tc.cl's inline PTX; a driver that refuses it leaves the fast GEMM
            program_ = rt_->program(source + opencl_kernel_file("gemm_tc.cl"), options + tiles(kLargeTiles) + " -DGEMM_TC");
            tensor_cores_ = true;
        } catch (const Error&) {
        }
    }
    if (!tensor_cores_) program_ = rt_->program(source, options + tiles(kLargeTiles));
    if (!inference_only_) small_gemm_ = rt_->program(source, options + tiles(kSmallTiles));
}

// C = A B with the epilogue `mode` (batch_layers.cl's gemm). When its tiles are too few to give
// every compute unit two, the sum over k is split into slices, each written to a scratch buffer,
// and gemm_reduce adds them up in order.
void OpenCLBatchEngine::gemm(std::vector<Launch>& into, const std::string& name, int M, int N, int K,
                             const cl::Buffer& A, int a_off, int a_m, int a_k, const cl::Buffer& B, int b_off, int b_k,
                             int b_n, const cl::Buffer& C, int c_off, int c_m, int c_n, int mode, int act,
                             const cl::Buffer& E, int e_off) {
    // C with few columns and many rows: C^T = B^T A^T, so that the small tiles take it.
    if (M > kSmallRows && N <= kSmallRows) {
        gemm(into, name, N, M, K, B, b_off, b_n, b_k, A, a_off, a_k, a_m, C, c_off, c_n, c_m,
             mode == kBiasAct ? kBiasActM : mode, act, E, e_off);
        return;
    }
    // gpu-local, at most 16 rows and a deep k: slices of k over many groups (gemm_skinny_*), B read once.
    const bool b_kcontig = b_k == 1 && b_n != 1, b_ncont = b_n == 1 && b_k != 1;
    if (memory_ == MemoryVariant::Local && M <= 16 && K >= 256 && (a_k == 1 || a_m == 1) && (b_kcontig || b_ncont)) {
        // gemm_skinny_k: groups of 256 items, 64 columns of C each; gemm_skinny_n: kSkinnyGroup items, 4 columns each.
        const size_t items = b_kcontig ? 256 : kSkinnyGroup, per_group = b_kcontig ? 64 : 4 * kSkinnyGroup;
        const size_t blocks = (static_cast<size_t>(N) + per_group - 1) / per_group;
        // Slices (multiples of 64) about as many as give every compute unit two groups (gemm_skinny_k,
        // slices of 64 .. 384) or six (gemm_skinny_n, 64 .. 256).
        size_t k_len = round_up(static_cast<size_t>(K) * blocks / ((b_kcontig ? 2 : 6) * rt_->compute_units()), 64);
        k_len = std::clamp<size_t>(k_len, 64, b_kcontig ? 384 : 256);
        const size_t splits = (static_cast<size_t>(K) + k_len - 1) / k_len, slice = static_cast<size_t>(M) * N;
        scratch_.push_back(rt_->buffer(splits * slice * sizeof(float)));
        const cl::NDRange global(blocks * items, 1, splits), local(items, 1, 1);
        if (b_kcontig)  // float4 loads of B where its rows allow
            into.push_back({kernel(program_, "gemm_skinny_k", M, N, K, as_int(k_len), A, a_off, a_m, a_k, B, b_off, b_n,
                                   scratch_.back(), as_int(slice), static_cast<int>(b_off % 4 == 0 && b_n % 4 == 0)),
                            global, local, name});
        else  // float4 loads of B where its rows and columns allow
            into.push_back({kernel(program_, "gemm_skinny_n", M, N, K, as_int(k_len), A, a_off, a_m, a_k, B, b_off, b_k,
                                   scratch_.back(), as_int(slice),
                                   static_cast<int>(b_off % 4 == 0 && b_k % 4 == 0 && N % 4 == 0)),
                            global, local, name});
        into.push_back({kernel(program_, "gemm_reduce", scratch_.back(), as_int(splits), M, N, C, c_off, c_m, c_n, mode,
                               act, E, e_off),
                        cl::NDRange(round_up(slice, wg_)), cl::NDRange(wg_), name + " (reduce)"});
        return;
    }
    const bool small = M <= kSmallRows;
    const GemmTiles& t = small ? kSmallTiles : kLargeTiles;
    // gpu-local's fast GEMM (gemm_fast_*): each operand contiguous along k or along m (A) / n (B).
    const bool a_mcontig = a_m == 1 && a_k != 1, b_ncontig = b_n == 1 && b_k != 1;
    const bool fast = memory_ == MemoryVariant::Local && !small && (a_mcontig || a_k == 1) && (b_ncontig || b_k == 1);
    const int a_vec = a_off % 4 == 0 && (a_mcontig ? a_k % 4 == 0 && M % 4 == 0 : a_m % 4 == 0 && K % 4 == 0);
    const int b_vec = b_off % 4 == 0 && (b_ncontig ? b_k % 4 == 0 && N % 4 == 0 : b_n % 4 == 0 && K % 4 == 0);
    const size_t tiles_n = (static_cast<size_t>(N) + t.tn - 1) / t.tn;
    const size_t tiles_m = (static_cast<size_t>(M) + t.tm - 1) / t.tm;
    const size_t tiles = tiles_n * tiles_m, want = 2 * rt_->compute_units();
    size_t splits = 1, k_len = static_cast<size_t>(K);
    if (tiles < want) {
        // The fast GEMM's groups fill the device in one wave at two per compute unit: no more.
        splits = std::min(fast ? std::max<size_t>(1, want / tiles) : (want + tiles - 1) / tiles,
                          (k_len + kMinSplitDepth - 1) / kMinSplitDepth);
        k_len = round_up((k_len + splits - 1) / splits, static_cast<size_t>(t.tk));
        splits = (static_cast<size_t>(K) + k_len - 1) / k_len;
    }
    const cl::Program& program = small ? small_gemm_ : program_;
    const cl::NDRange global(tiles_n * t.items_n(), tiles_m * t.items_m(), splits),
        local(t.items_n(), t.items_m(), 1);
    // The tensor cores for a deep enough k (at k = 10, the CNN's output layer's delta below, the
    // fast GEMM took 17 us on the H100 and gemm_tc 37).
    const bool tc = tensor_cores_ && K >= kMinTensorCoreDepth;
    const char* fast_name = tc ? (a_mcontig ? (b_ncontig ? "gemm_tc_mn" : "gemm_tc_mk")
                                                       : (b_ncontig ? "gemm_tc_kn" : "gemm_tc_kk"))
                            : a_mcontig ? (b_ncontig ? "gemm_fast_mn" : "gemm_fast_mk")
                                        : (b_ncontig ? "gemm_fast_kn" : "gemm_fast_kk");
    auto launch = [&](const cl::Buffer& out, int off, int o_m, int o_n, int o_z, int o_mode) {
        if (fast)
            into.push_back({kernel(program, fast_name, M, N, K, as_int(k_len), A, a_off, a_m, a_k, B, b_off, b_k, b_n,
                                   out, off, o_m, o_n, o_z, o_mode, act, E, e_off, a_vec, b_vec),
                            cl::NDRange(tiles_n * 256, tiles_m, splits), cl::NDRange(256, 1, 1), name});
        else
            into.push_back({kernel(program, "gemm", M, N, K, as_int(k_len), A, a_off, a_m, a_k, B, b_off, b_k, b_n,
                                   out, off, o_m, o_n, o_z, o_mode, act, E, e_off),
                            global, local, name});
    };
    if (splits == 1) {
        launch(C, c_off, c_m, c_n, 0, mode);
        return;
    }
    const size_t slice = static_cast<size_t>(M) * static_cast<size_t>(N);
    scratch_.push_back(rt_->buffer(splits * slice * sizeof(float)));
    launch(scratch_.back(), 0, N, 1, as_int(slice), kStore);
    into.push_back({kernel(program_, "gemm_reduce", scratch_.back(), as_int(splits), M, N, C, c_off, c_m, c_n, mode,
                           act, E, e_off),
                    cl::NDRange(round_up(slice, wg_)), cl::NDRange(wg_), name + " (reduce)"});
}

// grads[off_w + c] (c < split) or grads[off_b + c - split] = the sum of part's rows in order
// (sum_rows; sum_rows32 in 32 parts, then those in order, for many rows).
OpenCLBatchEngine::Launch OpenCLBatchEngine::sum_rows(const cl::Buffer& part, int rows, int cols, int split, int off_w,
                                                      int off_b, const std::string& layer) {
    if (rows >= 64)
        return {kernel(program_, "sum_rows32", part, rows, cols, split, grads_, off_w, off_b),
                cl::NDRange(round_up(static_cast<size_t>(cols), 8), 32), cl::NDRange(8, 32), layer + " sum_rows"};
    return {kernel(program_, "sum_rows", part, rows, cols, split, grads_, off_w, off_b),
            cl::NDRange(round_up(static_cast<size_t>(cols), wg_)), cl::NDRange(wg_), layer + " sum_rows"};
}

// The launches of one layer for batches of `count` samples: its forward into forward_, its
// backward (gradients, then the previous layer's delta unless it is the first) into backward_,
// which the caller runs in reverse layer order.
void OpenCLBatchEngine::plan_layer(size_t k, int count) {
    const LayerSpec& l = net_.layers[k];
    const LayerData& d = layers_[k];
    const cl::Buffer &X = acts_[k], &Y = acts_[k + 1], &D = deltas_[k];
    const bool first = k == 0;
    const cl::Buffer& Dp = first ? D : deltas_[k - 1];  // not used by the first layer
    const int in_act = first ? 0 : static_cast<int>(net_.layers[k - 1].activation);
    const int act = static_cast<int>(l.activation);
    const int IC = l.in.c, IH = l.in.h, IW = l.in.w, OC = l.out.c, OH = l.out.h, OW = l.out.w;
    const int K = l.kernel, S = l.stride, P = l.pad;
    const int w_off = as_int(layout_.weights(k).device), b_off = as_int(layout_.bias(k).device);
    const size_t n = static_cast<size_t>(count), wg = wg_;
    const cl::NDRange group(wg, 1);
    std::vector<Launch> back;
    size_t grads_done = 0;  // back's launches up to the last that writes the layer's gradients
    switch (l.kind) {
        case LayerKind::Conv: {
            if (const auto algo = conv_algo_for(k, count)) {
                grads_done = plan_conv(k, count, *algo, back);
                break;
            }
            const int weights = as_int(l.weight_count);
            // Output rows per gradient share: whole samples, unless that leaves the device short of items.
            const size_t per_share = static_cast<size_t>(weights + OC);
            const size_t want_chunks = (kPartialItems * rt_->compute_units() + n * per_share - 1) / (n * per_share);
            const size_t chunks_wanted = std::clamp<size_t>(want_chunks, 1, static_cast<size_t>(OH));
            const int rows = as_int((static_cast<size_t>(OH) + chunks_wanted - 1) / chunks_wanted);
            const size_t shares = n * static_cast<size_t>((OH + rows - 1) / rows);
            if (conv_fk_ && fast_conv(l, conv_fk_)) {
                // 4 outputs of a row per item, for `maps` output maps (fewer for small batches,
                // so that there are enough items); the gradient shares by row groups of G.
                const size_t quads = static_cast<size_t>(OH) * static_cast<size_t>((OW + 3) / 4);
                const size_t groups = std::clamp<size_t>((rt_->compute_units() * 1024 + n * quads - 1) / (n * quads), 1,
                                                         static_cast<size_t>(OC));
                const int maps = as_int((static_cast<size_t>(OC) + groups - 1) / groups);
                const size_t fg = std::min<size_t>(256, round_up(quads, 32));
                // The first layer reads the data set's rows itself (forward() sets in, rows and first).
                forward_.push_back({kernel(program_, "conv_forward_fast", X, cl::Buffer(), 0, Y, d.weights, d.bias, IH,
                                           IW, OC, OH, OW, P, act, maps),
                                    cl::NDRange(round_up(quads, fg), n * static_cast<size_t>((OC + maps - 1) / maps)),
                                    cl::NDRange(fg, 1), l.name + " conv_forward_fast"});
                const int G = std::max(1, std::min(256 / OC, rows));
                back.push_back({kernel(program_, "conv_partials_fast", X, cl::Buffer(), 0, D, partials_, IH, IW, OC,
                                       OH, OW, P, rows),
                                cl::NDRange(static_cast<size_t>(OC * G), shares), cl::NDRange(static_cast<size_t>(OC * G), 1),
                                l.name + " conv_partials_fast"});
                if (first) input_readers_ = {forward_.back().kernel, back.back().kernel};
            } else {
                forward_.push_back({kernel(program_, "conv_forward", X, Y, d.weights, d.bias, d.conn_begin, d.conn_in,
                                           IC, IH, IW, OC, OH, OW, K, S, P, act),
                                    rows_of(OH * OW, n * OC, wg), group, l.name + " conv_forward"});
                back.push_back({kernel(program_, "conv_partials", X, D, partials_, d.conn_out, d.conn_in, weights, IC,
                                       IH, IW, OC, OH, OW, K, S, P, rows),
                                rows_of(weights + OC, shares, wg), group, l.name + " conv_partials"});
            }
            back.push_back(sum_rows(partials_, as_int(shares), weights + OC, weights, w_off, b_off, l.name));
            grads_done = back.size();
            if (!first)
                back.push_back({kernel(program_, "conv_backward_data", X, D, Dp, d.weights, d.in_begin, d.in_conn, d.conn_out, IC,
                                       IH, IW, OC, OH, OW, K, S, P, in_act),
                                rows_of(IH * IW, n * IC, wg), group, l.name + " conv_backward_data"});
            break;
        }
        case LayerKind::Subsample:
            forward_.push_back(
                {kernel(program_, "subsample_forward", X, Y, d.weights, d.bias, OC, IH, IW, OH, OW, K, act),
                 rows_of(OH * OW, n * OC, wg), group, l.name + " subsample_forward"});
            back.push_back({kernel(program_, "subsample_partials", X, D, partials_, OC, IH, IW, OH, OW, K),
                            rows_of(2 * OC, n, wg), group, l.name + " subsample_partials"});
            back.push_back({kernel(program_, "sum_rows", partials_, count, 2 * OC, OC, grads_, w_off, b_off),
                            cl::NDRange(round_up(2 * OC, wg)), cl::NDRange(wg), l.name + " sum_rows"});
            grads_done = back.size();
            if (!first)
                back.push_back({kernel(program_, "subsample_backward_data", X, D, Dp, d.weights, OC, IH, IW, OH, OW, K, in_act),
                                rows_of(IH * IW, n * IC, wg), group, l.name + " subsample_backward_data"});
            break;
        case LayerKind::MaxPool:
        case LayerKind::AvgPool: {
            const int is_max = l.kind == LayerKind::MaxPool;
            forward_.push_back({kernel(program_, "pool_forward", X, Y, IH, IW, OH, OW, K, S, is_max, act),
                                rows_of(OH * OW, n * OC, wg), group, l.name + " pool_forward"});
            if (first) break;
            if (S == K && IH == OH * K && IW == OW * K)  // the windows tile the input: one item per window
                back.push_back({kernel(program_, "pool_backward_tiled", X, D, Dp, IH, IW, OH, OW, K, is_max, in_act),
                                rows_of(OH * OW, n * IC, wg), group, l.name + " pool_backward_tiled"});
            else
                back.push_back({kernel(program_, "pool_backward_data", X, D, Dp, IH, IW, OH, OW, K, S, is_max, in_act),
                                rows_of(IH * IW, n * IC, wg), group, l.name + " pool_backward_data"});
            break;
        }
        case LayerKind::FullyConnected: {
            const int I = l.in.size(), O = l.out.size();
            if (head_ && k + 1 == net_.layers.size()) {  // the forward is head_forward (plan())
                back.push_back({kernel(program_, "head_backward", X, D, d.weights, grads_, w_off, b_off, count, I, O,
                                       Dp, in_act, static_cast<int>(!first)),
                                cl::NDRange(round_up(static_cast<size_t>(std::max(I, O)), 64),
                                            static_cast<size_t>(O + count)),
                                cl::NDRange(64, 1), l.name + " head_backward"});
                grads_done = back.size();
                break;
            }
            if (d.constant_fc)
                forward_.push_back({kernel(program_, "fc_forward_small", X, Y, d.weights, d.bias, count, I, O, act),
                                    rows_of(n, static_cast<size_t>(O), wg), group, l.name + " fc_forward_small"});
            else  // Y [count][O] = X [count][I] W^T, W [O][I]
                gemm(forward_, l.name + " gemm forward", count, O, I, X, 0, I, 1, params_, w_off, 1, I, Y, 0, O, 1,
                     kBiasAct, act, params_, b_off);
            // dW [O][I] = D^T [O][count] X [count][I]: the sum over the samples in order (deferred:
            // run only if gradients() asks for it; the update computes it itself).
            gemm(static_cast<int>(k) == fused_ ? deferred_ : back, l.name + " gemm weights", O, I, count, D, 0, 1, O, X, 0, I, 1, grads_, w_off, I, 1, kStore, 0,
                 grads_, 0);
            // fc_sgd_data computes the biases' gradient and the delta below itself; data_ has them as
            // plain launches, for when gradients() asks.
            const bool in_data = fused_data_ && static_cast<int>(k) == fused_;
            (in_data ? data_ : back).push_back(sum_rows(D, count, O, 0, 0, b_off, l.name));
            grads_done = back.size();  // unless the layer is fused_ (its weight gradient deferred)
            if (!first) {
                if (in_data)
                    gemm(data_, l.name + " gemm data", count, I, O, D, 0, O, 1, params_, w_off, I, 1, Dp, 0, I, 1,
                         kDelta, in_act, X, 0);
                else if (d.constant_fc)
                    back.push_back({kernel(program_, "fc_backward_data_small", X, D, Dp, d.weights, count, I, O, in_act),
                                    rows_of(n, static_cast<size_t>(I), wg), group, l.name + " fc_backward_data_small"});
                else  // Dp [count][I] = D [count][O] W [O][I], times the activation's derivative
                    gemm(back, l.name + " gemm data", count, I, O, D, 0, O, 1, params_, w_off, I, 1, Dp, 0, I, 1,
                         kDelta, in_act, X, 0);
            }
            break;
        }
        default:  // a kind with kernels of its own (cl_kernels/layers/)
            forward_.push_back(generic_forward(program_, net_, k, X, Y, count, wg, rule_.seed));
            draw_forward_.push_back(forward_.back().kernel);
            if (!first) {
                back.push_back(generic_backward(program_, net_, k, X, D, Dp, count, wg, rule_.seed));
                draw_backward_.push_back(back.back().kernel);
            }
            break;
    }
    if (static_cast<int>(k) == fused_) below_count_ = backward_.size();
    backward_.insert(backward_.begin(), back.begin(), back.end());
    for (auto& mark : grad_marks_) mark.first += back.size();  // where in backward_ the gradients are final
    if (l.weight_count + l.bias_count > 0) grad_marks_.insert(grad_marks_.begin(), {grads_done, k});
}

std::optional<conv::ConvAlgo> OpenCLBatchEngine::conv_algo_for(size_t k, int count) const {
    const LayerSpec& l = net_.layers[k];
    if (l.connections() != l.in.c * l.out.c) return std::nullopt;  // a connection table: the kernels above
    if (conv_algo_ == conv::ConvAlgo::Own) return std::nullopt;
    if (conv_algo_ != conv::ConvAlgo::Auto) return conv_algo_;
    const conv::ConvShape s{count, l.in.c, l.in.h, l.in.w, l.out.c, l.kernel, l.stride, l.pad};
    const auto it = tuned_conv_.find(s.describe());
    // Untuned or tuned own: the kernels above.
    if (it == tuned_conv_.end() || it->second == conv::ConvAlgo::Own)
        return std::nullopt;
    return it->second;
}

// Convolution k through host/conv/'s OpenCLConv, its launches recorded into the plan: the forward
// (bias and activation fused), the weight and bias gradients into grads_, and the previous layer's
// delta (the input gradient times that layer's activation derivative).
size_t OpenCLBatchEngine::plan_conv(size_t k, int count, conv::ConvAlgo algo, std::vector<Launch>& back) {
    const LayerSpec& l = net_.layers[k];
    const LayerData& d = layers_[k];
    if (!conv_) conv_ = std::make_unique<conv::OpenCLConv>(rt_);
    const conv::ConvShape s{count, l.in.c, l.in.h, l.in.w, l.out.c, l.kernel, l.stride, l.pad};
    std::vector<conv::OpenCLConv::Launch> fwd, bwd;
    struct Stop {  // enqueue again however the recording ends
        conv::OpenCLConv& c;
        ~Stop() { c.record_launches(nullptr); }
    } stop{*conv_};
    conv_->record_launches(&fwd);
    conv_->forward(algo, s, acts_[k], d.weights, d.bias, acts_[k + 1], l.activation);
    conv_->record_launches(&bwd);
    conv_->backward_weights(algo, s, acts_[k], deltas_[k], d.grad_weights, d.grad_bias);
    const size_t grads_done = back.size() + bwd.size();
    if (k > 0)
        conv_->backward_data(algo, s, deltas_[k], d.weights, deltas_[k - 1], net_.layers[k - 1].activation, acts_[k]);
    const std::string prefix = l.name + " " + conv::algo_name(algo) + " ";
    for (auto& x : fwd) forward_.push_back({x.kernel, x.global, x.local, prefix + x.name, x.call});
    for (auto& x : bwd) back.push_back({x.kernel, x.global, x.local, prefix + x.name, x.call});
    return grads_done;
}

// Buffers (grown to `count` samples) and every launch of a step for batches of `count`. The
// data set, its rows, first and the loss slot are set by forward().
void OpenCLBatchEngine::plan(int count) {
    const size_t L = net_.layers.size();
    if (count > capacity_) {
        const size_t n = static_cast<size_t>(count);
        const float nan = std::numeric_limits<float>::quiet_NaN();  // what a kernel fails to write shows up
        acts_.assign(L + 1, cl::Buffer());
        deltas_.assign(L, cl::Buffer());
        size_t partial = 1;
        for (size_t k = 0; k <= L; ++k) {
            const size_t size = n * static_cast<size_t>(k ? net_.layers[k - 1].out.size() : net_.input.size());
            acts_[k] = rt_->buffer(size * sizeof(float), CL_MEM_READ_WRITE, "a layer's activations");
            rt_->fill(acts_[k], nan, size * sizeof(float));
            if (k == 0) continue;
            deltas_[k - 1] = rt_->buffer(size * sizeof(float), CL_MEM_READ_WRITE, "a layer's deltas");
            rt_->fill(deltas_[k - 1], nan, size * sizeof(float));
            const LayerSpec& l = net_.layers[k - 1];
            if (l.kind == LayerKind::Conv)  // up to one share per output row (plan_layer)
                partial = std::max(partial, static_cast<size_t>(l.out.h) * (l.weight_count + l.bias_count));
            if (l.kind == LayerKind::Subsample) partial = std::max(partial, l.weight_count + l.bias_count);
        }
        partials_ = rt_->buffer(n * partial * sizeof(float), CL_MEM_READ_WRITE, "the gradient shares");
        capacity_ = count;
    }
    forward_.clear();
    backward_.clear();
    grad_marks_.clear();
    deferred_.clear();
    fused_update_.clear();
    data_.clear();
    below_.clear();
    data_reduce_.clear();
    below_update_.clear();
    scratch_.clear();
    const size_t n = static_cast<size_t>(count);
    fused_ = -1;
    for (size_t k = 0; k < L && count <= kFusedBatch && !rule_.adam(); ++k) {  // fc_sgd*: SGD only
        const LayerSpec& l = net_.layers[k];
        if (l.kind == LayerKind::FullyConnected && l.weight_count >= kFusedWeights && l.in.size() % 4 == 0 &&
            l.out.size() % 4 == 0 && layout_.weights(k).device % 4 == 0 &&
            (fused_ < 0 || l.weight_count > net_.layers[static_cast<size_t>(fused_)].weight_count))
            fused_ = static_cast<int>(k);
    }
    fused_data_ = fused_ > 0 && count <= kFusedDataBatch;
    const LayerSpec& last = net_.layers.back();
    head_ = memory_ == MemoryVariant::Local && count <= kFusedBatch && last.kind == LayerKind::FullyConnected &&
            last.out.size() <= kHeadOutputs && fused_ != static_cast<int>(L - 1);
    input_readers_.clear();
    draw_forward_.clear();
    draw_backward_.clear();
    for (size_t k = 0; k < L; ++k) plan_layer(k, count);
    if (input_readers_.empty()) {  // the first layer reads acts_[0]: gather_inputs fills it
        forward_.insert(forward_.begin(), {kernel(program_, "gather_inputs", cl::Buffer(), cl::Buffer(), 0,
                                                  net_.input.size(), acts_[0]),
                                           rows_of(static_cast<size_t>(net_.input.size()), n, wg_),
                                           cl::NDRange(wg_, 1), "gather_inputs"});
        input_readers_.push_back(forward_.front().kernel);
    }
    if (fused_data_) {  // the layers under the fused one run after its update (update())
        below_.assign(backward_.end() - static_cast<std::ptrdiff_t>(below_count_), backward_.end());
        backward_.resize(backward_.size() - below_count_);
    }
    // The loss last (forward() sets its labels, rows, first and slot: arguments 1-3 and 12).
    const int squared = net_.loss == Loss::SquaredError, act = static_cast<int>(last.activation);
    const float scale = 1.0f / static_cast<float>(count);
    if (head_)
        forward_.push_back({kernel(program_, "head_forward", acts_[L], cl::Buffer(), cl::Buffer(), 0, count,
                                   net_.classes, squared, act, scale, deltas_[L - 1], losses_, hits_, 0, acts_[L - 1],
                                   layers_[L - 1].weights, layers_[L - 1].bias, last.in.size()),
                            cl::NDRange(256 * n), cl::NDRange(256), last.name + " head_forward + loss"});
    else
        forward_.push_back({kernel(program_, "batch_loss", acts_[L], cl::Buffer(), cl::Buffer(), 0, count, net_.classes,
                                   squared, act, scale, deltas_[L - 1], losses_, hits_, 0),
                            cl::NDRange(round_up(n, wg_)), cl::NDRange(wg_), "batch_loss"});
    if (fused_ >= 0) {
        const size_t k = static_cast<size_t>(fused_), size = layout_.size();
        const LayerSpec& l = net_.layers[k];
        const DeviceLayout::Block w = layout_.weights(k), b = layout_.bias(k);
        const int I = l.in.size(), O = l.out.size();
        if (fused_data_) {
            const size_t chunks = (static_cast<size_t>(O) + kFusedDataRows - 1) / kFusedDataRows;
            scratch_.push_back(rt_->buffer(chunks * n * static_cast<size_t>(I) * sizeof(float)));
            fused_update_ = {{kernel(program_, "fc_sgd_data", params_, velocity_, deltas_[k], acts_[k], 0.0f, 0.0f,
                                     0.0f, as_int(w.device), as_int(b.device), count, I, O, scratch_.back()),
                              cl::NDRange((static_cast<size_t>(I) + 63) / 64 * 256, chunks), cl::NDRange(256, 1),
                              l.name + " fc_sgd_data"}};
            const int in_act = static_cast<int>(net_.layers[k - 1].activation);
            data_reduce_ = {{kernel(program_, "gemm_reduce", scratch_.back(), as_int(chunks), count, I, deltas_[k - 1],
                                    0, I, 1, kDelta, in_act, acts_[k], 0),
                             cl::NDRange(round_up(n * static_cast<size_t>(I), wg_)), cl::NDRange(wg_),
                             l.name + " fc_sgd_data (reduce)"}};
            // Everything but the layer's weights and biases (and the padding between them).
            const size_t skip = b.device + b.count - w.device;
            below_update_ = {{kernel(program_, "batch_sgd", params_, velocity_, grads_, as_int(size), 0.0f, 0.0f, 0.0f,
                                     as_int(w.device), as_int(skip)),
                              cl::NDRange(round_up(size - skip, wg_)), cl::NDRange(wg_), "batch_sgd"}};
        } else {
            // fc_sgd's rows past the weights' do batch_sgd's work on the other parameters, in the same launch.
            const size_t width = round_up(static_cast<size_t>(I / 4), wg_), rest = size - w.count;
            const size_t rest_rows = std::max<size_t>(1, (rest + width - 1) / width);
            fused_update_ = {{kernel(program_, "fc_sgd", params_, velocity_, deltas_[k], acts_[k], 0.0f, 0.0f, 0.0f,
                                     as_int(w.device), count, I, O, grads_, as_int(size)),
                              cl::NDRange(width, static_cast<size_t>((O + 7) / 8) + rest_rows), cl::NDRange(wg_, 1),
                              l.name + " fc_sgd (+ batch_sgd)"}};
        }
    }
    planned_ = count;
}

void OpenCLBatchEngine::forward(Split split, int first, int count) {
    refuse_in_inference("forward()");
    const bool train = split == Split::Train;
    const SplitData& data = batch_data(split, first, count);
    cl_checked([&] {
        complete_backward();  // before its buffers are overwritten
        if (count != planned_) plan(count);
        if (cursor_ + count > slots_) collect_counters();
        timeline_.start_step(train && count <= kFusedBatch);
        const cl::Buffer& rows = train ? order_ : identity_;
        for (cl::Kernel& reader : input_readers_) {
            reader.setArg(0, data.inputs);
            reader.setArg(1, rows);
            reader.setArg(2, first);
        }
        if (train) ++draw_step_;
        for (cl::Kernel& f : draw_forward_) set_draw(f, draw_step_, static_cast<uint32_t>(first), train);
        if (train)
            for (cl::Kernel& b : draw_backward_) set_draw_backward(b, draw_step_, static_cast<uint32_t>(first));
        cl::Kernel& loss = forward_.back().kernel;
        loss.setArg(1, data.labels);
        loss.setArg(2, rows);
        loss.setArg(3, first);
        loss.setArg(12, cursor_);
        timeline_.run(Phase::Forward, forward_);
        cursor_ += count;
        count_ = count;
        last_was_train_ = train;
    });
}

void OpenCLBatchEngine::backward() {
    refuse_in_inference("backward()");
    if (!last_was_train_) throw Error("backward() needs a training forward() first");
    cl_checked([&] {
        pending_ = !deferred_.empty();
        if (!listening()) return timeline_.run(Phase::Backward, backward_);
        if (pending_) {  // the fused plan: its gradients are complete once complete_backward() has run
            timeline_.run(Phase::Backward, backward_);
            complete_backward();
            for (const auto& mark : grad_marks_) gradients_final(mark.second);
        } else {  // in runs that each end with a layer's gradients, read while the next run goes on
            std::vector<const Launch*> run;
            size_t next = 0;
            auto run_to = [&](size_t end) {
                run.clear();
                for (; next < end; ++next) run.push_back(&backward_[next]);
                timeline_.run(Phase::Backward, run);
            };
            for (const auto& [done, layer] : grad_marks_) {
                run_to(done);
                gradients_final(layer);
            }
            run_to(backward_.size());
        }
        announce_gradients();
    });
}

// What backward() left to the fused update, as plain launches: the fused layer's delta below and
// bias gradient, the layers below it (fused_data_), and its weight gradient.
void OpenCLBatchEngine::complete_backward() {
    if (!pending_) return;
    // Timed whenever it runs (when something asks for the gradients), not as a sample of the steps.
    timeline_.run(Phase::Backward, data_, true);
    timeline_.run(Phase::Backward, below_, true);
    timeline_.run(Phase::Backward, deferred_, true);
    pending_ = false;
}

void OpenCLBatchEngine::update(float lr, float momentum, float weight_decay) {
    refuse_in_inference("update()");
    cl_checked([&] {
        auto rated = [&](std::vector<Launch>& launches) -> std::vector<Launch>& {
            for (Launch& l : launches) {  // batch_sgd, fc_sgd and fc_sgd_data take the rates as arguments 4-6
                l.kernel.setArg(4, lr);
                l.kernel.setArg(5, momentum);
                l.kernel.setArg(6, weight_decay);
            }
            return launches;
        };
        if (pending_) {
            timeline_.run(Phase::Update, rated(fused_update_));
            timeline_.run(Phase::Backward, data_reduce_);  // fc_sgd_data's delta below, then the layers there
            timeline_.run(Phase::Backward, below_);
            timeline_.run(Phase::Update, rated(below_update_));
        } else if (rule_.adam()) {
            set_adam_args(update_[0].kernel, lr, weight_decay);
            timeline_.run(Phase::Update, update_);
        } else {
            timeline_.run(Phase::Update, rated(update_));
        }
        pending_ = false;
        rt_->flush();  // hand the step to the device now, without waiting for it
    });
    if (inference_) inference_->params_changed();
}

std::vector<float> OpenCLBatchEngine::layer_output(size_t layer) {
    if (count_ == 0) throw Error("layer_output() before forward()");
    return cl_checked([&] {
        std::vector<float> v(static_cast<size_t>(count_) * static_cast<size_t>(net_.layers.at(layer).out.size()));
        timeline_.read(acts_[layer + 1], v.data(), v.size() * sizeof(float));
        return v;
    });
}

}  // namespace lenet5
