// The network description: LeNet-5's shapes and parameter counts as in the paper.
#include <gtest/gtest.h>
#include <cmath>

#include "model/network.h"

using namespace lenet5;

TEST(Network, Lenet5ShapesAndParameterCountsMatchThePaper) {
    const Network net = lenet5_network();
    ASSERT_EQ(net.layers.size(), 7u);
    const int maps[] = {6, 6, 16, 16, 120, 84, 10};
    const int sides[] = {28, 14, 10, 5, 1, 1, 1};
    // LeCun et al. 1998: C1 156, S2 12, C3 1516, S4 32, C5 48120, F6 10164, output 84*10+10.
    const size_t params[] = {156, 12, 1516, 32, 48120, 10164, 850};
    for (size_t k = 0; k < 7; ++k) {
        const LayerSpec& l = net.layers[k];
        EXPECT_EQ(l.out.c, maps[k]) << l.name;
        EXPECT_EQ(l.out.h, sides[k]) << l.name;
        EXPECT_EQ(l.out.w, sides[k]) << l.name;
        EXPECT_EQ(l.weight_count + l.bias_count, params[k]) << l.name;
        if (k > 0) {
            EXPECT_EQ(l.weight_offset, net.layers[k - 1].bias_offset + net.layers[k - 1].bias_count);
        }
    }
    EXPECT_EQ(net.param_count, 60850u);
    EXPECT_EQ(net.classes, 10);
}

TEST(Network, C3ConnectionTableIsLeCunsTableOne) {
    const Network net = lenet5_network();
    const LayerSpec& c3 = net.layers[2];
    // t[o][i]: C3 map o reads S2 map i, from models/lenet5.net's grid.
    std::vector<std::vector<int>> t(16, std::vector<int>(6, 0));
    for (int j = 0; j < c3.connections(); ++j) t[c3.conn_out[j]][c3.conn_in[j]] = 1;
    int total = 0;
    for (int o = 0; o < 16; ++o) {
        int n = 0;
        for (int i = 0; i < 6; ++i) n += t[o][i];
        // Maps 0-5 read 3 contiguous S2 maps, 6-11 four contiguous, 12-14 four non-contiguous, 15 all six.
        EXPECT_EQ(n, o < 6 ? 3 : o < 15 ? 4 : 6) << "C3 map " << o;
        total += n;
    }
    EXPECT_EQ(total, 60);
    // Spot checks against the paper's grid.
    EXPECT_TRUE(t[4][4] && t[4][5] && t[4][0]);
    EXPECT_TRUE(t[14][0] && t[14][2] && t[14][3] && t[14][5] && !t[14][1] && !t[14][4]);
    EXPECT_EQ(c3.connections(), 60);
    EXPECT_EQ(net.layers[4].connections(), 16 * 120);
}

// Checkpoints record the description's hash: a change to LeNet-5's would orphan every
// checkpoint saved so far.
TEST(Network, Lenet5DescriptionIsStable) {
    EXPECT_EQ(lenet5_network().hash(), 0x18617c97db1c97a5u);
}

TEST(Network, InitialisationIsSeededAndScaledByFanIn) {
    const Network net = lenet5_network();
    const auto a = init_params(net, 1), b = init_params(net, 1), c = init_params(net, 2);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    for (const auto& l : net.layers) {
        for (size_t i = 0; i < l.bias_count; ++i) EXPECT_EQ(a[l.bias_offset + i], 0.0f);
        if (l.kind == LayerKind::Subsample) {
            for (size_t i = 0; i < l.weight_count; ++i) EXPECT_EQ(a[l.weight_offset + i], 0.25f);
        } else {
            // Output map 0's fan-in (C3's smallest: its bound the largest).
            const int fan_in = l.kind == LayerKind::Conv ? (l.conn_begin[1] - l.conn_begin[0]) * l.kernel * l.kernel
                                                         : l.in.size();
            const float bound = std::sqrt(3.0f / static_cast<float>(fan_in));
            float largest = 0;
            for (size_t i = 0; i < l.weight_count; ++i) largest = std::max(largest, std::abs(a[l.weight_offset + i]));
            EXPECT_LE(largest, bound) << l.name;
            EXPECT_GT(largest, 0.5f * bound) << l.name;
        }
    }
}

TEST(Network, HashChangesWithTheDescription) {
    Network a = lenet5_network(), b = lenet5_network();
    EXPECT_EQ(a.hash(), b.hash());
    b.layers[2].conn_in[0] = 5;
    EXPECT_NE(a.hash(), b.hash());
}
