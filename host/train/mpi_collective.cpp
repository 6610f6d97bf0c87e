#include "train/mpi_collective.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/error.h"
#include "common/for_blocks.h"
#include "train/mpi_check.h"

namespace lenet5 {
namespace {

int count_of(size_t n) {
    if (n > static_cast<size_t>(INT_MAX)) throw Error("a bucket of " + std::to_string(n) + " values is too large for MPI");
    return static_cast<int>(n);
}

}  // namespace

MpiCollective::MpiCollective(MPI_Comm comm, size_t sum_capacity) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm node;
    mpi_check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    int local = 0;
    MPI_Comm_size(node, &local);
    const char* shared = std::getenv("LENET5_MPI_SHARED");
    // Every rank decides alike: the same machine, the same environment (mpirun passes it on).
    if (local == size_ && size_ > 1 && !(shared && std::strcmp(shared, "0") == 0))
        node_sum_ = std::make_unique<NodeSum>(node, sum_capacity);
    MPI_Comm_free(&node);
}

int MpiCollective::started(MPI_Request r, SharedSum shared) {
    requests_.push_back(r);
    shared_.push_back(shared);
    return static_cast<int>(requests_.size()) - 1;
}

int MpiCollective::start_sum(float* data, size_t n, float weight) {
    if (node_sum_) return started(MPI_REQUEST_NULL, {true, data, n, node_sum_->start(data, n, weight)});
    if (weight != 1.0f)
        for_blocks(n, [&](size_t b, size_t e) {
            for (size_t k = b; k < e; ++k) data[k] = weight * data[k];
        });
    MPI_Request r;
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, data, count_of(n), MPI_FLOAT, MPI_SUM, comm_, &r), "MPI_Iallreduce of the gradients");
    return started(r);
}

int MpiCollective::start_gather(const uint16_t* mine, uint16_t* all, size_t n) {
    MPI_Request r;
    mpi_check(MPI_Iallgather(mine, count_of(n), MPI_UINT16_T, all, count_of(n), MPI_UINT16_T, comm_, &r),
          "MPI_Iallgather of the bfloat16 gradients");
    return started(r);
}

void MpiCollective::wait(int request) {
    const SharedSum& shared = shared_.at(static_cast<size_t>(request));
    if (shared.node)
        node_sum_->finish(shared.at, shared.data, shared.n);
    else
        mpi_check(MPI_Wait(&requests_.at(static_cast<size_t>(request)), MPI_STATUS_IGNORE), "MPI_Wait for the gradients");
    if (++waited_ == requests_.size()) {  // every request was waited for: numbers start again
        requests_.clear();
        shared_.clear();
        waited_ = 0;
    }
}

void MpiCollective::progress() {
    int done = 0;
    if (!requests_.empty())
        mpi_check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE),
              "MPI_Testall on the gradients");
}

// Every rank's counters, summed in rank order.
Counters MpiCollective::sum(const Counters& c) {
    const double mine[3] = {c.loss_sum, static_cast<double>(c.correct), static_cast<double>(c.samples)};
    std::vector<double> all(3 * static_cast<size_t>(size_));
    mpi_check(MPI_Allgather(mine, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, comm_), "MPI_Allgather of the counters");
    Counters total;
    for (size_t r = 0; r < static_cast<size_t>(size_); ++r) {
        total.loss_sum += all[3 * r];
        total.correct += static_cast<int64_t>(all[3 * r + 1]);
        total.samples += static_cast<int64_t>(all[3 * r + 2]);
    }
    return total;
}

std::vector<float> MpiCollective::gather(const std::vector<float>& mine) {
    int count = count_of(mine.size());
    std::vector<int> counts(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_), 0);
    mpi_check(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_), "MPI_Allgather of the output sizes");
    for (size_t r = 1; r < counts.size(); ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
    std::vector<float> all(static_cast<size_t>(offsets.back() + counts.back()));
    mpi_check(MPI_Allgatherv(mine.data(), count, MPI_FLOAT, all.data(), counts.data(), offsets.data(), MPI_FLOAT, comm_),
          "MPI_Allgatherv of a layer's outputs");
    return all;
}

}  // namespace lenet5
