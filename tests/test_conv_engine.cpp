// The batch-level OpenCL engine with its convolutions through host/conv/ (train --conv-algo): a
// small CNN with a padded, a strided and a table convolution (the last keeps the engine's kernels)
// against the cpu reference, per algorithm (CLBlast too, inside the planned step), on the default
// OpenCL device (PoCL in CI).
#ifdef LENET5_HAVE_OPENCL
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <unistd.h>

#include "conv/conv_tuning.h"
#include "opencl/opencl_batch_engine.h"
#include "test_support.h"

using namespace lenet5;

namespace {

Network conv_network() {
    return NetworkBuilder("conv-algos", {1, 28, 28})
        .conv("C1", 5, 3, Activation::ReLU, {}, 2, 1)
        .conv("C2", 6, 3, Activation::Tanh, {}, 1, 1)
        .conv("C3", 2, 3, Activation::Sigmoid, {{1, 0, 1, 1, 0, 1}, {0, 1, 1, 0, 1, 1}})
        .fully_connected("output", 10, Activation::None)
        .build();
}

class ConvEngine : public ::testing::TestWithParam<conv::ConvAlgo> {};

TEST_P(ConvEngine, MatchesCpu) {
    const Network net = conv_network();
    OpenCLBatchEngine engine(net, MemoryVariant::Local, std::make_shared<DeviceRuntime>(select_opencl_device(-1)), GetParam());
    for (int batch : {1, 4}) test::expect_matches_cpu(engine, net, batch);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ConvEngine,
                         ::testing::Values(conv::ConvAlgo::Direct, conv::ConvAlgo::Im2col, conv::ConvAlgo::Winograd),
                         [](const ::testing::TestParamInfo<conv::ConvAlgo>& algo) {
                             return std::string(conv::algo_name(algo.param));
                         });

// --conv-algo winograd in training: the 3x3 layer over 16 maps runs by Winograd (forward and input
// gradient), the first layer (one input map) by direct; the step matches cpu.
TEST(ConvEngineWinograd, RunsTheLayersItTakesAndMatchesCpu) {
    const Network net = NetworkBuilder("wino", {1, 28, 28})
                            .conv("C1", 16, 3, Activation::ReLU, {}, 1, 1)
                            .conv("C2", 16, 3, Activation::Tanh, {}, 1, 1)
                            .pool("P2", LayerKind::MaxPool, 2)
                            .fully_connected("output", 10, Activation::None)
                            .build();
    OpenCLBatchEngine engine(net, MemoryVariant::Local, std::make_shared<DeviceRuntime>(select_opencl_device(-1)),
                             conv::ConvAlgo::Winograd);
    engine.profile_kernels();
    for (int batch : {1, 3}) test::expect_matches_cpu(engine, net, batch);
    std::map<std::string, int64_t> launches;
    for (const KernelTime& t : engine.take_kernel_times()) launches[t.name] = t.launches;
    EXPECT_EQ(launches.count("C1 winograd cv_wino_input"), 0u);  // one input map: direct
    int64_t c1_direct = 0;
    for (const auto& [name, n] : launches) c1_direct += name.rfind("C1 winograd cv_direct", 0) == 0 ? n : 0;
    EXPECT_GT(c1_direct, 0);
    // C2's forward and input gradient: each transforms its filters, input tiles and outputs.
    EXPECT_GT(launches["C2 winograd cv_wino_filters"], 0);
    EXPECT_EQ(launches["C2 winograd cv_wino_filters"], launches["C2 winograd cv_wino_input"]);
    EXPECT_EQ(launches["C2 winograd cv_wino_filters"], launches["C2 winograd cv_wino_output"]);
    EXPECT_EQ(launches.count("C2 winograd cv_flip_weights"), 0u);  // not direct's input gradient
}

#ifdef LENET5_HAVE_CLBLAST
// CLBlast inside a training step: its routines run on the engine's queue, planned with the rest.
TEST(ConvEngineClblast, RunsInsideATrainingStepAndMatchesCpu) {
    const Network net = conv_network();
    OpenCLBatchEngine engine(net, MemoryVariant::Local, std::make_shared<DeviceRuntime>(select_opencl_device(-1)),
                             conv::ConvAlgo::CLBlast);
    engine.profile_kernels();
    test::expect_matches_cpu(engine, net, 3);
    std::map<std::string, int64_t> launches;
    for (const KernelTime& t : engine.take_kernel_times()) launches[t.name] = t.launches;
    EXPECT_GT(launches["C2 clblast clblast_convgemm"], 0);          // one event per CLBlast command
    EXPECT_GT(launches["C2 clblast clblast_backward_weights"], 0);
    EXPECT_GT(launches["C2 clblast clblast_backward_data"], 0);
}
#endif

// Auto follows the convolution tuning cache: a shape tuned `own` keeps the engine's own kernels
// (tune --conv found them fastest), one tuned `direct` runs OpenCLConv's direct kernels.
TEST(ConvEngineAuto, FollowsTheTunedAlgorithmOwnIncluded) {
    const Network net = conv_network();
    const auto rt = std::make_shared<DeviceRuntime>(select_opencl_device(-1));
    const OpenCLDevice& device = rt->device();
    const std::string cache = (std::filesystem::temp_directory_path() /
                               ("lenet5-conv-engine-" + std::to_string(::getpid()) + ".tsv")).string();
    setenv("LENET5_CONV_TUNING", cache.c_str(), 1);
    const std::string c1 = conv::ConvShape{4, 1, 28, 28, 5, 3, 2, 1}.describe();  // C1 at batch 4
    for (conv::ConvAlgo tuned : {conv::ConvAlgo::Own, conv::ConvAlgo::Direct}) {
        conv::store_conv_tuning(cache, {device.platform_name, device.name, device.driver, c1, tuned, 1.0});
        OpenCLBatchEngine engine(net, MemoryVariant::Local, rt, conv::ConvAlgo::Auto);
        engine.profile_kernels();
        test::expect_matches_cpu(engine, net, 4);
        bool direct = false, own = false;
        for (const KernelTime& t : engine.take_kernel_times()) {
            direct |= t.name.rfind("C1 direct ", 0) == 0;
            own |= t.name.rfind("C1 conv_", 0) == 0;
        }
        EXPECT_EQ(direct, tuned == conv::ConvAlgo::Direct) << conv::algo_name(tuned);
        EXPECT_EQ(own, tuned == conv::ConvAlgo::Own) << conv::algo_name(tuned);
    }
    unsetenv("LENET5_CONV_TUNING");
    std::filesystem::remove(cache);
}

}  // namespace
#endif
