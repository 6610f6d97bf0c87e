#include "train/mpi_engine.h"

#include <chrono>
#include <numeric>

#include "common/error.h"
#include "train/worker_engine.h"

namespace lenet5 {

MpiEngine::MpiEngine(std::unique_ptr<Engine> local, MPI_Comm comm) : local_(std::move(local)), comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    slice_.assign(static_cast<size_t>(size_), 0);
    params_ = local_->params().size();
}

std::string MpiEngine::device() const {
    return local_->device() + " (rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ")";
}

void MpiEngine::forward(Split split, int first, int count) {
    slice_ = split_counts(count, std::vector<double>(static_cast<size_t>(size_), 1.0 / size_));
    const int begin = std::accumulate(slice_.begin(), slice_.begin() + rank_, first);
    if (slice_[static_cast<size_t>(rank_)]) local_->forward(split, begin, slice_[static_cast<size_t>(rank_)]);
}

void MpiEngine::backward() {
    const int mine = slice_[static_cast<size_t>(rank_)];
    std::vector<float> g;
    if (mine) {
        local_->backward();
        g = local_->gradients();
    }
    const auto t0 = std::chrono::steady_clock::now();
    const size_t n = params_;
    // Each rank's gradients are of the mean loss over its slice: weighed by the slices, summed in rank order.
    const int total = std::accumulate(slice_.begin(), slice_.end(), 0);
    std::vector<float> weighted(n, 0.0f);
    if (mine) {
        const float w = static_cast<float>(mine) / static_cast<float>(total);
        for (size_t k = 0; k < n; ++k) weighted[k] = w * g[k];
    }
    std::vector<float> all(n * static_cast<size_t>(size_));
    if (MPI_Allgather(weighted.data(), static_cast<int>(n), MPI_FLOAT, all.data(), static_cast<int>(n), MPI_FLOAT,
                      comm_) != MPI_SUCCESS)
        throw Error("MPI_Allgather of the gradients failed");
    sum_.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
    for (int r = 1; r < size_; ++r)
        for (size_t k = 0; k < n; ++k) sum_[k] += all[static_cast<size_t>(r) * n + k];
    reduce_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    local_->set_gradients(sum_);
}

void MpiEngine::set_gradients(const std::vector<float>& gradients) {
    sum_ = gradients;
    local_->set_gradients(gradients);
}

// Every rank's counters, summed in rank order.
Counters MpiEngine::take_counters() {
    const Counters c = local_->take_counters();
    const double mine[3] = {c.loss_sum, static_cast<double>(c.correct), static_cast<double>(c.samples)};
    std::vector<double> all(3 * static_cast<size_t>(size_));
    if (MPI_Allgather(mine, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, comm_) != MPI_SUCCESS)
        throw Error("MPI_Allgather of the counters failed");
    Counters total;
    for (int r = 0; r < size_; ++r) {
        total.loss_sum += all[3 * static_cast<size_t>(r)];
        total.correct += static_cast<int64_t>(all[3 * static_cast<size_t>(r) + 1]);
        total.samples += static_cast<int64_t>(all[3 * static_cast<size_t>(r) + 2]);
    }
    return total;
}

PhaseTimes MpiEngine::take_times() {
    PhaseTimes t = local_->take_times();
    t.reduce_ms = reduce_ms_;
    reduce_ms_ = 0;
    return t;
}

std::vector<float> MpiEngine::layer_output(size_t layer) {
    const std::vector<float> mine =
        slice_[static_cast<size_t>(rank_)] ? local_->layer_output(layer) : std::vector<float>{};
    int count = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_), 0);
    MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_);
    for (int r = 1; r < size_; ++r)
        offsets[static_cast<size_t>(r)] = offsets[static_cast<size_t>(r) - 1] + counts[static_cast<size_t>(r) - 1];
    std::vector<float> all(static_cast<size_t>(offsets.back() + counts.back()));
    if (MPI_Allgatherv(mine.data(), count, MPI_FLOAT, all.data(), counts.data(), offsets.data(), MPI_FLOAT, comm_) !=
        MPI_SUCCESS)
        throw Error("MPI_Allgatherv of a layer's outputs failed");
    return all;
}

}  // namespace lenet5
