// Every layer's backward pass, and the whole network's, against central finite
// differences of the forward pass (computed in double from float forwards).
#include <gtest/gtest.h>

#include "host_ops.h"
#include "test_support.h"

using namespace lenet5;

namespace {

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

    const float h = 1e-2f;
    auto numeric = [&](std::vector<float>& v, size_t i, const std::vector<float>& pp, const std::vector<float>& ii) {
        const float keep = v[i];
        v[i] = keep + h;
        const double up = probe_loss(l, pp, ii, r);
        v[i] = keep - h;
        const double down = probe_loss(l, pp, ii, r);
        v[i] = keep;
        return (up - down) / (2.0 * h);
    };
    auto expect_close = [&](double analytic, double num, const std::string& what) {
        EXPECT_NEAR(analytic, num, 2e-3 + 2e-2 * std::abs(num)) << l.name << " " << what;
    };
    // Every parameter of the layer (up to 400 spread evenly), and every input.
    const size_t n = l.weight_count + l.bias_count, stride = std::max<size_t>(1, n / 400);
    for (size_t i = l.weight_offset; i < l.weight_offset + n; i += stride)
        expect_close(grads[i], numeric(p, i, p, in), "param " + std::to_string(i - l.weight_offset));
    for (size_t i = 0; i < in.size(); i += std::max<size_t>(1, in.size() / 400))
        expect_close(din[i], numeric(in, i, p, in), "input " + std::to_string(i));
}

}  // namespace

TEST(Gradients, EveryLayerMatchesFiniteDifferences) {
    const Network net = lenet5_network();
    for (size_t k = 0; k < net.layers.size(); ++k) {
        SCOPED_TRACE(net.layers[k].name);
        check_layer(net, k);
    }
}

TEST(Gradients, WholeNetworkMatchesFiniteDifferences) {
    const Network net = lenet5_network();
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
    EXPECT_EQ(checked, 28);
}
