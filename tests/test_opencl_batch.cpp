// The batch-level OpenCL engine (gpu, gpu-constant, gpu-local) against the cpu reference on the
// default OpenCL device (PoCL in CI): every layer kind, activation and loss, and the choice of
// engine per network.
#ifdef LENET5_HAVE_OPENCL
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "engine/engine_factory.h"
#include "common/error.h"
#include "model/model_file.h"
#include "opencl/opencl_batch_engine.h"
#include "test_support.h"
#include "train/worker_engine.h"

using namespace lenet5;

namespace {

MemoryVariant memory_of(const std::string& variant) {
    return variant == "gpu" ? MemoryVariant::Global
           : variant == "gpu-constant" ? MemoryVariant::Constant
                                       : MemoryVariant::Local;
}

std::unique_ptr<Engine> batch_engine(const Network& net, const std::string& variant) {
    return std::make_unique<OpenCLBatchEngine>(net, memory_of(variant), std::make_shared<DeviceRuntime>(select_opencl_device(-1)));
}

// The seeds' CNN with fewer maps and units: the same layer kinds at a tenth of the work.
Network small_cnn() {
    return NetworkBuilder("small-cnn", {1, 28, 28})
        .conv("C1", 4, 5, Activation::ReLU, {}, 1, 2)
        .pool("P1", LayerKind::MaxPool, 2)
        .fully_connected("F1", 70, Activation::ReLU)
        .fully_connected("output", 10, Activation::None)
        .build();
}

// Everything the CNN and LeNet-5 leave out: strides, padding in a layer with a delta below it,
// a connection table there, overlapping average and max windows, sigmoid and ReLU after a
// subsampling, and the squared error on sigmoid outputs.
Network odd_network() {
    return NetworkBuilder("odd", {1, 28, 28})
        .conv("C1", 4, 3, Activation::Tanh)
        .conv("C2", 6, 5, Activation::Sigmoid,
              {{1, 1, 0, 0}, {0, 1, 1, 0}, {0, 0, 1, 1}, {1, 0, 0, 1}, {1, 1, 1, 1}, {0, 1, 0, 1}}, 2, 2)
        .pool("A3", LayerKind::AvgPool, 3, 2)
        .subsample("S4", 2, Activation::ReLU)
        .pool("M5", LayerKind::MaxPool, 2, 1)
        .fully_connected("F6", 10, Activation::Sigmoid)
        .loss(Loss::SquaredError)
        .build();
}

// The fast GEMM's tile edges (gpu-local): 129 units cross the 128-wide tiles by one, 133 samples
// the 128-row ones, and the input gradient's depth (129) is no multiple of the 16-deep rounds
// nor of float4 (scalar loads); 10 outputs take the swapped small-tile GEMM at 70 and 133. At
// batches up to 16 F2's input gradient (257 deep, 129 wide) takes gemm_skinny_n's scalar loads and a
// short last slice, and the output's forward gemm_skinny_k's.
Network wide_mlp() {
    return NetworkBuilder("wide-mlp", {1, 28, 28})
        .fully_connected("F1", 129, Activation::ReLU)
        .fully_connected("F2", 257, Activation::Tanh)
        .fully_connected("output", 10, Activation::None)
        .build();
}

// Tiled average pooling after the fast convolution (6 maps: gradient groups of 42 items), a
// sigmoid below it.
Network avg_cnn() {
    return NetworkBuilder("avg-cnn", {1, 28, 28})
        .conv("C1", 6, 5, Activation::Sigmoid, {}, 1, 2)
        .pool("A2", LayerKind::AvgPool, 2)
        .fully_connected("F3", 33, Activation::Tanh)
        .fully_connected("output", 10, Activation::None)
        .build();
}

class BatchVariant : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(BatchVariant, MatchesCpuOnTheCnn) {
    const Network net = load_model("cnn").net;
    auto engine = batch_engine(net, GetParam());
    EXPECT_EQ(engine->variant(), GetParam());
    test::expect_matches_cpu(*engine, net, 3);
}

// 70 samples cross the GEMM's 64-row tiles; the 2 after them use buffers planned for more.
TEST_P(BatchVariant, MatchesCpuOnASmallCnnAtBatchSizes1To70) {
    const Network net = small_cnn();
    auto engine = batch_engine(net, GetParam());
    for (int batch : {1, 70, 2}) test::expect_matches_cpu(*engine, net, batch);
}

TEST_P(BatchVariant, MatchesCpuOnTheCnnAtBatches16And70) {
    const Network net = load_model("cnn").net;
    auto engine = batch_engine(net, GetParam());
    for (int batch : {16, 70}) test::expect_matches_cpu(*engine, net, batch);
}

TEST_P(BatchVariant, MatchesCpuAcrossTheGemmTileEdges) {
    const Network net = wide_mlp();
    auto engine = batch_engine(net, GetParam());
    for (int batch : {1, 16, 70, 133}) test::expect_matches_cpu(*engine, net, batch);
}

TEST_P(BatchVariant, MatchesCpuWithAveragePoolingAfterTheFastConvolution) {
    const Network net = avg_cnn();
    auto engine = batch_engine(net, GetParam());
    for (int batch : {1, 16, 70}) test::expect_matches_cpu(*engine, net, batch);
}

// (On a device with 64 KB of __constant memory, NVIDIA's, gpu-constant refuses LeNet-5's C5.)
TEST_P(BatchVariant, MatchesCpuOnLeNet5AndTheMlp) {
    for (const char* model : {"lenet5", "mlp"}) {
        const Network net = load_model(model).net;
        std::unique_ptr<Engine> engine;
        try {
            engine = batch_engine(net, GetParam());
        } catch (const Error& e) {
            if (GetParam() == "gpu-constant" && std::string(e.what()).find("__constant memory") != std::string::npos)
                continue;
            throw;
        }
        test::expect_matches_cpu(*engine, net, 5);
    }
}

TEST_P(BatchVariant, MatchesCpuWithStridesPaddingPoolingSigmoidAndSquaredError) {
    const Network net = odd_network();
    auto engine = batch_engine(net, GetParam());
    test::expect_matches_cpu(*engine, net, 3);
}

namespace {

// The batch's gradients are summed in a fixed order: the same step twice gives the same bits.
void expect_same_bits_twice(const Network& net, const std::string& variant, const Dataset& data, int batch) {
    test::StepRecord runs[2];
    for (auto& r : runs) {
        auto engine = batch_engine(net, variant);
        r = test::record_step(*engine, net, data, batch, 3);
    }
    EXPECT_EQ(runs[0].gradients, runs[1].gradients);
    EXPECT_EQ(runs[0].params_after, runs[1].params_after);
    EXPECT_EQ(runs[0].loss, runs[1].loss);
}

}  // namespace

TEST_P(BatchVariant, SameSeedSameBits) { expect_same_bits_twice(small_cnn(), GetParam(), random_dataset(20, 5), 9); }

// The same for the CNN at a batch that splits the large GEMMs over k and sums many shares.
TEST_P(BatchVariant, SameSeedSameBitsOnTheCnn) {
    expect_same_bits_twice(load_model("cnn").net, GetParam(), random_dataset(270, 6), 130);
}

// At batches up to 16 the update of the largest fully connected layer also computes the delta
// below it (fc_sgd_data), and the layers below run after it; gradients() between backward and
// update computes the same with GEMMs instead. F1 here: 784 inputs (a last column block of 16)
// and 132 outputs (row chunks of 128 and 4). Three steps each way, the second engine asking for
// the gradients every time, must give the same parameters (the deltas' sums in another order).
TEST_P(BatchVariant, FusedUpdateWithTheDeltaBelowMatchesTheUnfusedSteps) {
    const Network net = NetworkBuilder("fused", {1, 28, 28})
                            .conv("C1", 4, 5, Activation::ReLU, {}, 1, 2)
                            .pool("P1", LayerKind::MaxPool, 2)
                            .fully_connected("F1", 132, Activation::Tanh)
                            .fully_connected("output", 10, Activation::None)
                            .build();
    const Dataset data = random_dataset(48, 11);
    for (int batch : {16, 5}) {
        std::vector<float> params[2];
        for (int unfused = 0; unfused < 2; ++unfused) {
            auto engine = batch_engine(net, GetParam());
            engine->upload(Split::Train, data);
            engine->set_params(init_params(net, 4));
            Rng rng(5);
            engine->set_order(shuffled_order(data.count, rng));
            for (int step = 0; step < 3; ++step) {
                engine->forward(Split::Train, step * batch, batch);
                engine->backward();
                if (unfused) engine->gradients();
                engine->update(0.05f, 0.9f, 5e-4f);
            }
            params[unfused] = engine->params();
        }
        EXPECT_LT(test::relative_error(params[0], params[1]), 1e-6) << "batch " << batch;
    }
}

// In a gradient exchange the engine reads each layer's gradients as soon as its backward has
// produced them, on a side queue while the layers below go on. The sum is still each engine's own
// gradients weighed and added in worker order, bit for bit: on the unfused plan (48 samples a
// worker), the fused one (16: the update computes a weight gradient, so backward completes it
// first), through the engine's own convolution kernels and through im2col. A read before its
// layer's launches have run would find the NaNs the gradients start as.
TEST_P(BatchVariant, AnExchangeReadsEachLayerAsItsBackwardEndsAndSumsExactly) {
    const Network nets[] = {NetworkBuilder("fused", {1, 28, 28})
                                .conv("C1", 4, 5, Activation::ReLU, {}, 1, 2)
                                .pool("P1", LayerKind::MaxPool, 2)
                                .fully_connected("F1", 132, Activation::Tanh)
                                .fully_connected("output", 10, Activation::None)
                                .build(),
                            odd_network()};
    const Dataset data = random_dataset(96, 12);
    std::vector<int32_t> order(static_cast<size_t>(data.count));
    std::iota(order.begin(), order.end(), 0);
    for (const Network& net : nets)
        for (conv::ConvAlgo algo : {conv::ConvAlgo::Own, conv::ConvAlgo::Im2col}) {
            auto engine = [&]() -> std::unique_ptr<Engine> {
                return std::make_unique<OpenCLBatchEngine>(
                    net, memory_of(GetParam()), std::make_shared<DeviceRuntime>(select_opencl_device(-1)), algo);
            };
            auto start = [&](Engine& e) {
                e.upload(Split::Train, data);
                e.set_params(init_params(net, 3));
                e.set_order(order);
            };
            auto alone = engine();
            start(*alone);
            for (int batch : {32, 96}) {
                SCOPED_TRACE(net.name + ", " + conv::algo_name(algo) + ", batch " + std::to_string(batch));
                std::vector<float> sum(net.param_count, 0.0f);
                for (int first : {0, batch / 2}) {
                    alone->forward(Split::Train, first, batch / 2);
                    alone->backward();
                    const std::vector<float> g = alone->gradients();
                    for (size_t k = 0; k < sum.size(); ++k) sum[k] += 0.5f * g[k];
                }
                std::vector<std::unique_ptr<Engine>> two;
                two.push_back(engine());
                two.push_back(engine());
                WorkerEngine workers(net, std::move(two), {1, 1}, batch);
                start(workers);
                workers.forward(Split::Train, 0, batch);
                workers.backward();
                EXPECT_EQ(workers.gradients(), sum);
            }
        }
}

INSTANTIATE_TEST_SUITE_P(Variants, BatchVariant, ::testing::Values("gpu", "gpu-constant", "gpu-local"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                             std::string name = param.param;
                             std::replace(name.begin(), name.end(), '-', '_');
                             return name;
                         });

// The CNN's activations and weights do not fit the per-sample engine: the factory picks the
// batch-level one and says so; LeNet-5 keeps the per-sample engine.
TEST(OpenCLPath, TheCnnTakesTheBatchLevelEngineAndLeNet5ThePerSampleOne) {
    EngineRequest request;
    request.variant = "gpu-local";
    EXPECT_NE(make_engine(load_model("cnn").net, request)->device().find("(batch-level)"), std::string::npos);
    EXPECT_EQ(make_engine(lenet5_network(), request)->device().find("(batch-level)"), std::string::npos);
}

#endif  // LENET5_HAVE_OPENCL
