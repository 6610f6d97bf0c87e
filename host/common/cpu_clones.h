// LENET5_CPU_CLONES before a function with hot loops: GCC and Clang compile it once each for
// AVX-512, AVX2 and plain x86-64 and pick the CPU's best at load time (an ifunc), so the loops
// vectorise 16 floats wide where the CPU can, and the binary still runs on any x86-64.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define LENET5_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define LENET5_CPU_CLONES
#endif
