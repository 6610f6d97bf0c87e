#include "train/mpi_world.h"

#include <cstdlib>

#ifdef LENET5_HAVE_MPI
#include <mpi.h>

#include "train/mpi_engine.h"
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
    MPI_Init(argc, argv);
    g_started = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world.size);
    MPI_Comm node;  // the ranks on this machine share its devices
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world.rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &g_world.local_rank);
    MPI_Comm_free(&node);
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

std::unique_ptr<Engine> distribute(std::unique_ptr<Engine> local) {
#ifdef LENET5_HAVE_MPI
    if (g_world.size > 1) return std::make_unique<MpiEngine>(std::move(local), MPI_COMM_WORLD);
#endif
    return local;
}

}  // namespace lenet5
