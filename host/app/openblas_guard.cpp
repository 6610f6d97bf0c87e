// OpenBLAS starts its thread pool while the program loads, before main. Under an address-space
// limit (`ulimit -v`, as some clusters set) a pool thread loops on a failed 128 MB buffer
// allocation, and the pool's shutdown at exit waits for it forever: even `lenet5 --version` never
// ended. The thread count can only be chosen before the library loads (the environment is read
// then, and libc's own start-up resets any earlier setenv), so main runs the program again, with
// one OpenBLAS thread, before it does anything else: exec ends the stuck thread with the old image.
#include "app/openblas_guard.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>

namespace lenet5 {

void one_openblas_thread_under_a_memory_limit(char** argv) {
#ifdef LENET5_HAVE_OPENBLAS
    const auto limited = [](int resource) {
        rlimit limit{};
        return getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
    };
    if (std::getenv("OPENBLAS_NUM_THREADS") || !(limited(RLIMIT_AS) || limited(RLIMIT_DATA))) return;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    execv("/proc/self/exe", argv);  // returns only if it failed: then go on as we are
#else
    (void)argv;
#endif
}

}  // namespace lenet5
