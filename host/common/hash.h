// 64-bit FNV-1a over bytes: the network hash checkpoints record, and what ranks compare.
#pragma once
#include <cstddef>
#include <cstdint>

namespace lenet5 {

inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = 0xcbf29ce484222325ull) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

}  // namespace lenet5
