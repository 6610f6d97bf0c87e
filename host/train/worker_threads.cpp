#include "train/worker_threads.h"

namespace lenet5 {

WorkerThreads::WorkerThreads(size_t count) : given_(count, 0), errors_(count) {
    for (size_t i = 0; i < count; ++i) threads_.emplace_back([this, i] { serve(i); });
}

WorkerThreads::~WorkerThreads() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    work_.notify_all();
    for (auto& t : threads_) t.join();
}

void WorkerThreads::serve(size_t i) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        work_.wait(lock, [&] { return stop_ || given_[i]; });
        if (stop_) return;
        lock.unlock();
        try {
            (*job_)(i);
        } catch (...) {
            errors_[i] = std::current_exception();
        }
        lock.lock();
        given_[i] = 0;
        if (--running_ == 0) done_.notify_one();
    }
}

void WorkerThreads::run(const std::vector<size_t>& which, const std::function<void(size_t)>& fn,
                        const std::function<void()>& meanwhile) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = &fn;
        for (size_t i : which) {
            given_.at(i) = 1;
            errors_[i] = nullptr;
        }
        running_ = which.size();
    }
    work_.notify_all();
    std::exception_ptr mine;  // the workers are waited for whatever this thread's part throws
    try {
        if (meanwhile) meanwhile();
    } catch (...) {
        mine = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return running_ == 0; });
    if (mine) std::rethrow_exception(mine);
    for (size_t i : which)
        if (errors_[i]) std::rethrow_exception(errors_[i]);
}

}  // namespace lenet5
