// Engine::infer of the batch-level OpenCL engine (gpu, gpu-constant, gpu-local; batch_inference.h)
// against the cpu reference on the default OpenCL device (PoCL in CI): the model files, a VGG-like
// network (Winograd, a strided convolution, both poolings), every convolution algorithm, parameters
// changed between runs, the per-layer times, and the training calls an inference engine refuses.
#ifdef LENET5_HAVE_OPENCL
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/rng.h"
#include "conv/conv_shape.h"
#include "engine/engine_factory.h"
#include "engine/preprocess.h"
#include "host_ops.h"
#include "opencl/opencl_batch_engine.h"
#include "test_support.h"

using namespace lenet5;

namespace {

constexpr double kTolerance = 1e-5;  // per sample, relative (L2)

// The batch sizes of one engine's runs, in this order: growing (2 -> 5 -> 19) and smaller than
// planned (1 after 5, 3 after 19); 19 is two of infer_dense's launches (16 + 3).
const std::vector<int> kCounts{2, 5, 1, 19, 3};

std::unique_ptr<Engine> inference_engine(const Network& net, const std::string& variant,
                                         conv::ConvAlgo algo = conv::ConvAlgo::Auto) {
    EngineRequest r;
    r.variant = variant;
    r.inference = true;
    r.conv_algo = algo;
    return make_engine(net, r);
}

// init_params with every parameter moved by up to +-0.05, so that the biases are not zero.
std::vector<float> test_params(const Network& net, uint64_t seed) {
    std::vector<float> p = init_params(net, seed);
    Rng rng(seed + 100);
    for (float& v : p) v += rng.uniform(-0.05f, 0.05f);
    return p;
}

// The images of `data` as the network's inputs (image_to_input), count x input floats.
std::vector<float> inputs_of(const Network& net, const Dataset& data) {
    const size_t size = static_cast<size_t>(net.input.size());
    std::vector<float> in(static_cast<size_t>(data.count) * size);
    for (int i = 0; i < data.count; ++i)
        image_to_input(data.image(i), data.rows, data.cols, net.input, net.scaling, in.data() + static_cast<size_t>(i) * size);
    return in;
}

// The cpu reference's outputs for `count` inputs: its per-sample layer operations (what the cpu
// engine's forward runs), for networks of any input maps.
std::vector<float> cpu_outputs(const Network& net, const std::vector<float>& params, const float* inputs, int count) {
    const HostOps& ops = cpu_ops();
    const size_t O = static_cast<size_t>(net.layers.back().out.size());
    std::vector<float> out(static_cast<size_t>(count) * O);
    for (int s = 0; s < count; ++s) {
        std::vector<float> x(inputs + static_cast<size_t>(s) * net.input.size(),
                             inputs + static_cast<size_t>(s + 1) * net.input.size());
        for (const LayerSpec& l : net.layers) {
            std::vector<float> y(static_cast<size_t>(l.out.size()));
            ops.forward(l, params.data(), x.data(), y.data());
            x = std::move(y);
        }
        std::copy(x.begin(), x.end(), out.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(s) * O));
    }
    return out;
}

// Expects each sample's outputs within kTolerance of the reference's.
void expect_close(const Network& net, const std::vector<float>& got, const std::vector<float>& ref, int count,
                  const std::string& what) {
    ASSERT_EQ(got.size(), ref.size()) << what;
    const size_t O = static_cast<size_t>(net.layers.back().out.size());
    for (int s = 0; s < count; ++s) {
        const auto at = [&](const std::vector<float>& v) {
            const auto b = v.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(s) * O);
            return std::vector<float>(b, b + static_cast<std::ptrdiff_t>(O));
        };
        EXPECT_LT(test::relative_error(at(got), at(ref)), kTolerance) << what << ", sample " << s << " of " << count;
    }
}

// engine.infer over `count` inputs.
std::vector<float> infer(Engine& engine, const Network& net, const float* inputs, int count,
                         std::vector<double>* layer_ms = nullptr) {
    std::vector<float> out(static_cast<size_t>(count) * static_cast<size_t>(net.layers.back().out.size()));
    engine.infer(inputs, count, out.data(), layer_ms);
    return out;
}

// VGG16's layer kinds at a small size: 3 input maps; 3x3 stride-1 padded convolutions, those of
// 16 input maps by Winograd under auto (C2 on 20x20 maps, C3 on 10x10: tiles past the edge);
// one of stride 2; max pooling and overlapping average pooling; fully connected layers with
// ReLU, tanh and none.
Network vgg_like() {
    return NetworkBuilder("vgg-like", {3, 20, 20})
        .conv("C1", 16, 3, Activation::ReLU, {}, 1, 1)
        .conv("C2", 16, 3, Activation::ReLU, {}, 1, 1)
        .pool("P1", LayerKind::MaxPool, 2)
        .conv("C3", 32, 3, Activation::ReLU, {}, 1, 1)
        .conv("C4", 32, 3, Activation::Tanh, {}, 2, 1)
        .pool("P2", LayerKind::AvgPool, 2, 1)
        .fully_connected("F1", 40, Activation::ReLU)
        .fully_connected("F2", 24, Activation::Tanh)
        .fully_connected("output", 10, Activation::None)
        .build();
}

// Inputs in [-1, 1) for any network.
std::vector<float> random_inputs(const Network& net, int count, uint64_t seed) {
    std::vector<float> in(static_cast<size_t>(count) * static_cast<size_t>(net.input.size()));
    Rng rng(seed);
    for (float& v : in) v = rng.uniform(-1.0f, 1.0f);
    return in;
}

// The VGG-like network through `engine` at kCounts, each run on other inputs, against cpu_outputs.
void expect_vgg_like_matches_cpu(Engine& engine, const std::string& what) {
    const Network net = vgg_like();
    const std::vector<float> params = test_params(net, 3);
    engine.set_params(params);
    int total = 0;
    for (int count : kCounts) total += count;
    const std::vector<float> in = random_inputs(net, total, 9);
    const std::vector<float> ref = cpu_outputs(net, params, in.data(), total);
    const size_t I = static_cast<size_t>(net.input.size()), O = static_cast<size_t>(net.layers.back().out.size());
    size_t first = 0;
    for (int count : kCounts) {
        const std::vector<float> got = infer(engine, net, in.data() + first * I, count);
        const auto b = ref.begin() + static_cast<std::ptrdiff_t>(first * O);
        expect_close(net, got, std::vector<float>(b, b + static_cast<std::ptrdiff_t>(static_cast<size_t>(count) * O)),
                     count, what + ", batch " + std::to_string(count));
        first += static_cast<size_t>(count);
    }
}

class InferVariant : public ::testing::TestWithParam<std::string> {};

}  // namespace

// Against the cpu engine itself: its forward over the same images, uploaded as a data set.
TEST_P(InferVariant, MatchesTheCpuEngineOnTheModelFiles) {
    for (const char* model : {"lenet5", "mlp", "cnn"}) {
        const Network net = load_model(model).net;
        const std::vector<float> params = test_params(net, 1);
        int total = 0;
        for (int count : kCounts) total += count;
        const Dataset data = random_dataset(total, 2);
        auto cpu = test::cpu_engine(net);
        cpu->upload(Split::Test, data);
        cpu->set_params(params);
        auto engine = inference_engine(net, GetParam());
        EXPECT_EQ(engine->variant(), GetParam());
        engine->set_params(params);
        const std::vector<float> in = inputs_of(net, data);
        int first = 0;
        for (int count : kCounts) {
            cpu->forward(Split::Test, first, count);
            const std::vector<float> got = infer(*engine, net, in.data() + static_cast<size_t>(first) * net.input.size(), count);
            expect_close(net, got, cpu->layer_output(net.layers.size() - 1), count,
                         std::string(model) + ", batch " + std::to_string(count));
            first += count;
        }
    }
}

TEST_P(InferVariant, MatchesCpuOnAVggLikeNetwork) {
    auto engine = inference_engine(vgg_like(), GetParam());
    expect_vgg_like_matches_cpu(*engine, GetParam());
}

// New parameters reach the next run: the fully connected layers' weights and the Winograd filters
// (transformed once per change) alike.
TEST_P(InferVariant, SeesTheParametersSetBetweenRuns) {
    const Network net = vgg_like();
    auto engine = inference_engine(net, GetParam());
    const std::vector<float> in = random_inputs(net, 4, 5);
    for (uint64_t seed : {1, 2}) {
        const std::vector<float> params = test_params(net, seed);
        engine->set_params(params);
        expect_close(net, infer(*engine, net, in.data(), 4), cpu_outputs(net, params, in.data(), 4), 4,
                     "parameters of seed " + std::to_string(seed));
    }
}

// A training engine runs infer() too, and sees what update() did to its parameters.
TEST_P(InferVariant, ATrainingEngineSeesItsUpdates) {
    const Network net = NetworkBuilder("small-vgg", {1, 28, 28})
                            .conv("C1", 16, 3, Activation::ReLU, {}, 1, 1)
                            .conv("C2", 16, 3, Activation::ReLU, {}, 1, 1)  // Winograd under auto
                            .pool("P1", LayerKind::MaxPool, 2)
                            .fully_connected("output", 10, Activation::None)
                            .build();
    const MemoryVariant memory = GetParam() == "gpu" ? MemoryVariant::Global
                                 : GetParam() == "gpu-constant" ? MemoryVariant::Constant
                                                                : MemoryVariant::Local;
    OpenCLBatchEngine engine(net, memory, std::make_shared<DeviceRuntime>(select_opencl_device(-1)));
    const Dataset data = random_dataset(8, 4);
    const std::vector<float> in = inputs_of(net, data);
    engine.upload(Split::Train, data);
    engine.set_params(test_params(net, 6));
    std::vector<int32_t> order(8);
    for (int i = 0; i < 8; ++i) order[static_cast<size_t>(i)] = i;
    engine.set_order(order);
    for (int step = 0; step < 2; ++step) {
        const std::vector<float> params = engine.params();
        expect_close(net, infer(engine, net, in.data(), 8), cpu_outputs(net, params, in.data(), 8), 8,
                     "after " + std::to_string(step) + " updates");
        engine.forward(Split::Train, 0, 8);
        engine.backward();
        engine.update(0.5f, 0.9f, 0.0f);
        EXPECT_GT(test::relative_error(engine.params(), params), 1e-3) << "the update changed little";
    }
}

TEST_P(InferVariant, ReportsEachLayersDeviceTime) {
    const Network net = vgg_like();
    auto engine = inference_engine(net, GetParam());
    engine->set_params(test_params(net, 1));
    const std::vector<float> in = random_inputs(net, 3, 1);
    std::vector<double> ms(net.layers.size(), 0.0);
    infer(*engine, net, in.data(), 3, &ms);
    const std::vector<double> once = ms;
    infer(*engine, net, in.data(), 3, &ms);
    for (size_t k = 0; k < ms.size(); ++k) {
        EXPECT_GT(once[k], 0.0) << net.layers[k].name;
        EXPECT_GT(ms[k], once[k]) << net.layers[k].name << ": the second run adds to the first";
    }
    std::vector<double> short_ms(net.layers.size() - 1, 0.0);
    EXPECT_THROW(infer(*engine, net, in.data(), 3, &short_ms), Error);
}

TEST_P(InferVariant, AnInferenceEngineRefusesTraining) {
    const Network net = lenet5_network();
    test::expect_refuses_training(*inference_engine(net, GetParam()), test_params(net, 1));
}

INSTANTIATE_TEST_SUITE_P(Variants, InferVariant, ::testing::Values("gpu", "gpu-constant", "gpu-local"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                             std::string name = param.param;
                             std::replace(name.begin(), name.end(), '-', '_');
                             return name;
                         });

// Each algorithm a convolution can take (own: the engine's conv_forward; winograd: forward_winograd,
// direct for the layers it does not take).
TEST(OpenCLInference, MatchesCpuUnderEveryConvolutionAlgorithm) {
    std::vector<conv::ConvAlgo> algos{conv::ConvAlgo::Direct, conv::ConvAlgo::Im2col, conv::ConvAlgo::Winograd,
                                      conv::ConvAlgo::Own};
    if (conv::algo_built(conv::ConvAlgo::CLBlast)) algos.push_back(conv::ConvAlgo::CLBlast);
    for (conv::ConvAlgo algo : algos) {
        auto engine = inference_engine(vgg_like(), "gpu", algo);
        expect_vgg_like_matches_cpu(*engine, conv::algo_name(algo));
    }
}

// gpu-constant: convolutions whose weights exceed __constant memory stop training, not inference
// (VGG16's go through OpenCLConv and __global memory).
TEST(OpenCLInference, GpuConstantInfersPastTheConstantMemory) {
    const auto rt = std::make_shared<DeviceRuntime>(select_opencl_device(-1));
    const cl_ulong limit = rt->cl_device().getInfo<CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE>();
    // C2's 3x3 weights over 16 input maps: more bytes than the limit.
    const int maps = static_cast<int>(std::min<cl_ulong>(limit / (16 * 9 * sizeof(float)) + 1, 1 << 16));
    if (static_cast<cl_ulong>(maps) * 16 * 9 * sizeof(float) <= limit)
        GTEST_SKIP() << "the device's __constant memory (" << limit << " bytes) takes any test-sized convolution";
    const Network net = NetworkBuilder("wide", {1, 8, 8})
                            .conv("C1", 16, 3, Activation::ReLU, {}, 1, 1)
                            .conv("C2", maps, 3, Activation::ReLU, {}, 1, 1)
                            .fully_connected("output", 10, Activation::None)
                            .build();
    EXPECT_THROW(OpenCLBatchEngine(net, MemoryVariant::Constant, rt), Error);
    auto engine = inference_engine(net, "gpu-constant");
    const std::vector<float> params = test_params(net, 1), in = random_inputs(net, 2, 1);
    engine->set_params(params);
    expect_close(net, infer(*engine, net, in.data(), 2), cpu_outputs(net, params, in.data(), 2), 2, "gpu-constant");
}

#endif  // LENET5_HAVE_OPENCL
