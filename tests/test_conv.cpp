// The convolution algorithms (host/conv/): the host im2col path and every OpenCL algorithm against
// the scalar direct reference, forward (bias and activation), input gradient and weight gradient,
// over shapes with strides 1-3, padding, odd sizes, 1x1 to 5x5 kernels and every direct tile, on the
// default OpenCL device (PoCL in CI). Small shapes: the whole suite takes seconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "conv/conv_reference.h"
#include "conv/conv_tuning.h"
#include "common/error.h"
#include "common/rng.h"
#ifdef LENET5_HAVE_OPENCL
#include "conv/opencl_conv.h"
#include "conv/winograd_host.h"
#endif

using namespace lenet5;
using namespace lenet5::conv;

namespace {

constexpr double kTolerance = 1e-4;

// batch, in maps, in height, in width, out maps, kernel, stride, pad.
const std::vector<ConvShape> kShapes = {
    {2, 3, 9, 11, 5, 3, 1, 1},    // odd sizes, padded, the m4 tile with the 3x3 kernel
    {1, 2, 10, 10, 3, 3, 2, 1},   // stride 2, few maps: cv_direct_few
    {2, 3, 14, 14, 1, 3, 3, 1},   // the seed's case: 3 maps, one filter, stride 3 (cv_direct_few)
    {2, 4, 13, 8, 7, 5, 3, 2},    // stride 3, 5x5
    {1, 5, 7, 6, 20, 1, 1, 0},    // 1x1, the m16 tile
    {2, 20, 10, 12, 70, 3, 1, 1}, // many maps: the m64 tile, two map tiles, two rounds of channels
    {1, 1, 5, 140, 2, 3, 1, 1},   // a wide plane: two column tiles of m4
    {1, 2, 6, 9, 5, 5, 1, 2},     // m4 with a 5x5 kernel (not _k3)
    {3, 6, 6, 6, 9, 4, 2, 3},     // even kernel, padding of kernel - 1
};

std::vector<float> random_values(size_t n, uint64_t seed) {
    Rng rng(seed);
    std::vector<float> v(n);
    for (auto& x : v) x = rng.uniform(-1.0f, 1.0f);
    return v;
}

struct Tensors {
    std::vector<float> in, w, b, d_out;
    explicit Tensors(const ConvShape& s)
        : in(random_values(s.input_size(), 1)),
          w(random_values(s.weight_size(), 2)),
          b(random_values(size_t(s.out_c), 3)),
          d_out(random_values(s.output_size(), 4)) {}
};

struct Results {
    std::vector<float> out, d_in, d_w, d_b;
    explicit Results(const ConvShape& s)
        : out(s.output_size()), d_in(s.input_size()), d_w(s.weight_size()), d_b(size_t(s.out_c)) {}
};

Results host_results(ConvAlgo algo, const ConvShape& s, const Tensors& t, Activation act) {
    Results r(s);
    host_forward(algo, s, t.in.data(), t.w.data(), t.b.data(), r.out.data(), act);
    host_backward_data(algo, s, t.d_out.data(), t.w.data(), r.d_in.data());
    host_backward_weights(algo, s, t.in.data(), t.d_out.data(), r.d_w.data(), r.d_b.data());
    return r;
}

void expect_close(const Results& got, const Results& ref, const std::string& what) {
    EXPECT_LT(max_relative_error(got.out.data(), ref.out.data(), ref.out.size()), kTolerance) << what << " forward";
    EXPECT_LT(max_relative_error(got.d_in.data(), ref.d_in.data(), ref.d_in.size()), kTolerance) << what << " data";
    EXPECT_LT(max_relative_error(got.d_w.data(), ref.d_w.data(), ref.d_w.size()), kTolerance) << what << " weights";
    EXPECT_LT(max_relative_error(got.d_b.data(), ref.d_b.data(), ref.d_b.size()), kTolerance) << what << " bias";
}

TEST(ConvReference, DirectMatchesHandComputedValues) {
    // One 3x3 input, a 2x2 kernel, stride 1, pad 0: out = 1*1+2*0+4*0+5*1 + 0.5 = 6.5 at (0,0), etc.
    const ConvShape s{1, 1, 3, 3, 1, 2, 1, 0};
    const std::vector<float> in{1, 2, 3, 4, 5, 6, 7, 8, 9}, w{1, 0, 0, 1}, b{0.5f};
    std::vector<float> out(4);
    host_forward(ConvAlgo::Direct, s, in.data(), w.data(), b.data(), out.data(), Activation::None);
    EXPECT_EQ(out, (std::vector<float>{6.5f, 8.5f, 12.5f, 14.5f}));
    const std::vector<float> d{1, 0, 0, 1};
    std::vector<float> d_in(9), d_w(4), d_b(1);
    host_backward_data(ConvAlgo::Direct, s, d.data(), w.data(), d_in.data());
    EXPECT_EQ(d_in, (std::vector<float>{1, 0, 0, 0, 2, 0, 0, 0, 1}));
    host_backward_weights(ConvAlgo::Direct, s, in.data(), d.data(), d_w.data(), d_b.data());
    EXPECT_EQ(d_w, (std::vector<float>{6, 8, 12, 14}));
    EXPECT_EQ(d_b[0], 2.0f);
}

TEST(ConvReference, Im2colMatchesDirect) {
    for (const ConvShape& s : kShapes) {
        const Tensors t(s);
        expect_close(host_results(ConvAlgo::Im2col, s, t, Activation::Tanh),
                     host_results(ConvAlgo::Direct, s, t, Activation::Tanh), "host im2col " + s.describe());
    }
}

// Untuned, auto takes im2col only for outputs of few positions over the batch (VGG16's deep layers at batch 1).
TEST(ConvDefault, Im2colForFewOutputPositionsElseDirect) {
    EXPECT_EQ(conv_default_algo({1, 512, 14, 14, 512, 3, 1, 1}), ConvAlgo::Im2col);
    EXPECT_EQ(conv_default_algo({1, 256, 28, 28, 512, 3, 1, 1}), ConvAlgo::Im2col);
    EXPECT_EQ(conv_default_algo({1, 256, 56, 56, 256, 3, 1, 1}), ConvAlgo::Direct);
    EXPECT_EQ(conv_default_algo({16, 512, 14, 14, 512, 3, 1, 1}), ConvAlgo::Direct);
    EXPECT_EQ(conv_default_algo({1, 3, 4096, 4096, 1, 3, 3, 1}), ConvAlgo::Direct);
}

TEST(ConvReference, BadShapesAndNamesAreOneLineErrors) {
    EXPECT_THROW((ConvShape{1, 1, 4, 4, 1, 3, 1, 3}.validate()), Error);   // pad >= kernel
    EXPECT_THROW((ConvShape{1, 1, 2, 2, 1, 5, 1, 1}.validate()), Error);   // kernel > padded input
    EXPECT_THROW((ConvShape{0, 1, 4, 4, 1, 3, 1, 0}.validate()), Error);
    EXPECT_THROW(parse_algo("fft"), UsageError);
    EXPECT_EQ(parse_algo("winograd"), ConvAlgo::Winograd);
    EXPECT_EQ(parse_algo("im2col"), ConvAlgo::Im2col);
    EXPECT_EQ(parse_algo("own"), ConvAlgo::Own);
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "lenet5_conv_" + name; }

TEST(ConvTuning, StoresReplacesAndReadsBack) {
    const std::string path = temp_path("tuning.tsv");
    std::remove(path.c_str());
    EXPECT_TRUE(read_conv_tuning(path).empty());
    store_conv_tuning(path, {"P", "D", "1.0", "1x3x9x9 k3 s1 p1 -> 4", ConvAlgo::Im2col, 2.5});
    store_conv_tuning(path, {"P", "D", "1.0", "2x3x9x9 k3 s1 p1 -> 4", ConvAlgo::Direct, 1.0});
    store_conv_tuning(path, {"P", "D", "1.0", "1x3x9x9 k3 s1 p1 -> 4", ConvAlgo::CLBlast, 2.0});
    const auto entries = read_conv_tuning(path);
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].algo, ConvAlgo::CLBlast);
    EXPECT_EQ(entries[1].shape, "2x3x9x9 k3 s1 p1 -> 4");
    std::ofstream(path, std::ios::app) << "P\tD\t1.0\tshape\tfft\t1\n";
    EXPECT_THROW(read_conv_tuning(path), Error);
    std::remove(path.c_str());
}

#ifdef LENET5_HAVE_OPENCL
class OpenCLConvTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        rt_ = new std::shared_ptr<DeviceRuntime>(std::make_shared<DeviceRuntime>(select_opencl_device(-1)));
        conv_ = new OpenCLConv(*rt_);
    }
    static void TearDownTestSuite() {
        delete conv_;
        delete rt_;
    }

    static cl::Buffer upload(const std::vector<float>& v) {
        return (*rt_)->buffer(v.data(), v.size() * sizeof(float), CL_MEM_READ_WRITE);
    }
    static void download(const cl::Buffer& b, std::vector<float>& v) {
        (*rt_)->read(b, v.data(), v.size() * sizeof(float));
    }

    static Results device_results(ConvAlgo algo, const ConvShape& s, const Tensors& t, Activation act) {
        Results r(s);
        const cl::Buffer in = upload(t.in), w = upload(t.w), b = upload(t.b), d_out = upload(t.d_out);
        // Filled with NaN, so that a value the algorithm leaves unwritten fails.
        const std::vector<float> nan(std::max(s.input_size(), s.output_size()), NAN);
        const cl::Buffer out = upload(nan), d_in = upload(nan), d_w = upload(std::vector<float>(s.weight_size(), NAN)),
                         d_b = upload(std::vector<float>(size_t(s.out_c), NAN));
        conv_->forward(algo, s, in, w, b, out, act);
        conv_->backward_data(algo, s, d_out, w, d_in);
        conv_->backward_weights(algo, s, in, d_out, d_w, d_b);
        download(out, r.out);
        download(d_in, r.d_in);
        download(d_w, r.d_w);
        download(d_b, r.d_b);
        return r;
    }

    // kShapes[first .. first + count), with ReLU and tanh in turn.
    static void check(ConvAlgo algo, size_t count = kShapes.size(), size_t first = 0) {
        for (size_t i = first; i < first + count; ++i) {
            const ConvShape& s = kShapes[i];
            const Activation act = i % 2 ? Activation::Tanh : Activation::ReLU;
            const Tensors t(s);
            expect_close(device_results(algo, s, t, act), host_results(ConvAlgo::Direct, s, t, act),
                         std::string(algo_name(algo)) + " " + s.describe() + " " + activation_name(act));
        }
    }

    static std::shared_ptr<DeviceRuntime>* rt_;
    static OpenCLConv* conv_;
};
std::shared_ptr<DeviceRuntime>* OpenCLConvTest::rt_ = nullptr;
OpenCLConv* OpenCLConvTest::conv_ = nullptr;

TEST_F(OpenCLConvTest, DirectMatchesReference) { check(ConvAlgo::Direct); }

// Winograd F(4x4, 3x3) (inference): forward against the reference, on shapes with two GEMM tiles
// of maps and of tiles (136 maps, 150 tiles), tile counts a multiple of 4 or not, sizes that are
// not a multiple of 4, with and without padding; a shape it does not take is a one-line error.
TEST_F(OpenCLConvTest, WinogradForwardMatchesReference) {
    for (const ConvShape& s : {ConvShape{5, 16, 21, 19, 136, 3, 1, 1}, ConvShape{4, 20, 17, 13, 24, 3, 1, 0}}) {
        const Tensors t(s);
        const std::vector<float> filters = winograd_filters(t.w, s.out_c, s.in_c);
        ASSERT_TRUE(OpenCLConv::winograd_takes(s)) << s.describe();
        const cl::Buffer out = upload(std::vector<float>(s.output_size(), NAN));
        conv_->forward_winograd(s, upload(t.in), upload(filters), upload(t.b), out, Activation::Tanh);
        Results got(s), ref = host_results(ConvAlgo::Direct, s, t, Activation::Tanh);
        download(out, got.out);
        EXPECT_LT(max_relative_error(got.out.data(), ref.out.data(), ref.out.size()), kTolerance) << s.describe();
    }
    const ConvShape five{1, 16, 9, 9, 4, 5, 1, 2};
    EXPECT_FALSE(OpenCLConv::winograd_takes(five));
    const cl::Buffer any = upload(std::vector<float>(4096, 0.0f));
    EXPECT_THROW(conv_->forward_winograd(five, any, any, any, any), Error);
}
// Winograd through forward/backward_data (training): the filters transformed on the device, the
// input gradient by the flipped filters where its transposed shape qualifies (a multiple of 4
// output maps, at least 16), direct elsewhere; the weight gradient by im2col; ReLU and tanh.
TEST_F(OpenCLConvTest, WinogradTrainingPassesMatchReference) {
    for (const ConvShape& s : {ConvShape{5, 16, 21, 19, 136, 3, 1, 1}, ConvShape{4, 20, 17, 13, 24, 3, 1, 0},
                               ConvShape{3, 16, 9, 9, 6, 3, 1, 1}, ConvShape{2, 3, 9, 9, 16, 3, 1, 1}})
        for (const Activation act : {Activation::ReLU, Activation::Tanh}) {
            const Tensors t(s);
            expect_close(device_results(ConvAlgo::Winograd, s, t, act), host_results(ConvAlgo::Direct, s, t, act),
                         "winograd " + s.describe() + " " + activation_name(act));
        }
    EXPECT_EQ(parse_algo("winograd"), ConvAlgo::Winograd);
}
TEST_F(OpenCLConvTest, Im2colMatchesReference) { check(ConvAlgo::Im2col); }

#ifdef LENET5_HAVE_CLBLAST
// CLBlast compiles each routine's kernels on first use, seconds each on PoCL (about 20 s in all on
// 2 cores): one shape, the one with padding, stride 3 and a 5x5 kernel, takes every routine.
TEST_F(OpenCLConvTest, CLBlastMatchesReference) { check(ConvAlgo::CLBlast, 1, 3); }
#else
TEST_F(OpenCLConvTest, CLBlastIsAClearErrorWithoutIt) {
    const ConvShape s = kShapes[0];
    const cl::Buffer any = upload(std::vector<float>(s.input_size() + s.output_size() + s.weight_size()));
    EXPECT_THROW(conv_->forward(ConvAlgo::CLBlast, s, any, any, any, any), Error);
}
#endif

// One test (ctest runs each in its own process, which builds the kernels again): choose(), then a
// tuning cache read by a new OpenCLConv.
TEST_F(OpenCLConvTest, AutoTakesTheChosenOrTunedAlgorithm) {
    const ConvShape s = kShapes[0];
    EXPECT_EQ(conv_->resolve(ConvAlgo::Auto, s), conv_default_algo(s));
    conv_->choose(s, ConvAlgo::Im2col);
    EXPECT_EQ(conv_->resolve(ConvAlgo::Auto, s), ConvAlgo::Im2col);
    EXPECT_EQ(conv_->resolve(ConvAlgo::Direct, s), ConvAlgo::Direct);
    const Tensors t(s);
    expect_close(device_results(ConvAlgo::Auto, s, t, Activation::None),
                 host_results(ConvAlgo::Direct, s, t, Activation::None), "auto");
    EXPECT_THROW(device_results(ConvAlgo::Own, s, t, Activation::None), Error);  // the batch-level engine's
    conv_->choose(s, ConvAlgo::Direct);

    const std::string path = temp_path("auto.tsv");
    std::remove(path.c_str());
    const ConvShape tuned_shape = kShapes[1];
    const OpenCLDevice& device = (*rt_)->device();
    store_conv_tuning(path, {device.platform_name, device.name, device.driver, tuned_shape.describe(),
                             ConvAlgo::Im2col, 1.0});
    store_conv_tuning(path, {device.platform_name, device.name, device.driver, kShapes[3].describe(),
                             ConvAlgo::Own, 1.0});
    const char* before = std::getenv("LENET5_CONV_TUNING");
    const std::string saved = before ? before : "";
    setenv("LENET5_CONV_TUNING", path.c_str(), 1);
    const OpenCLConv tuned(*rt_);
    if (before) setenv("LENET5_CONV_TUNING", saved.c_str(), 1);
    else unsetenv("LENET5_CONV_TUNING");
    EXPECT_EQ(tuned.resolve(ConvAlgo::Auto, tuned_shape), ConvAlgo::Im2col);
    EXPECT_EQ(tuned.resolve(ConvAlgo::Auto, kShapes[2]), conv_default_algo(kShapes[2]));  // untuned: the default
    EXPECT_EQ(tuned.resolve(ConvAlgo::Auto, kShapes[3]), conv_default_algo(kShapes[3]));  // tuned own: the engine's, so the default
    std::remove(path.c_str());
}
#endif

}  // namespace
