// Runs fn(begin, end) over [0, count) in blocks that stay in cache, the blocks of a large buffer
// (a CNN's 25.7 MB F1 bucket) spread over up to kPassThreads OpenMP threads: the host passes over
// gradient buckets are bound by memory bandwidth, which one thread does not reach and a few do.
// More would not be faster, and after a parallel region OpenMP's threads spin for a while (GNU's
// for some milliseconds) on cores that the threads driving the GPUs need: on a 64-core host, passes
// on every core made two GPUs' exact CNN epoch at batch 1024 a third slower. Each value is computed
// by one thread in the same order of operations whatever the thread count, so the results do not
// depend on it.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace lenet5 {

template <typename Fn>
void for_blocks(size_t count, Fn fn) {
    constexpr size_t kBlock = 4096, kParallelFloats = size_t(1) << 18;
    const auto blocks = static_cast<int64_t>((count + kBlock - 1) / kBlock);
#ifdef _OPENMP
    constexpr int kPassThreads = 8;
    const int threads = std::min(omp_get_max_threads(), kPassThreads);
#endif
#pragma omp parallel for schedule(static) num_threads(threads) if (count >= kParallelFloats)
    for (int64_t i = 0; i < blocks; ++i) {
        const size_t begin = static_cast<size_t>(i) * kBlock;
        fn(begin, std::min(count, begin + kBlock));
    }
}

}  // namespace lenet5
