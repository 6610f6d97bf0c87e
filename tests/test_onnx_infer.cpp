// lenet5 infer (issues 13 and 22): the ONNX reader's shapes and errors, the .npy files, ONNX files as
// the Network every engine runs (Engine::infer) on every variant against the scalar `cpu` reference
// on hand-made graphs, and the small VGG-shaped model of tests/data/onnx
// (bench/onnx/make_onnx_test_data.sh) against onnxruntime's and PyTorch's outputs.
#ifdef LENET5_HAVE_ONNX
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "cli_runner.h"
#include "common/error.h"
#include "engine/engine_factory.h"
#include "io/npy.h"
#include "io/onnx_import.h"
#include "io/onnx_reader.h"
#include "common/rng.h"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;

const std::string kData = LENET5_SOURCE_DIR "/tests/data/onnx/";

// A model being built: one float input N x dims, nodes, initializers.
struct ModelBuilder {
    onnx::ModelProto m;
    onnx::GraphProto* g = m.mutable_graph();
    Rng rng{5};

    explicit ModelBuilder(const std::vector<int64_t>& dims, const std::string& input = "x") {
        m.set_ir_version(8);
        m.add_opset_import()->set_version(13);
        auto* in = g->add_input();
        in->set_name(input);
        auto* t = in->mutable_type()->mutable_tensor_type();
        t->set_elem_type(onnx::TensorProto::FLOAT);
        t->mutable_shape()->add_dim()->set_dim_param("N");
        for (const int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
    }
    onnx::TensorProto* weight(const std::string& name, const std::vector<int64_t>& dims, float scale = 0.3f) {
        auto* t = g->add_initializer();
        t->set_name(name);
        t->set_data_type(onnx::TensorProto::FLOAT);
        int64_t n = 1;
        for (const int64_t d : dims) t->add_dims(d), n *= d;
        for (int64_t i = 0; i < n; ++i) t->add_float_data(rng.uniform(-scale, scale));
        return t;
    }
    void ints(const std::string& name, const std::vector<int64_t>& v) {
        auto* t = g->add_initializer();
        t->set_name(name);
        t->set_data_type(onnx::TensorProto::INT64);
        t->add_dims(int64_t(v.size()));
        for (const int64_t x : v) t->add_int64_data(x);
    }
    onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::string& out) {
        auto* n = g->add_node();
        n->set_op_type(op);
        n->set_name(out + "_node");
        for (const auto& i : in) n->add_input(i);
        n->add_output(out);
        return n;
    }
    static void attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
        auto* a = n->add_attribute();
        a->set_name(name);
        a->set_type(onnx::AttributeProto::INTS);
        for (const int64_t x : v) a->add_ints(x);
    }
    static void attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
        auto* a = n->add_attribute();
        a->set_name(name);
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(v);
    }
    std::string bytes(const std::string& output) {
        g->add_output()->set_name(output);
        return m.SerializeAsString();
    }
};

std::string error_of(const std::string& bytes, const std::string& dir = "") {
    try {
        parse_onnx(bytes, "m.onnx", dir);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

// An ONNX file's network on `variant`'s engine, its weights set, planned for `batch` inputs.
std::unique_ptr<Engine> engine(const Model& m, const std::string& variant, int batch) {
    EngineRequest r;
    r.variant = variant;
    r.batch = batch;
    r.inference = true;
    auto e = make_engine(m.net, r);
    e->set_params(m.weights);
    return e;
}

// `count` inputs through `e` in runs of `batch`.
std::vector<float> run(const Model& m, Engine& e, const std::vector<float>& x, int count, int batch) {
    const size_t in = size_t(m.net.input.size()), out = size_t(m.net.layers.back().out.size());
    std::vector<float> y(out * count);
    for (int s = 0; s < count; s += batch) e.infer(x.data() + s * in, std::min(batch, count - s), y.data() + s * out, nullptr);
    return y;
}

Model imported(const std::string& bytes) { return import_onnx(parse_onnx(bytes, "m.onnx", ""), "m.onnx"); }

std::string import_error_of(const std::string& bytes) {
    try {
        imported(bytes);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

std::vector<float> random_images(const Network& net, int count) {
    Rng rng(11);
    std::vector<float> x(size_t(net.input.size()) * count);
    for (float& v : x) v = rng.uniform(-1.0f, 1.0f);
    return x;
}

// ||a - b|| / ||b|| of each sample's output vector, the largest.
double worst_relative(const std::vector<float>& a, const std::vector<float>& b, size_t per) {
    double worst = 0;
    for (size_t s = 0; s * per < b.size(); ++s) {
        double d = 0, n = 0;
        for (size_t i = s * per; i < (s + 1) * per; ++i) d += double(a[i] - b[i]) * (a[i] - b[i]), n += double(b[i]) * b[i];
        worst = std::max(worst, std::sqrt(d / std::max(n, 1e-30)));
    }
    return worst;
}

// Every variant this build has but the reference.
std::vector<std::string> variants() {
    std::vector<std::string> v = built_variants();
    v.erase(std::find(v.begin(), v.end(), "cpu"));
    return v;
}

// Every operator kind the reader takes, in one graph: padded and strided convolutions (of 3 and
// of 16 input maps, which omp computes two ways), both
// poolings (padded average pooling with and without the padding counted), Add of two
// activations and of a broadcast constant, Sigmoid, Tanh, Reshape, MatMul, Gemm with transB,
// Dropout, Identity and Softmax.
std::string every_op_model() {
    ModelBuilder b({3, 9, 9});
    b.weight("w1", {16, 3, 3, 3});
    b.weight("b1", {16});
    auto* c1 = b.node("Conv", {"x", "w1", "b1"}, "c1");
    ModelBuilder::attr(c1, "pads", {1, 1, 1, 1});
    b.node("Relu", {"c1"}, "r0");
    b.weight("w1b", {16, 16, 3, 3}, 0.1f);  // stride 1, 16 maps: omp's convolution without im2col
    b.weight("b1b", {16});
    auto* c1b = b.node("Conv", {"r0", "w1b", "b1b"}, "c1b");
    ModelBuilder::attr(c1b, "pads", {1, 1, 1, 1});
    b.node("Relu", {"c1b"}, "r1");
    b.weight("w2", {4, 16, 3, 3}, 0.1f);
    auto* c2 = b.node("Conv", {"r1", "w2"}, "c2");
    ModelBuilder::attr(c2, "pads", {1, 1, 1, 1});
    ModelBuilder::attr(c2, "strides", {2, 2});
    b.node("Sigmoid", {"c2"}, "s2");                  // 4 x 5 x 5
    auto* p1 = b.node("AveragePool", {"s2"}, "p1");   // 4 x 3 x 3
    ModelBuilder::attr(p1, "kernel_shape", {3, 3});
    ModelBuilder::attr(p1, "strides", {2, 2});
    ModelBuilder::attr(p1, "pads", {1, 1, 1, 1});
    auto* p2 = b.node("AveragePool", {"s2"}, "p2");
    ModelBuilder::attr(p2, "kernel_shape", {3, 3});
    ModelBuilder::attr(p2, "strides", {2, 2});
    ModelBuilder::attr(p2, "pads", {1, 1, 1, 1});
    ModelBuilder::attr(p2, "count_include_pad", 1);
    b.node("Add", {"p1", "p2"}, "a1");
    b.weight("bias_map", {4, 1, 1});
    b.node("Add", {"a1", "bias_map"}, "a2");
    auto* m1 = b.node("MaxPool", {"a2"}, "m1");       // 4 x 2 x 2
    ModelBuilder::attr(m1, "kernel_shape", {2, 2});
    ModelBuilder::attr(m1, "pads", {0, 0, 1, 1});
    ModelBuilder::attr(m1, "strides", {2, 2});
    b.ints("shape", {0, -1});
    b.node("Reshape", {"m1", "shape"}, "f1");         // 16
    b.weight("mm", {16, 12});
    b.node("MatMul", {"f1", "mm"}, "d1");
    b.node("Tanh", {"d1"}, "t1");
    b.node("Dropout", {"t1"}, "t2");
    b.weight("gw", {5, 12});
    b.weight("gb", {5});
    auto* ge = b.node("Gemm", {"t2", "gw", "gb"}, "d2");
    ModelBuilder::attr(ge, "transB", 1);
    b.node("Identity", {"d2"}, "i1");
    b.node("Softmax", {"i1"}, "y");
    return b.bytes("y");
}

TEST(OnnxInfer, ReaderInfersEveryShapeAndFusesActivations) {
    const OnnxGraph g = parse_onnx(every_op_model(), "m.onnx", "");
    EXPECT_EQ(g.values[g.output].dims, (std::vector<int64_t>{5}));
    std::vector<std::string> kinds;
    for (const OnnxOp& op : g.ops) kinds.push_back(op.op_type + "/" + act_name(op.act));
    // Relu and Sigmoid fold into their convolutions, Tanh into the MatMul.
    EXPECT_EQ(kinds, (std::vector<std::string>{"Conv/relu", "Conv/relu", "Conv/sigmoid", "AveragePool/none", "AveragePool/none",
                                               "Add/none", "Add/none", "MaxPool/none", "Reshape/none", "MatMul/tanh",
                                               "Dropout/none", "Gemm/none", "Softmax/none"}));
    // The reader reads it all; a Network (a chain of layers) cannot hold its padded poolings and branches.
    EXPECT_EQ(import_error_of(every_op_model()),
              "m.onnx: node 'p1_node' (AveragePool): lenet5 takes square, unpadded pooling windows with equal strides");
}

// Every operator a Network takes, in one chain: input scaling, padded, strided and grouped
// convolutions (Winograd's 16 maps among them), a per-map Div folded into its Conv, overlapping max
// pooling, average pooling, Reshape, MatMul, Tanh, Dropout, Gemm with transB, Identity, Softmax.
std::string chain_model() {
    ModelBuilder b({3, 9, 9});
    b.weight("half", {})->set_float_data(0, 0.5f);
    b.node("Mul", {"x", "half"}, "m0");
    b.weight("quarter", {})->set_float_data(0, 0.25f);
    b.node("Add", {"m0", "quarter"}, "a0");
    b.weight("w1", {16, 3, 3, 3});
    b.weight("b1", {16});
    ModelBuilder::attr(b.node("Conv", {"a0", "w1", "b1"}, "c1"), "pads", {1, 1, 1, 1});
    b.node("Relu", {"c1"}, "r0");
    b.weight("w1b", {16, 16, 3, 3}, 0.1f);
    b.weight("b1b", {16});
    ModelBuilder::attr(b.node("Conv", {"r0", "w1b", "b1b"}, "c1b"), "pads", {1, 1, 1, 1});
    b.node("Relu", {"c1b"}, "r1");
    b.weight("wg", {8, 8, 3, 3}, 0.1f);  // 2 groups of 8 maps
    auto* cg = b.node("Conv", {"r1", "wg"}, "cg");
    ModelBuilder::attr(cg, "pads", {1, 1, 1, 1});
    ModelBuilder::attr(cg, "group", 2);
    b.weight("per_map", {8, 1, 1});
    b.node("Div", {"cg", "per_map"}, "dg");
    b.node("Tanh", {"dg"}, "tg");
    b.weight("w2", {4, 8, 3, 3}, 0.1f);
    auto* c2 = b.node("Conv", {"tg", "w2"}, "c2");
    ModelBuilder::attr(c2, "pads", {1, 1, 1, 1});
    ModelBuilder::attr(c2, "strides", {2, 2});
    b.node("Sigmoid", {"c2"}, "s2");  // 4 x 5 x 5
    auto* m1 = b.node("MaxPool", {"s2"}, "m1");  // 4 x 4 x 4
    ModelBuilder::attr(m1, "kernel_shape", {2, 2});
    auto* p1 = b.node("AveragePool", {"m1"}, "p1");  // 4 x 2 x 2
    ModelBuilder::attr(p1, "kernel_shape", {2, 2});
    ModelBuilder::attr(p1, "strides", {2, 2});
    b.ints("shape", {0, -1});
    b.node("Reshape", {"p1", "shape"}, "f1");  // 16
    b.weight("mm", {16, 12});
    b.node("MatMul", {"f1", "mm"}, "d1");
    b.node("Tanh", {"d1"}, "t1");
    b.node("Dropout", {"t1"}, "t2");
    b.weight("gw", {5, 12});
    b.weight("gb", {5});
    ModelBuilder::attr(b.node("Gemm", {"t2", "gw", "gb"}, "d2"), "transB", 1);
    b.node("Identity", {"d2"}, "i1");
    b.node("Softmax", {"i1"}, "y");
    return b.bytes("y");
}

TEST(OnnxInfer, EveryVariantMatchesCpuOnEveryOperatorOfAChain) {
    const Model m = imported(chain_model());
    EXPECT_TRUE(m.outputs_softmax);
    EXPECT_TRUE(m.net.scaling.scale == 0.5f && m.net.scaling.shift == 0.25f);
    std::vector<std::string> kinds;
    for (const LayerSpec& l : m.net.layers) kinds.push_back(std::string(kind_name(l.kind)) + "/" + activation_name(l.activation));
    EXPECT_EQ(kinds, (std::vector<std::string>{"conv/relu", "conv/relu", "conv/tanh", "conv/sigmoid", "maxpool/none",
                                               "avgpool/none", "fc/tanh", "dropout/none", "fc/none"}));
    EXPECT_EQ(m.net.layers[2].connections(), 8 * 8);  // the groups as a connection table
    const std::vector<float> x = random_images(m.net, 5);
    const std::vector<float> ref = run(m, *engine(m, "cpu", 5), x, 5, 5);
    for (const auto& v : variants()) {
        const auto e = engine(m, v, 5);  // runs of fewer inputs than it was planned for too
        for (const int batch : {1, 2, 4, 5}) {  // 4: Winograd tile counts that are multiples of 4 (float4 loads)
            SCOPED_TRACE(v + " at batch " + std::to_string(batch));
            EXPECT_LT(worst_relative(run(m, *e, x, 5, batch), ref, 5), 1e-5);
        }
    }
}

// What our own export and PyTorch's write around the layers: arithmetic with constants (Mul, and
// Sub with the constant first), a constant Pad of the image, a per-map Div after the Conv.
std::string arithmetic_model(float shift) {
    ModelBuilder b({1, 5, 5});
    b.weight("two", {});
    b.g->mutable_initializer(0)->set_float_data(0, 2.0f);
    b.node("Mul", {"x", "two"}, "m1");
    b.weight("shift", {});
    b.g->mutable_initializer(1)->set_float_data(0, shift);
    b.node("Sub", {"shift", "m1"}, "s1");  // shift - 2x
    b.weight("pads_value", {});
    b.g->mutable_initializer(2)->set_float_data(0, shift);  // the background: a 0 pixel's value
    b.ints("pads", {0, 0, 1, 1, 0, 0, 2, 2});
    b.node("Pad", {"s1", "pads", "pads_value"}, "p1");  // 1 x 8 x 8, the image one row and column off centre
    b.weight("w", {2, 1, 3, 3});
    b.weight("bias", {2});
    b.node("Conv", {"p1", "w", "bias"}, "c1");  // 2 x 6 x 6
    b.weight("scale", {2, 1, 1});
    b.node("Div", {"c1", "scale"}, "d1");  // per map: folds into the Conv
    b.node("Tanh", {"d1"}, "y");
    return b.bytes("y");
}

// Through the command line, so that infer's own scaling and placing of the input are checked too.
TEST(OnnxInfer, ArithmeticAndPadFoldAndMatchAHandComputedSampleOnEveryVariant) {
    const float shift = 0.375f;
    const std::string bytes = arithmetic_model(shift);
    const OnnxGraph g = parse_onnx(bytes, "m.onnx", "");
    std::vector<std::string> kinds;
    for (const OnnxOp& op : g.ops) kinds.push_back(op.op_type + "/" + act_name(op.act));
    EXPECT_EQ(kinds, (std::vector<std::string>{"Mul/none", "Pad/none", "Conv/tanh"}));  // Mul and Sub as one

    onnx::ModelProto m;
    ASSERT_TRUE(m.ParseFromString(bytes));
    std::map<std::string, std::vector<float>> w;
    for (const auto& t : m.graph().initializer()) w[t.name()] = {t.float_data().begin(), t.float_data().end()};
    Rng rng(11);
    std::vector<float> x(25);
    for (float& v : x) v = rng.uniform(0.0f, 1.0f);
    auto padded = [&](int y, int xx) {  // p1[0][y][xx]
        const int iy = y - 1, ix = xx - 1;
        if (iy < 0 || iy >= 5 || ix < 0 || ix >= 5) return shift;
        return shift - 2.0f * x[size_t(iy * 5 + ix)];
    };
    std::vector<float> ref;
    for (int c = 0; c < 2; ++c)
        for (int y = 0; y < 6; ++y)
            for (int xx = 0; xx < 6; ++xx) {
                float sum = w["bias"][size_t(c)];
                for (int ky = 0; ky < 3; ++ky)
                    for (int kx = 0; kx < 3; ++kx) sum += w["w"][size_t((c * 3 + ky) * 3 + kx)] * padded(y + ky, xx + kx);
                ref.push_back(std::tanh(sum / w["scale"][size_t(c)]));
            }

    const fs::path dir = fs::path(::testing::TempDir()) / ("lenet5_arith_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "m.onnx", std::ios::binary) << bytes;
    NpyArray in;
    in.shape = {1, 1, 5, 5};
    in.data = x;
    std::ofstream(dir / "x.npy", std::ios::binary) << npy_bytes(in);
    for (const std::string& v : built_variants()) {
        SCOPED_TRACE(v);
        const auto r = test::run_cli("infer --onnx " + (dir / "m.onnx").string() + " --input " + (dir / "x.npy").string() +
                                     " --output " + (dir / "y.npy").string() + " --variant " + v);
        ASSERT_EQ(r.status, 0) << r.err;
        const NpyArray y = read_npy((dir / "y.npy").string());
        EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 2, 6, 6}));
        EXPECT_LT(worst_relative(y.data, ref, ref.size()), 1e-5);
    }
    fs::remove_all(dir);
}

TEST(OnnxInfer, ArithmeticAndPadItCannotRepresentAreOneLineErrors) {
    {
        ModelBuilder b({4});
        b.node("Relu", {"x"}, "r");
        b.node("Sub", {"x", "r"}, "y");
        EXPECT_EQ(error_of(b.bytes("y")), "m.onnx: node 'y_node' (Sub): of two activations is not supported (only Add is)");
    }
    {
        ModelBuilder b({4});
        b.weight("w", {4});
        b.node("Div", {"w", "x"}, "y");
        EXPECT_EQ(error_of(b.bytes("y")), "m.onnx: node 'y_node' (Div): divides a constant by an activation, which is not supported");
    }
    {
        ModelBuilder b({1, 4, 4});
        b.ints("pads", {0, 1, 0, 0, 0, 0, 0, 0});
        b.node("Pad", {"x", "pads"}, "y");
        EXPECT_EQ(error_of(b.bytes("y")), "m.onnx: node 'y_node' (Pad): pads the batch or the channels, which is not supported");
        ModelBuilder c({1, 4, 4});
        c.ints("pads", {0, 0, 1, 1, 0, 0, 1, 1});
        auto* p = c.node("Pad", {"x", "pads"}, "y");
        auto* a = p->add_attribute();
        a->set_name("mode");
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s("reflect");
        EXPECT_EQ(error_of(c.bytes("y")), "m.onnx: node 'y_node' (Pad): mode 'reflect' is not supported (only constant)");
    }
    {
        ModelBuilder b({4, 5, 5});
        b.weight("w", {6, 3, 3, 3});
        auto* c = b.node("Conv", {"x", "w"}, "y");
        ModelBuilder::attr(c, "group", 2);
        EXPECT_EQ(error_of(b.bytes("y")), "m.onnx: node 'y_node' (Conv): weight 6x3x3x3 in 2 group(s) does not take the input's 4 maps");
    }
    // What the reader takes but a Network cannot hold: scaling per map, arithmetic between layers.
    {
        ModelBuilder b({2, 5, 5});
        b.weight("per_map", {2, 1, 1});
        b.node("Mul", {"x", "per_map"}, "m");
        b.weight("w", {3, 2, 3, 3});
        b.node("Conv", {"m", "w"}, "y");
        EXPECT_EQ(import_error_of(b.bytes("y")),
                  "m.onnx: node 'm_node' (Mul): scales the input by position or map; lenet5 takes one factor and one "
                  "offset for every value");
        ModelBuilder c({2, 5, 5});
        c.weight("w", {3, 2, 3, 3});
        c.node("Conv", {"x", "w"}, "c1");
        c.node("Tanh", {"c1"}, "t");
        c.weight("row", {3});
        c.node("Add", {"t", "row"}, "y");  // one value per column: cannot fold
        EXPECT_NE(import_error_of(c.bytes("y")).find("m.onnx: node 'y_node' (Add): lenet5 takes arithmetic with constants only "
                                                     "on the input"),
                  std::string::npos);
    }
}

// omp's and avx's convolution paths on shapes the chain model is too small for: Winograd (3x3,
// stride 1) over several blocks of tiles, blocks ending mid tile row, output sizes that are not a
// multiple of the 4x4 tile; then a 5x5 stride-1 convolution (a GEMM per tap).
TEST(OnnxInfer, HostConvolutionPathsMatchCpu) {
    ModelBuilder b({64, 43, 43});
    b.weight("w1", {48, 64, 3, 3}, 0.05f);
    b.weight("b1", {48});
    ModelBuilder::attr(b.node("Conv", {"x", "w1", "b1"}, "c1"), "pads", {1, 1, 1, 1});  // 48 x 43 x 43: 11 x 11 tiles
    b.node("Relu", {"c1"}, "r1");
    b.weight("w2", {16, 48, 5, 5}, 0.05f);
    ModelBuilder::attr(b.node("Conv", {"r1", "w2"}, "y"), "pads", {2, 2, 2, 2});
    const Model m = imported(b.bytes("y"));
    ASSERT_EQ(m.net.layers.back().out.size(), 16 * 43 * 43);
    const std::vector<float> x = random_images(m.net, 2);
    const std::vector<float> ref = run(m, *engine(m, "cpu", 2), x, 2, 2);
    for (const std::string& v : variants()) {
        if (!is_host_variant(v)) continue;
        for (const int batch : {1, 2}) {
            const std::vector<float> y = run(m, *engine(m, v, batch), x, 2, batch);
            EXPECT_LT(worst_relative(y, ref, 16 * 43 * 43), 1e-5) << v << " at batch " << batch;
        }
    }
}

NpyArray load(const std::string& name) { return read_npy(kData + name); }

// The committed small model against onnxruntime's and PyTorch's outputs on the same images.
TEST(OnnxInfer, SmallVggMatchesOnnxruntimeAndPytorchOnEveryVariant) {
    const Model m = read_onnx_model(kData + "small.onnx");
    const NpyArray x = load("small_x.npy"), ort = load("small_y_ort.npy"), torch = load("small_y_torch.npy");
    const int n = int(x.shape[0]);
    ASSERT_EQ(ort.shape, (std::vector<int64_t>{n, 10}));
    ASSERT_TRUE(m.net.scaling.is_identity());  // the file's input is the network's
    for (const std::string& v : built_variants()) {
        const auto e = engine(m, v, n);
        for (const int batch : {1, n}) {
            SCOPED_TRACE(v + " at batch " + std::to_string(batch));
            const std::vector<float> y = run(m, *e, x.data, n, batch);
            EXPECT_LT(worst_relative(y, ort.data, 10), 1e-4);
            EXPECT_LT(worst_relative(y, torch.data, 10), 1e-4);
            for (int s = 0; s < n; ++s) {
                auto top = [&](const std::vector<float>& o) { return std::max_element(o.begin() + s * 10, o.begin() + s * 10 + 10) - o.begin(); };
                EXPECT_EQ(top(y), top(ort.data)) << "image " << s;
            }
        }
    }
}

TEST(OnnxInfer, MalformedModelsGetOneLineErrorsNamingNodeAndOperator) {
    {  // an unsupported operator
        ModelBuilder b({4});
        b.node("Relu", {"x"}, "r");
        b.node("LeakyRelu", {"r"}, "y");
        EXPECT_EQ(error_of(b.bytes("y")), "m.onnx: node 'y_node' (LeakyRelu): operator 'LeakyRelu' is not supported");
    }
    {  // shapes that do not chain: 3 input maps, a weight for 2
        ModelBuilder b({3, 8, 8});
        b.weight("w", {4, 2, 3, 3});
        b.node("Conv", {"x", "w"}, "y");
        EXPECT_EQ(error_of(b.bytes("y")), "m.onnx: node 'y_node' (Conv): weight 4x2x3x3 in 1 group(s) does not take the input's 3 maps");
    }
    {  // a window larger than its input
        ModelBuilder b({3, 2, 2});
        auto* p = b.node("MaxPool", {"x"}, "y");
        ModelBuilder::attr(p, "kernel_shape", {3, 3});
        EXPECT_NE(error_of(b.bytes("y")).find("window does not fit the 3x2x2 input"), std::string::npos);
    }
    {  // absurd dimensions
        ModelBuilder b({3, 1 << 30, 8});
        b.node("Relu", {"x"}, "y");
        EXPECT_EQ(error_of(b.bytes("y")), "m.onnx: input 'x' would have dimension 1073741824 (3x1073741824x8)");
    }
    {  // wrong types: an int input, a string attribute where ints belong
        ModelBuilder b({4});
        b.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT32);
        b.node("Relu", {"x"}, "y");
        EXPECT_EQ(error_of(b.bytes("y")), "m.onnx: input 'x' is not a float tensor");
        ModelBuilder c({3, 4, 4});
        auto* p = c.node("MaxPool", {"x"}, "y");
        auto* a = p->add_attribute();
        a->set_name("kernel_shape");
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s("2x2");
        EXPECT_EQ(error_of(c.bytes("y")), "m.onnx: node 'y_node' (MaxPool): attribute 'kernel_shape' is not a list of ints");
    }
    {  // an initializer whose data does not fill its dims; a node reading a tensor nobody made
        ModelBuilder b({4});
        b.weight("w", {3, 4})->add_float_data(1.0f);
        b.node("MatMul", {"x", "w"}, "y");
        EXPECT_EQ(error_of(b.bytes("y")), "m.onnx: initializer 'w' (3x4) has 13 values");
        ModelBuilder c({4});
        c.node("Relu", {"nothing"}, "y");
        EXPECT_EQ(error_of(c.bytes("y")), "m.onnx: node 'y_node' (Relu): input 'nothing' is not computed by any node before it");
    }
    {  // Reshape with allowzero=1: fine without 0 entries, refused with one
        for (const int64_t first : {int64_t{-1}, int64_t{0}}) {
            ModelBuilder b({2, 3});
            b.ints("shape", {first, 6});
            auto* r = b.node("Reshape", {"x", "shape"}, "y");
            ModelBuilder::attr(r, "allowzero", 1);
            EXPECT_EQ(error_of(b.bytes("y")),
                      first == 0 ? "m.onnx: node 'y_node' (Reshape): allowzero=1 with a 0 entry (an empty tensor) is not supported"
                                 : "(no error)");
        }
    }
    {  // a node name with a line break and a bell in it: written as \xNN, the message stays one line
        ModelBuilder b({4});
        auto* p = b.node("LeakyRelu", {"x"}, "y");
        p->set_name("bad\nname\a");
        EXPECT_EQ(error_of(b.bytes("y")), "m.onnx: node 'bad\\x0aname\\x07' (LeakyRelu): operator 'LeakyRelu' is not supported");
    }
    // Not a model at all, and a model cut short.
    EXPECT_EQ(error_of("hello"), "m.onnx: not an ONNX model (the protobuf does not parse)");
    const std::string whole = every_op_model();
    for (const size_t cut : {whole.size() / 3, whole.size() - 7}) {
        const std::string e = error_of(whole.substr(0, cut));
        EXPECT_EQ(e.rfind("m.onnx: ", 0), 0u) << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    }
}

TEST(OnnxInfer, ExternalDataIsReadFromTheModelsFolderOnly) {
    const fs::path dir = fs::path(::testing::TempDir()) / "lenet5_onnx_external";
    fs::create_directories(dir / "sub");
    ModelBuilder b({6});
    auto* w = b.weight("w", {6, 3});
    const std::vector<float> values(w->float_data().begin(), w->float_data().end());
    w->clear_float_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* loc = w->add_external_data();
    loc->set_key("location");
    auto* off = w->add_external_data();
    off->set_key("offset");
    off->set_value("8");
    {
        std::ofstream f(dir / "sub" / "w.bin", std::ios::binary);
        f.write("padding!", 8);
        f.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size() * 4));
    }
    b.node("MatMul", {"x", "w"}, "y");
    b.g->add_output()->set_name("y");
    auto bytes_with = [&](const std::string& location) {
        loc->set_value(location);
        return b.m.SerializeAsString();
    };
    const OnnxGraph g = parse_onnx(bytes_with("sub/w.bin"), "m.onnx", dir.string());
    EXPECT_FLOAT_EQ(g.ops[0].weight[1 * 6 + 2], values[2 * 3 + 1]);  // stored [in][out], read as [out][in]
    EXPECT_NE(error_of(bytes_with("../w.bin"), dir.string()).find("leaves the model's folder"), std::string::npos);
    EXPECT_NE(error_of(bytes_with("/etc/passwd"), dir.string()).find("is absolute"), std::string::npos);
    EXPECT_NE(error_of(bytes_with("sub/missing.bin"), dir.string()).find("cannot open external data"), std::string::npos);
    fs::create_symlink("/etc", dir / "escape");
    EXPECT_NE(error_of(bytes_with("escape/passwd"), dir.string()).find("leaves the model's folder"), std::string::npos);
    fs::remove_all(dir);
}

TEST(OnnxInfer, NpyRoundTripsAndRefusesWhatItDoesNotRead) {
    NpyArray a;
    a.shape = {2, 3};
    a.data = {1, 2, 3, 4, 5, 6.5f};
    const std::string bytes = npy_bytes(a);
    EXPECT_EQ((10 + bytes.size() - 24) % 64, 10u);  // header padded to 64
    const NpyArray b = parse_npy(bytes, "a.npy");
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(b.data, a.data);
    auto error = [](const std::string& s) {
        try {
            parse_npy(s, "a.npy");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    std::string f8 = bytes;
    f8.replace(f8.find("<f4"), 3, "<f8");
    EXPECT_EQ(error(f8), "a.npy: .npy dtype '<f8' is not float32 ('<f4'); convert with .astype('<f4')");
    std::string fortran = bytes;
    fortran.replace(fortran.find("False"), 5, "True ");
    EXPECT_EQ(error(fortran), "a.npy: .npy array is in Fortran order; save it in C order");
    EXPECT_EQ(error(bytes.substr(0, bytes.size() - 4)), "a.npy: .npy data has 20 bytes, its shape needs 24");
    EXPECT_EQ(error("PK\x03\x04 zip"), "a.npy: not a NumPy .npy file");
    std::string huge = bytes;
    huge.replace(huge.find("(2, 3)"), 6, "(99999999999, 99999)");
    EXPECT_EQ(error(huge.substr(0, 10) + huge.substr(10)).find("absurdly large") != std::string::npos, true);
}

// A FIFO given as --input or as the model would block the read forever: both readers refuse it.
TEST(OnnxInfer, RefusesAFifoInsteadOfHanging) {
    const std::string fifo = (std::filesystem::temp_directory_path() / ("lenet5_fifo_" + std::to_string(::getpid()))).string();
    std::filesystem::remove(fifo);
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_THROW(read_npy(fifo), Error);
    EXPECT_THROW(read_onnx(fifo), Error);
    std::filesystem::remove(fifo);
}

TEST(OnnxInfer, CommandWritesOutputsAndSummary) {
    const std::string out = ::testing::TempDir() + "lenet5_onnx_y.npy", json = ::testing::TempDir() + "lenet5_onnx.json";
    const auto r = test::run_cli("infer --onnx " + kData + "small.onnx --input " + kData +
                                 "small_x.npy --variant omp --batch 2 --output " + out + " --json " + json);
    ASSERT_EQ(r.status, 0) << r.err;
    const NpyArray y = read_npy(out), ort = load("small_y_ort.npy");
    EXPECT_LT(worst_relative(y.data, ort.data, 10), 1e-4);
    EXPECT_NE(r.out.find("4 images at batch 2"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("top-1 of the first: 2 4 2 2"), std::string::npos) << r.out;
    EXPECT_NE(test::slurp(json).find("\"layers\""), std::string::npos);
    const auto bad = test::run_cli("infer --onnx " + kData + "small.onnx --input " + kData + "small_y_ort.npy");
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(bad.err.find("is not N x 3 x 32 x 32"), std::string::npos) << bad.err;
    EXPECT_EQ(test::run_cli("infer --onnx " + kData + "small.onnx").status, 2);  // neither --input nor --random
    EXPECT_EQ(test::run_cli("infer --onnx m.onnx --random 2 --variant sse").status, 2);
    EXPECT_EQ(test::run_cli("infer --onnx m.onnx --model m.ck --random 2").status, 2);  // two models
    std::remove(out.c_str());
    std::remove(json.c_str());
}

}  // namespace
}  // namespace lenet5
#endif
