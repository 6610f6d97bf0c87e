// How HostEngine stores the samples that run through the head layers as lane groups
// (HostOps::forward_lanes): a group of up to `lanes` consecutive samples s0 .. s0+n occupies the
// place of `lanes` samples in a [count][size] buffer, as one [size][lanes] tensor. Lanes past n
// hold zeros. A part's samples are cut into groups from its first sample on; a group of fewer
// than min_lanes() samples is not one: its samples run one at a time and keep the plain layout.
#pragma once
#include <algorithm>
#include <cstddef>

namespace lenet5 {

struct LaneGroups {
    int lanes = 0;  // 0: no lane groups (every sample one at a time)
    // Optional: to_lanes and from_lanes by vector transposes (HostOps'), bit for bit the same moves.
    void (*vector_to_lanes)(const float* samples, int n, size_t size, float* group) = nullptr;
    void (*vector_from_lanes)(const float* group, int n, size_t size, float* samples) = nullptr;

    // Below this many samples a group is slower than its samples one at a time (LeNet-5 on AVX2:
    // a group of 8 costs about as much as 5 samples through the per-sample layers).
    int min_lanes() const { return lanes / 2 + 1; }

    // Calls fn(first, n, grouped) over [begin, end): n samples from `first`, grouped or one by one.
    // A group takes the place of `lanes` samples, so it is formed only where that place ends by
    // `room`: a part's end, where the next part's samples start (a part that is not a whole number
    // of groups, in a batch of less than a group a thread), or past the batch's last sample.
    template <class Fn>
    void each(int begin, int end, int room, Fn&& fn) const {
        if (lanes == 0) return fn(begin, end - begin, false);
        for (int s = begin; s < end; s += lanes) {
            const int n = std::min(lanes, end - s);
            fn(s, n, n >= min_lanes() && s + lanes <= room);
        }
    }

    // [n][size] -> [size][lanes], zeros in lanes n..
    void to_lanes(const float* samples, int n, size_t size, float* group) const {
        if (vector_to_lanes) return vector_to_lanes(samples, n, size, group);
        const size_t L = static_cast<size_t>(lanes);
        for (size_t i = 0; i < size; ++i) {
            float* dst = group + i * L;
            for (size_t s = 0; s < static_cast<size_t>(n); ++s) dst[s] = samples[s * size + i];
            for (size_t s = static_cast<size_t>(n); s < L; ++s) dst[s] = 0.0f;
        }
    }

    // [size][lanes] -> [n][size], lanes n.. dropped. Position-major: each of the group's vectors
    // read once (sample-major took 1.4x as long).
    void from_lanes(const float* group, int n, size_t size, float* samples) const {
        if (vector_from_lanes) return vector_from_lanes(group, n, size, samples);
        const size_t L = static_cast<size_t>(lanes);
        for (size_t i = 0; i < size; ++i)
            for (size_t s = 0; s < static_cast<size_t>(n); ++s) samples[s * size + i] = group[i * L + s];
    }
};

}  // namespace lenet5
