// The OpenCL variants (gpu, gpu-constant, gpu-local) against the cpu reference, on the
// default OpenCL device (PoCL in CI), and the OpenCL runtime's error reporting.
#ifdef LENET5_HAVE_OPENCL
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli_runner.h"
#include "engine/engine_factory.h"
#include "model/model_file.h"
#include "opencl/device_runtime.h"
#include "opencl/opencl_backend.h"
#include "opencl/opencl_engine.h"
#include "opencl/opencl_program.h"
#include "opencl/opencl_runtime.h"
#include "test_support.h"
#include "train/trainer.h"

using namespace lenet5;

namespace {

// The engine make_engine picks for `net`, which must be the per-sample one (not the batch-level).
std::unique_ptr<Engine> per_sample_engine(const Network& net, const std::string& variant, int group = 0) {
    EngineRequest request;
    request.variant = variant;
    request.group = group;
    auto engine = make_engine(net, request);
    EXPECT_NE(dynamic_cast<OpenCLEngine*>(engine.get()), nullptr) << net.name << " did not get the per-sample engine";
    return engine;
}

std::unique_ptr<Engine> opencl_engine(const std::string& variant) { return per_sample_engine(lenet5_network(), variant); }

class OpenCLVariant : public ::testing::TestWithParam<std::string> {};

}  // namespace

// 130 runs more samples than a group has items; the 7 after it runs a batch smaller than the
// buffers were planned for.
TEST_P(OpenCLVariant, MatchesCpuAtBatchSizes1To130) {
    auto engine = opencl_engine(GetParam());
    EXPECT_EQ(engine->variant(), GetParam());
    for (int batch : {1, 7, 64, 130, 7}) test::expect_matches_cpu(*engine, batch);
}

// The layer functions loop over a layer's elements in steps of the group size: a group smaller
// than a fully connected layer's outputs, and one larger than a pair's outputs, give the same result.
TEST_P(OpenCLVariant, MatchesCpuWithSmallAndLargeGroups) {
    for (int group : {16, 1024}) {
        auto engine = per_sample_engine(lenet5_network(), GetParam(), group);
        test::expect_matches_cpu(*engine, 5);
    }
}

// Every setting other than the default that `lenet5 tune` tries of each knob of the per-sample
// kernels, on LeNet-5 (and the MLP, whose step sums fully connected rows too, for FC_LANES), at
// 64 items, and FC_LANES=32 at 16 items (fewer than it asks for: it takes 16); in gpu-local's
// __local work area and gpu's __global one (a test each: each compiles the kernels 13 times).
class KnobSettings : public ::testing::TestWithParam<std::string> {};

TEST_P(KnobSettings, MatchCpu) {
    struct Case {
        std::string knobs, model;
        int group;
    };
    std::vector<Case> cases{{"FC_LANES=32", "lenet5", 16}};
    for (const SampleKnob& k : sample_knobs())
        for (size_t i = 1; i < k.values.size(); ++i) {
            const std::string knobs = std::string(k.name) + "=" + std::to_string(k.values[i]);
            cases.push_back({knobs, "lenet5", 64});
            if (std::string(k.name) == "FC_LANES") cases.push_back({knobs, "mlp", 64});
        }
    for (const Case& c : cases) {
        SCOPED_TRACE(c.knobs + " " + c.model + " " + std::to_string(c.group));
        const Network net = load_model(c.model).net;
        auto engine = make_sample_engine(net, GetParam(), -1, c.group, c.knobs);
        EXPECT_NE(engine->device().find(c.knobs), std::string::npos) << engine->device();
        test::expect_matches_cpu(*engine, net, 3);
    }
}

INSTANTIATE_TEST_SUITE_P(OpenCL, KnobSettings, ::testing::Values("gpu-local", "gpu"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                             std::string name = param.param;
                             std::replace(name.begin(), name.end(), '-', '_');
                             return name;
                         });

// An unknown knob or value is refused by name.
TEST(OpenCL, RefusesAnUnknownKnobSettingByName) {
    for (const char* bad : {"FWD_RUN=3", "NO_SUCH=1", "FC_LANES"}) {
        try {
            make_sample_engine(lenet5_network(), "gpu-local", -1, 64, bad);
            ADD_FAILURE() << bad << " was taken";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(std::string("no knob setting '") + bad + "'"), std::string::npos)
                << e.what();
        }
    }
}

TEST_P(OpenCLVariant, KernelProfileTimesEveryLaunchOfAStep) {
    const Network net = lenet5_network();
    auto engine = opencl_engine(GetParam());
    engine->profile_kernels();
    test::record_step(*engine, net, random_dataset(16, 2), 8, 1);
    engine->take_kernel_times();
    Rng rng(3);
    engine->set_order(shuffled_order(16, rng));
    for (int first : {0, 8}) {
        engine->forward(Split::Train, first, 8);
        engine->backward();
        engine->update(0.05f, 0.9f, 5e-4f);
    }
    // A step is two launches: forward and backward over the samples, then the gradients added up
    // as the update applies them.
    const auto kernels = engine->take_kernel_times();
    ASSERT_EQ(kernels.size(), 2u);
    for (const auto& k : kernels) {
        EXPECT_EQ(k.launches, 2) << k.name;
        EXPECT_GT(k.ms, 0.0) << k.name;
    }
    EXPECT_EQ(kernels[0].name, "step_samples");
    EXPECT_EQ(kernels[1].name, "gradients_update");
    // The first step after the times are taken is a probe: each phase's kernels apart, once.
    engine->take_times();
    engine->forward(Split::Train, 0, 8);
    engine->backward();
    engine->update(0.05f, 0.9f, 5e-4f);
    const auto probe = engine->take_kernel_times();
    ASSERT_EQ(probe.size(), 4u);
    for (const auto& k : probe) EXPECT_EQ(k.launches, 1) << k.name;
    EXPECT_EQ(probe[0].name, "forward_samples");
    EXPECT_EQ(probe[1].name, "backward_samples");
    EXPECT_EQ(probe[2].name, "gradients");
    EXPECT_EQ(probe[3].name, "sgd_momentum");
    EXPECT_TRUE(engine->take_kernel_times().empty());
}

// A step at batch 8 as two fused launches (step_samples, gradients_update) gives the parameters
// that the four unfused launches give, bit for bit: when the gradients are read before the update
// (the gradients kernel, then sgd_momentum), when a test forward comes between backward and update,
// and on the probe (the first step after take_times()).
TEST_P(OpenCLVariant, FusedBatchStepsGiveTheUnfusedParameters) {
    const Network net = lenet5_network();
    const std::vector<float> start = init_params(net, 6);
    auto engine = opencl_engine(GetParam());
    test::record_step(*engine, net, random_dataset(32, 3), 8, 1);
    auto steps = [&](int way) {
        engine->set_params(start);
        Rng rng(5);
        engine->set_order(shuffled_order(32, rng));
        engine->profile_kernels();
        engine->take_kernel_times();
        for (int first = 0; first < 32; first += 8) {
            engine->forward(Split::Train, first, 8);
            engine->backward();
            if (way == 1) engine->gradients();
            if (way == 2) engine->forward(Split::Test, 0, 4);
            engine->update(0.05f, 0.9f, 5e-4f);
        }
        return engine->params();
    };
    engine->take_times();  // the next step is a probe
    const std::vector<float> fused = steps(0);
    const auto kernels = engine->take_kernel_times();
    ASSERT_EQ(kernels.size(), 6u);
    EXPECT_EQ(kernels[4].name, "step_samples");
    EXPECT_EQ(kernels[4].launches, 3);  // the probe ran the other four once
    EXPECT_EQ(kernels[5].name, "gradients_update");
    EXPECT_EQ(steps(1), fused);
    EXPECT_EQ(steps(2), fused);
}

// Seed 004's MLP: fully connected from the input, sigmoid on both layers, the squared error.
TEST_P(OpenCLVariant, MatchesCpuOnTheMlp) {
    const Network net = load_model("mlp").net;
    auto engine = per_sample_engine(net, GetParam());
    for (int batch : {1, 3, 1}) test::expect_matches_cpu(*engine, net, batch);
}

// At batch 1 a run of steps of a network that starts fully connected is one launch a step:
// step_update (the rest of the network, its backward, every gradient and the update, then the
// next training sample's first layer), after a first_forward where the run starts (its first
// step, a new order). On the persistent path (the default) a run of steps is one launch of
// step_run instead, which goes when anything needs its results (here: a test forward, a new
// order, the parameters). Gradients wanted before the update, or a forward between backward and
// update, get the tail in one group (tail_step) and the gradients kernel first, and the next step
// its first_forward. The first batch-1 step since take_times() is a probe, its phases run apart
// (first_forward, tail_forward, backward_samples, step_gradients, sgd_momentum), and the fused
// launches' time is split over the phases by it. The parameters come out the same, bit for bit,
// every way and on both paths; so do they with a test-set forward between steps, which leaves
// the next sample's first layer in place.
TEST_P(OpenCLVariant, BatchOneStepIsOneLaunchWithTheSameParameters) {
    const Network net = load_model("mlp").net;
    const std::vector<float> start = init_params(net, 5);
    std::vector<float> first_path;
    for (const bool persistent : {false, true}) {
        auto engine = per_sample_engine(net, GetParam());
        if (!persistent) dynamic_cast<OpenCLEngine&>(*engine).set_step_runs(0);
        test::record_step(*engine, net, random_dataset(8, 2), 1, 1);
        engine->forward(Split::Test, 0, 4);  // buffers for 4 samples, planned before the steps
        auto steps = [&](bool test_forward_between) {
            engine->set_params(start);
            Rng rng(4);
            engine->set_order(shuffled_order(8, rng));
            engine->profile_kernels();
            engine->take_kernel_times();
            engine->take_times();
            engine->take_counters();
            // The epoch's last three samples (the last has no next), a new order, two more.
            for (int first : {5, 6, 7, -1, 0, 1}) {
                if (first < 0) {
                    engine->set_order(shuffled_order(8, rng));
                    continue;
                }
                engine->forward(Split::Train, first, 1);
                engine->backward();
                if (test_forward_between) engine->forward(Split::Test, 0, 4);
                engine->update(0.1f, 0.9f, 5e-4f);
                if (!test_forward_between && first == 6) engine->forward(Split::Test, 0, 4);
            }
            return engine->params();
        };
        auto expect_kernels = [&](const std::vector<std::pair<std::string, int64_t>>& expected) {
            const auto kernels = engine->take_kernel_times();
            ASSERT_EQ(kernels.size(), expected.size());
            for (size_t i = 0; i < expected.size(); ++i) {
                EXPECT_EQ(kernels[i].name, expected[i].first);
                EXPECT_EQ(kernels[i].launches, expected[i].second) << kernels[i].name;
            }
        };
        const std::vector<float> fused = steps(false);
        if (first_path.empty()) first_path = fused;
        EXPECT_EQ(fused, first_path);
        // first_forward: the probe's (sample 5), after the probe (6) and after the new order (0).
        // step_run: 6 (before the test forward), 7 (before the new order), 0 (before its loss slot,
        // the last of 8, is read back) and 1 (before params()).
        expect_kernels({{"first_forward", 3},
                        {"tail_forward", 1},
                        {"backward_samples", 1},
                        {"step_gradients", 1},
                        {"sgd_momentum", 1},
                        {persistent ? "step_run" : "step_update", 4},
                        {"forward_samples", 1}});
        // The backward and most of the forward ran inside the update's kernel; the probe apportions them.
        const PhaseTimes t = engine->take_times();
        EXPECT_GT(t.forward_ms, 0.0);
        EXPECT_GT(t.backward_ms, 0.0);
        EXPECT_GT(t.update_ms, 0.0);
        EXPECT_EQ(engine->take_counters().samples, 5 + 4);

        EXPECT_EQ(steps(true), fused);
        expect_kernels({{"first_forward", 5},
                        {"tail_forward", 1},
                        {"backward_samples", 1},
                        {"step_gradients", 1},
                        {"forward_samples", 5},
                        {"sgd_momentum", 5},
                        {"tail_step", 4},
                        {"gradients", 4}});
        // The training samples' losses, whichever kernel computed them (the test forwards' come after).
        EXPECT_EQ(engine->take_counters().samples, 5 + 5 * 4);
    }
}

// LeNet-5 at batch 1 keeps step_samples and gradients_sgd; so does a network that starts fully
// connected but whose tail is too large to compute in every group of the update (first_forward,
// tail_step in one group, gradients_sgd).
TEST_P(OpenCLVariant, BatchOneStepsOfOtherNetworks) {
    const Network wide = NetworkBuilder("wide-tail", {1, 28, 28})
                             .fully_connected("F1", 256, Activation::Tanh)
                             .fully_connected("F2", 128, Activation::Sigmoid)
                             .fully_connected("output", 10, Activation::None)
                             .build();
    const std::vector<std::pair<Network, std::vector<std::string>>> cases = {
        {lenet5_network(), {"step_samples", "gradients_sgd"}},
        {wide, {"first_forward", "tail_step", "gradients_sgd"}},
    };
    for (const auto& [net, names] : cases) {
        auto engine = per_sample_engine(net, GetParam());
        test::expect_matches_cpu(*engine, net, 1);
        Rng rng(2);
        engine->set_order(shuffled_order(5, rng));
        engine->profile_kernels();
        engine->forward(Split::Train, 0, 1);
        engine->backward();
        engine->update(0.1f, 0.0f, 0.0f);
        const auto kernels = engine->take_kernel_times();
        ASSERT_EQ(kernels.size(), names.size()) << net.name;
        for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(kernels[i].name, names[i]) << net.name;
    }
}

// Every activation in every place a layer function applies or differentiates one: the pairs'
// convolutions and subsamplings, fully connected layers, and the output under either loss.
TEST_P(OpenCLVariant, MatchesCpuWithEveryActivation) {
    const Network pairs = NetworkBuilder("pairs-mix", {1, 28, 28})
                              .conv("C1", 2, 5, Activation::ReLU)
                              .subsample("S2", 2, Activation::Sigmoid)
                              .conv("C3", 3, 5, Activation::Tanh)
                              .subsample("S4", 2, Activation::ReLU)
                              .fully_connected("F5", 12, Activation::Sigmoid)
                              .fully_connected("output", 10, Activation::None)
                              .build();
    const Network fc = NetworkBuilder("fc-mix", {1, 28, 28})
                           .fully_connected("F1", 24, Activation::ReLU)
                           .fully_connected("F2", 16, Activation::None)
                           .fully_connected("output", 10, Activation::Tanh)
                           .loss(Loss::SquaredError)
                           .build();
    for (const Network& net : {pairs, fc}) {
        auto engine = per_sample_engine(net, GetParam());
        for (int batch : {1, 4}) test::expect_matches_cpu(*engine, net, batch);
    }
}

// What the per-sample kernels leave to the batch-level engine gets a one-line reason naming the layer.
TEST(OpenCL, PerSampleKernelsRefusePoolingAndPaddedConvolutions) {
    const Network cnn = load_model("cnn").net;
    EXPECT_NE(sample_refusal(cnn).find("layer C1"), std::string::npos) << sample_refusal(cnn);
    const Network pool = NetworkBuilder("pool", {1, 28, 28})
                             .pool("P1", LayerKind::MaxPool, 2)
                             .fully_connected("output", 10, Activation::None)
                             .build();
    EXPECT_NE(sample_refusal(pool).find("no maxpool layers; layer P1"), std::string::npos) << sample_refusal(pool);
    const Network conv_fc = NetworkBuilder("conv-fc", {1, 12, 12})
                                .conv("C1", 2, 5, Activation::Tanh)
                                .fully_connected("F2", 10, Activation::None)
                                .build();
    EXPECT_NE(sample_refusal(conv_fc).find("layer C1 is not part of such a pair"), std::string::npos)
        << sample_refusal(conv_fc);
    EXPECT_EQ(sample_refusal(load_model("mlp").net), "");
    EXPECT_EQ(sample_refusal(lenet5_network()), "");
}

TEST_P(OpenCLVariant, SameSeedGivesBitIdenticalParameters) {
    const Network net = lenet5_network();
    const Dataset data = random_dataset(150, 3);
    auto engine = opencl_engine(GetParam());
    const auto a = test::record_step(*engine, net, data, 64, 1).params_after;
    const auto b = test::record_step(*engine, net, data, 64, 1).params_after;
    EXPECT_EQ(a, b);  // bit for bit
}

// The engine poisons what its kernels must write, so expect_matches_cpu catches any element a
// kernel leaves alone: gradients after set_params, activations whenever they are allocated.
TEST_P(OpenCLVariant, GradientsArePoisonedUntilBackwardWritesThem) {
    const Network net = lenet5_network();
    auto engine = opencl_engine(GetParam());
    engine->upload(Split::Train, random_dataset(8, 5));
    engine->upload(Split::Test, random_dataset(8, 6));
    engine->set_params(init_params(net, 1));
    for (float g : engine->gradients()) ASSERT_TRUE(std::isnan(g));
    engine->set_order({7, 6, 5, 4, 3, 2, 1, 0});
    engine->forward(Split::Train, 0, 8);
    engine->backward();
    for (float g : engine->gradients()) ASSERT_TRUE(std::isfinite(g));
}

TEST_P(OpenCLVariant, PhaseTimesComeFromTheKernels) {
    const Network net = lenet5_network();
    auto engine = opencl_engine(GetParam());
    test::record_step(*engine, net, random_dataset(20, 8), 8, 3);
    engine->take_times();
    Rng rng(4);
    engine->set_order(shuffled_order(20, rng));
    engine->forward(Split::Train, 0, 8);
    engine->backward();
    engine->update(0.05f, 0.9f, 5e-4f);
    const Counters c = engine->take_counters();
    EXPECT_EQ(c.samples, 8);
    const PhaseTimes t = engine->take_times();
    EXPECT_GT(t.forward_ms, 0.0);
    EXPECT_GT(t.backward_ms, 0.0);
    EXPECT_GT(t.update_ms, 0.0);
    EXPECT_GT(t.transfer_ms, 0.0);  // the order and the counters
    const PhaseTimes none = engine->take_times();
    EXPECT_EQ(none.forward_ms + none.backward_ms + none.update_ms + none.transfer_ms, 0.0);
}

INSTANTIATE_TEST_SUITE_P(OpenCL, OpenCLVariant, ::testing::Values("gpu", "gpu-constant", "gpu-local"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                             std::string name = param.param;
                             std::replace(name.begin(), name.end(), '-', '_');
                             return name;
                         });

TEST(OpenCL, LearnsRealMnistLikeCpu) {
    const std::string dir = test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    auto accuracy = [&](const std::string& variant) {
        TrainOptions o;
        o.engine.variant = variant;
        o.data_dir = dir;
        o.epochs = 1;
        o.train_limit = 3000;
        o.test_limit = 1000;
        const TrainResult r = train(o);
        EXPECT_EQ(r.info.variant, variant);
        return r.epochs.at(0).test_accuracy;
    };
    const double cpu = accuracy("cpu"), gpu = accuracy("gpu-local");
    EXPECT_NEAR(gpu, cpu, 0.015) << "cpu " << cpu << ", gpu-local " << gpu;
    EXPECT_GE(gpu, 0.8);
}

TEST(OpenCL, ErrorsNameTheCodeAndTheCall) {
    EXPECT_EQ(cl_error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
    EXPECT_EQ(cl_error_name(CL_INVALID_WORK_GROUP_SIZE), "CL_INVALID_WORK_GROUP_SIZE");
    const std::string what = cl_failure(cl::Error(CL_OUT_OF_RESOURCES, "clEnqueueNDRangeKernel")).what();
    EXPECT_NE(what.find("CL_OUT_OF_RESOURCES"), std::string::npos) << what;
    EXPECT_NE(what.find("clEnqueueNDRangeKernel"), std::string::npos) << what;
    try {
        cl_checked([]() -> int { throw cl::Error(CL_INVALID_KERNEL_ARGS, "clSetKernelArg"); });
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("CL_INVALID_KERNEL_ARGS"), std::string::npos) << e.what();
    }
}

TEST(OpenCL, KernelThatFailsToBuildReportsTheBuildLog) {
    const OpenCLDevice device = select_opencl_device(-1);
    const cl::Context context(device.device);
    try {
        build_program(context, device.device, "__kernel void broken(__global float* x) { x[0] = undeclared_name; }", "");
        FAIL() << "the build succeeded";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("failed to build"), std::string::npos) << what;
        EXPECT_NE(what.find("undeclared_name"), std::string::npos) << "the build log: " << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
    }
}

namespace {

using test::CliResult;
using test::slurp;

constexpr auto& run_binary = test::run_cli;

// A tiny MNIST folder (IDX files, 3 images each), so the CLI gets as far as choosing the device.
std::string tiny_mnist_dir() {
    const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "lenet5_opencl_mnist";
    std::filesystem::create_directories(dir);
    auto be32 = [](std::ofstream& f, uint32_t v) {
        for (int shift = 24; shift >= 0; shift -= 8) f.put(static_cast<char>((v >> shift) & 0xff));
    };
    for (const char* prefix : {"train", "t10k"}) {
        std::ofstream images(dir / (std::string(prefix) + "-images-idx3-ubyte"), std::ios::binary);
        for (uint32_t v : {0x803u, 3u, 28u, 28u}) be32(images, v);
        images << std::string(3 * 28 * 28, '\x40');
        std::ofstream labels(dir / (std::string(prefix) + "-labels-idx1-ubyte"), std::ios::binary);
        for (uint32_t v : {0x801u, 3u}) be32(labels, v);
        labels << std::string("\x01\x02\x03", 3);
    }
    return dir.string();
}

}  // namespace

TEST(OpenCL, MissingDeviceExitsOneNamingIt) {
    const CliResult r = run_binary("train --variant gpu --device 99 --epochs 1 --data " + tiny_mnist_dir());
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err.rfind("lenet5: error: OpenCL device 99 does not exist (", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("see `lenet5 devices`"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

TEST(OpenCL, DevicesListsEveryDevice) {
    const auto devices = opencl_devices();
    ASSERT_FALSE(devices.empty());
    std::ostringstream listing;
    print_opencl_devices(listing);
    const std::string out = listing.str();
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), static_cast<long>(devices.size())) << out;
    for (const auto& d : devices)
        EXPECT_NE(out.find(std::to_string(d.index) + ": " + d.platform_name + " / " + d.name + " | "), std::string::npos)
            << out;
    for (const char* field : {"compute units", "global", "local", "max work-group", "OpenCL C"})
        EXPECT_NE(out.find(field), std::string::npos) << out;
    EXPECT_THROW(select_opencl_device(static_cast<int>(devices.size())), Error);
    EXPECT_EQ(select_opencl_device(0).name, devices[0].name);
    // The command prints the same listing. (It may list fewer devices than this process sees: a GPU
    // in exclusive-process mode is not available to a second process while this one holds it.)
    const CliResult r = run_binary("devices");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.rfind("0: ", 0), 0u) << r.out;
}

// A buffer larger than the device allows names itself, its size and the device's limit, and says
// what to do (it was "OpenCL error CL_INVALID_BUFFER_SIZE (-61) in clCreateBuffer").
TEST(DeviceMemory, ABufferThatDoesNotFitSaysWhichAndWhatToDo) {
    DeviceRuntime rt(select_opencl_device(-1));
    const cl_ulong most = rt.cl_device().getInfo<CL_DEVICE_MAX_MEM_ALLOC_SIZE>();
    try {
        rt.buffer(static_cast<size_t>(most) + 4096, CL_MEM_READ_WRITE, "the batch's activations");
        FAIL() << "a buffer larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE was created";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind("the batch's activations of ", 0), 0u) << what;
        EXPECT_NE(what.find("does not fit on " + rt.device().name), std::string::npos) << what;
        EXPECT_NE(what.find("CL_DEVICE_MAX_MEM_ALLOC_SIZE"), std::string::npos) << what;
        EXPECT_NE(what.find("a smaller --batch, or another --device"), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    EXPECT_NO_THROW(rt.buffer(4096, CL_MEM_READ_WRITE, "a small buffer"));
}

#endif  // LENET5_HAVE_OPENCL
