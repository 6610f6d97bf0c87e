#include "train/node_sum.h"

#include <cstring>
#include <exception>
#include <string>

#include "common/error.h"
#include "common/for_blocks.h"
#include "train/mpi_check.h"

namespace lenet5 {
namespace {

constexpr size_t kLine = 16;  // floats per cache line: slices start on one, so no two ranks write a line

}  // namespace

NodeSum::NodeSum(MPI_Comm node, size_t capacity) : capacity_(capacity) {
    mpi_check(MPI_Comm_dup(node, &node_), "MPI_Comm_dup of the machine's ranks");
    MPI_Comm_rank(node_, &rank_);
    MPI_Comm_size(node_, &size_);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");  // each part in its rank's own memory
    float* mine = nullptr;
    mpi_check(MPI_Win_allocate_shared(static_cast<MPI_Aint>(capacity * sizeof(float)), sizeof(float), info, node_, &mine,
                                  &window_),
          "MPI_Win_allocate_shared for the gradient sums");
    MPI_Info_free(&info);
    for (int r = 0; r < size_; ++r) {
        MPI_Aint bytes = 0;
        int unit = 0;
        float* part = nullptr;
        mpi_check(MPI_Win_shared_query(window_, r, &bytes, &unit, &part), "MPI_Win_shared_query");
        parts_.push_back(part);
    }
    mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_), "MPI_Win_lock_all");
}

NodeSum::~NodeSum() {
    // Freeing is collective: a rank unwinding from an error would wait for the others forever (it
    // is about to end them all).
    if (std::uncaught_exceptions() > 0) return;
    MPI_Win_unlock_all(window_);
    MPI_Win_free(&window_);
    MPI_Comm_free(&node_);
}

void NodeSum::sync() {
    MPI_Win_sync(window_);
    mpi_check(MPI_Barrier(node_), "MPI_Barrier of the machine's ranks");
    MPI_Win_sync(window_);
}

size_t NodeSum::slice_begin(size_t n, int rank) const {
    if (rank >= size_) return n;
    return n * static_cast<size_t>(rank) / static_cast<size_t>(size_) / kLine * kLine;
}

size_t NodeSum::start(const float* data, size_t n, float weight) {
    if (in_flight_ == 0) {  // a new round reuses the window: the last one's results all read
        sync();
        used_ = 0;
    }
    if (used_ + n > capacity_)
        throw Error("a sum of " + std::to_string(n) + " values does not fit the " + std::to_string(capacity_) +
                    " of the shared window");
    const size_t at = used_;
    float* into = parts_[static_cast<size_t>(rank_)] + at;
    for_blocks(n, [&](size_t b, size_t e) {
        if (weight == 1.0f)
            std::memcpy(into + b, data + b, (e - b) * sizeof(float));
        else
            for (size_t k = b; k < e; ++k) into[k] = weight * data[k];
    });
    used_ += n;
    ++in_flight_;
    return at;
}

void NodeSum::finish(size_t at, float* data, size_t n) {
    sync();  // every rank's values in
    const size_t lo = slice_begin(n, rank_), hi = slice_begin(n, rank_ + 1);
    float* sum = parts_[static_cast<size_t>(rank_)] + at + lo;
    for_blocks(hi - lo, [&](size_t b, size_t e) {
        for (size_t k = b; k < e; ++k) {  // in rank order
            float x = parts_[0][at + lo + k];
            for (size_t r = 1; r < parts_.size(); ++r) x += parts_[r][at + lo + k];
            sum[k] = x;
        }
    });
    sync();  // every slice summed
    for (int r = 0; r < size_; ++r) {
        const size_t b0 = slice_begin(n, r), e0 = slice_begin(n, r + 1);
        const float* from = parts_[static_cast<size_t>(r)] + at + b0;
        for_blocks(e0 - b0, [&](size_t b, size_t e) { std::memcpy(data + b0 + b, from + b, (e - b) * sizeof(float)); });
    }
    --in_flight_;
}

}  // namespace lenet5
