// A small, portable, seeded random generator (SplitMix64). The standard
// distributions are implementation-defined, so we do the conversions ourselves:
// the same seed gives the same numbers with every compiler and library.
#pragma once
#include <cstdint>
#include <vector>

namespace lenet5 {

class Rng {
public:
    explicit Rng(uint64_t seed) : state_(seed) {}

    uint64_t next() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }

    // Uniform in [0, 1) with 24 bits, exactly representable as a float.
    float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }

    // Uniform in [lo, hi).
    float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

    // Uniform integer in [0, n), n > 0 (multiply-shift; the bias is negligible for n << 2^32).
    uint32_t below(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }

    uint64_t state() const { return state_; }
    void set_state(uint64_t s) { state_ = s; }

private:
    uint64_t state_;
};

// Fisher-Yates shuffle of 0..n-1.
inline std::vector<int32_t> shuffled_order(int32_t n, Rng& rng) {
    std::vector<int32_t> order(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    for (int32_t i = n - 1; i > 0; --i) {
        int32_t j = static_cast<int32_t>(rng.below(static_cast<uint32_t>(i + 1)));
        std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
    }
    return order;
}

}  // namespace lenet5
