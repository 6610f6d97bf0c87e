#include "train/mpi_world.h"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <iostream>

#include "common/error.h"

#ifdef LENET5_HAVE_MPI
#include <mpi.h>

#include "train/mpi_collective.h"
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace lenet5 {
namespace {

MpiWorld g_world;

#ifdef LENET5_HAVE_MPI
bool g_started = false;

// mpirun (Open MPI, or a PMI launcher) tells its processes so in their environment.
bool started_by_mpirun() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
        if (std::getenv(name)) return true;
    return false;
}
#endif

}  // namespace

const MpiWorld& mpi_world() { return g_world; }

MpiSession::MpiSession(int* argc, char*** argv) {
#ifdef LENET5_HAVE_MPI
    if (!started_by_mpirun()) return;
    // Funneled: OpenMP threads and the workers' threads compute, only this thread calls MPI.
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    g_started = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world.size);
    MPI_Comm node;  // the ranks on this machine share its devices
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world.rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &g_world.local_rank);
    MPI_Comm_size(node, &g_world.local_size);
    MPI_Comm_free(&node);
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        const int cores = CPU_COUNT(&allowed), online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
        const int share = std::max(1, online / g_world.local_size);
#ifdef _OPENMP
        // A rank free to run anywhere would start a thread per core, as would every other rank here,
        // and the teams would take turns on the cores (a pass over a bucket waits for its slowest
        // thread): each rank takes its share of the cores, unless OMP_NUM_THREADS says otherwise.
        if (cores > share && !std::getenv("OMP_NUM_THREADS")) omp_set_num_threads(share);
#endif
        const std::string warning = binding_warning(cores, online, g_world.local_size);
        if (g_world.root() && !warning.empty()) std::cerr << "lenet5: warning: " << warning << "\n";
    }
#else
    (void)argc;
    (void)argv;
#endif
}

MpiSession::~MpiSession() {
#ifdef LENET5_HAVE_MPI
    if (g_started) MPI_Finalize();
#endif
}

std::string binding_warning(int cores, int online, int local_size) {
    const int share = online / std::max(local_size, 1);
    if (cores >= share) return "";
    return "mpirun bound rank 0 to " + std::to_string(cores) + " of this machine's " + std::to_string(online) +
           " cores: its gradient exchange, OpenMP threads and OpenCL driver share " + (cores == 1 ? "that one" : "those") +
           " (`mpirun --bind-to none`, or `--use-hwthread-cpus --map-by slot:PE=" + std::to_string(share) + "`, gives each rank " +
           std::to_string(share) + ")";
}

void mpi_abort(int status) {
#ifdef LENET5_HAVE_MPI
    if (g_started && g_world.size > 1) MPI_Abort(MPI_COMM_WORLD, status);
#else
    (void)status;
#endif
}

int mpi_max(int value) {
#ifdef LENET5_HAVE_MPI
    if (g_started && g_world.size > 1) {
        int most = value;
        MPI_Allreduce(&value, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        return most;
    }
#endif
    return value;
}

std::unique_ptr<Collective> world_ranks(size_t sum_capacity) {
#ifdef LENET5_HAVE_MPI
    if (g_started && g_world.size > 1) return std::make_unique<MpiCollective>(MPI_COMM_WORLD, sum_capacity);
#else
    (void)sum_capacity;
#endif
    return nullptr;
}

void check_ranks_agree(const std::vector<RankFact>& facts) {
#ifdef LENET5_HAVE_MPI
    if (!g_started || g_world.size < 2) return;
    const size_t n = facts.size();
    std::vector<uint64_t> mine, all(n * static_cast<size_t>(g_world.size));
    for (const RankFact& f : facts) mine.push_back(f.value);
    if (MPI_Allgather(mine.data(), static_cast<int>(n), MPI_UINT64_T, all.data(), static_cast<int>(n), MPI_UINT64_T,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
        throw Error("MPI_Allgather of what the ranks train failed");
    auto shown = [](const RankFact& f, uint64_t v) {
        char text[32];
        std::snprintf(text, sizeof text, f.hex ? "%016llx" : "%llu", static_cast<unsigned long long>(v));
        return std::string(text);
    };
    for (size_t k = 0; k < n; ++k)
        for (size_t r = 1; r < static_cast<size_t>(g_world.size); ++r)
            if (all[r * n + k] != all[k])
                throw AgreedError("the ranks disagree on " + facts[k].what + ": rank 0 has " + shown(facts[k], all[k]) +
                                  ", rank " + std::to_string(r) + " has " + shown(facts[k], all[r * n + k]));
#else
    (void)facts;
#endif
}

}  // namespace lenet5
