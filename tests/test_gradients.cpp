// Every layer's backward pass, and the whole network's, against central finite
// differences of the forward pass (computed in double from float forwards).
#include <gtest/gtest.h>

#include "host_ops.h"
#include "model/model_file.h"
#include "test_support.h"

using namespace lenet5;

namespace {

// ReLU and max pooling have kinks, where a finite difference that steps across one does not
// approximate the derivative.
bool has_kinks(const LayerSpec& l) { return l.activation == Activation::ReLU || l.kind == LayerKind::MaxPool; }

// Loss = sum_k r[k] * out[k] for fixed random r, so dLoss/dout = r.
double probe_loss(const LayerSpec& l, const std::vector<float>& p, const std::vector<float>& in,
                  const std::vector<float>& r) {
    std::vector<float> out(static_cast<size_t>(l.out.size()));
    cpu_ops().forward(l, p.data(), in.data(), out.data());
    double s = 0;
    for (size_t k = 0; k < out.size(); ++k) s += static_cast<double>(r[k]) * out[k];
    return s;
}

void check_layer(const Network& net, size_t layer_index) {
    const LayerSpec& l = net.layers[layer_index];
    Rng rng(99 + layer_index);
    std::vector<float> p = init_params(net, 5);
    for (size_t i = 0; i < l.bias_count; ++i) p[l.bias_offset + i] = rng.uniform(-0.5f, 0.5f);
    std::vector<float> in(static_cast<size_t>(l.in.size())), r(static_cast<size_t>(l.out.size()));
    for (auto& v : in) v = rng.uniform(-1, 1);
    for (auto& v : r) v = rng.uniform(-1, 1);

    std::vector<float> out(r.size()), dout = r, din(in.size()), grads(p.size(), 0.0f);
    cpu_ops().forward(l, p.data(), in.data(), out.data());
    cpu_ops().backward(l, p.data(), in.data(), out.data(), dout.data(), din.data(), grads.data());

    const bool kinks = has_kinks(l);
    const float h = kinks ? 1e-3f : 1e-2f;
    auto close = [](double a, double b) { return std::abs(a - b) <= 2e-3 + 2e-2 * std::abs(b); };
    int checked = 0, skipped = 0;
    // The central difference. With kinks, a point whose one-sided differences disagree has a
    // kink within h: it is skipped (at most 5% of the points may be); every other point must match.
    auto check = [&](double analytic, std::vector<float>& v, size_t i, const std::string& what) {
        const float keep = v[i];
        const double mid = probe_loss(l, p, in, r);
        v[i] = keep + h;
        const double up = probe_loss(l, p, in, r);
        v[i] = keep - h;
        const double down = probe_loss(l, p, in, r);
        v[i] = keep;
        const double num = (up - down) / (2.0 * h);
        if (kinks && !close((up - mid) / h, (mid - down) / h)) {
            ++skipped;
            return;
        }
        ++checked;
        EXPECT_TRUE(close(analytic, num)) << l.name << " " << what << ": analytic " << analytic << ", numeric " << num;
    };
    // Every parameter of the layer (up to 400 spread evenly), and every input.
    const size_t n = l.weight_count + l.bias_count, stride = std::max<size_t>(1, n / 400);
    for (size_t i = l.weight_offset; i < l.weight_offset + n; i += stride)
        check(grads[i], p, i, "param " + std::to_string(i - l.weight_offset));
    for (size_t i = 0; i < in.size(); i += std::max<size_t>(1, in.size() / 400))
        check(din[i], in, i, "input " + std::to_string(i));
    EXPECT_LE(skipped, (checked + skipped) / 20) << l.name << ": too many points near a kink";
}

// Every layer kind and activation of the layer set, with strides, padding, a connection
// table and overlapping pooling windows.
Network every_kind_network(Loss loss) {
    return NetworkBuilder("every_kind", {1, 28, 28})
        .conv("strided", 3, 3, Activation::ReLU, {}, 2, 1)                     // 3x14x14
        .conv("table", 4, 3, Activation::Sigmoid, {{1, 0, 0}, {0, 1, 1}, {1, 1, 0}, {0, 0, 1}}, 1, 1)  // 4x14x14
        .pool("max", LayerKind::MaxPool, 3, 2)                                 // 4x6x6
        .subsample("sub", 2, Activation::Tanh)                                 // 4x3x3
        .pool("avg", LayerKind::AvgPool, 2, 1, Activation::Tanh)               // 4x2x2
        .fully_connected("hidden", 7, Activation::Sigmoid)
        .fully_connected("out", 10, loss == Loss::SquaredError ? Activation::Sigmoid : Activation::None)
        .loss(loss)
        .build();
}

}  // namespace

TEST(Gradients, EveryLayerMatchesFiniteDifferences) {
    for (const Network& net : {lenet5_network(), every_kind_network(Loss::SoftmaxCrossEntropy)}) {
        for (size_t k = 0; k < net.layers.size(); ++k) {
            SCOPED_TRACE(net.name + " " + net.layers[k].name);
            check_layer(net, k);
        }
    }
}

namespace {

// The mean loss of three random images through the whole network, against finite differences.
void check_network(const Network& net) {
    SCOPED_TRACE(net.name + " with loss " + loss_name(net.loss));
    const Dataset data = random_dataset(3, 11);
    HostEngine e(net, "cpu", cpu_ops(), 1);
    e.upload(Split::Train, data);
    e.set_order({0, 1, 2});
    std::vector<float> p = init_params(net, 3);
    e.set_params(p);
    e.forward(Split::Train, 0, 3);
    e.backward();
    const std::vector<float> g = e.gradients();

    auto mean_loss = [&](const std::vector<float>& params) {
        e.set_params(params);
        e.take_counters();
        e.forward(Split::Train, 0, 3);
        const Counters c = e.take_counters();
        return c.loss_sum / 3.0;
    };
    const float h = 1e-2f;
    int checked = 0;
    for (const auto& l : net.layers) {
        if (!l.weight_count) continue;  // pooling
        // A handful of weights and a bias per layer.
        for (size_t i : {l.weight_offset, l.weight_offset + l.weight_count / 2, l.weight_offset + l.weight_count - 1,
                         l.bias_offset}) {
            std::vector<float> q = p;
            q[i] = p[i] + h;
            const double up = mean_loss(q);
            q[i] = p[i] - h;
            const double down = mean_loss(q);
            const double num = (up - down) / (2.0 * h);
            EXPECT_NEAR(g[i], num, 1e-3 + 3e-2 * std::abs(num)) << l.name << " param " << i;
            ++checked;
        }
    }
    EXPECT_GT(checked, 0);
}

}  // namespace

TEST(Gradients, WholeNetworkMatchesFiniteDifferences) {
    check_network(lenet5_network());
    check_network(every_kind_network(Loss::SoftmaxCrossEntropy));
    check_network(every_kind_network(Loss::SquaredError));
    check_network(load_model("mlp").net);
}
