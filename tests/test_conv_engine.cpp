// The batch-level OpenCL engine with its convolutions through host/conv/ (train --conv-algo): a
// small CNN with a padded, a strided and a table convolution (the last keeps the engine's kernels)
// against the cpu reference, per algorithm, on the default OpenCL device (PoCL in CI).
#ifdef LENET5_HAVE_OPENCL
#include <gtest/gtest.h>

#include "opencl_batch_engine.h"
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
    OpenCLBatchEngine engine(net, MemoryVariant::Local, select_opencl_device(-1), GetParam());
    for (int batch : {1, 4}) test::expect_matches_cpu(engine, net, batch);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ConvEngine, ::testing::Values(conv::ConvAlgo::Direct, conv::ConvAlgo::Im2col),
                         [](const ::testing::TestParamInfo<conv::ConvAlgo>& algo) {
                             return std::string(conv::algo_name(algo.param));
                         });

TEST(ConvEngineClblast, IsRefusedWithAClearError) {
    const Network net = conv_network();
    OpenCLBatchEngine engine(net, MemoryVariant::Local, select_opencl_device(-1), conv::ConvAlgo::CLBlast);
    engine.upload(Split::Train, random_dataset(4, 1));
    engine.set_order({0, 1, 2, 3});
    try {
        engine.forward(Split::Train, 0, 4);
        FAIL() << "clblast was planned";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("clblast"), std::string::npos) << e.what();
    }
}

}  // namespace
#endif
