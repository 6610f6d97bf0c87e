// Buffers whose start is a cache line (64 bytes): the SIMD variants load whole vectors of 8 or
// 16 floats from them, and a vector that straddles two lines costs two loads. new[] and
// std::vector's default allocator give 16 bytes, which splits every other AVX2 vector.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace lenet5 {

constexpr std::size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
    using value_type = T;
    CacheLineAllocator() = default;
    template <class U>
    CacheLineAllocator(const CacheLineAllocator<U>&) {}
    T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLine})); }
    void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{kCacheLine}); }
    template <class U>
    bool operator==(const CacheLineAllocator<U>&) const { return true; }
    template <class U>
    bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace lenet5
