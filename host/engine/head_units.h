// How HostEngine hands the layers before the tail (the head) to the threads of a parallel
// region: the batch's samples, part by part (a part is a thread's slice), cut into units as
// LaneGroups::each cuts them (a lane group, or a run of samples one at a time). A thread takes the
// units it is given first (its own part's, or those whose forward it ran), then any that are
// left: one slowed down (by another program on its core, say) leaves its last units to the others
// instead of keeping them waiting at the next barrier.
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "engine/lane_groups.h"

namespace lenet5 {

class HeadUnits {
public:
    struct Unit {
        int part = 0, s0 = 0, n = 0;
        bool grouped = false;
    };

    // The units of parts [0, parts): part p's samples are [first(p), first(p + 1)).
    template <class First>
    void plan(int parts, const LaneGroups& groups, First&& first) {
        units_.clear();
        part_begin_.assign(1, 0);
        for (int part = 0; part < parts; ++part) {
            // A group's place ends by the next part's first sample; the buffers hold a group past the last.
            const int room = first(part + 1) + (part + 1 == parts ? groups.lanes : 0);
            groups.each(first(part), first(part + 1), room,
                        [&](int s0, int n, bool grouped) { units_.push_back({part, s0, n, grouped}); });
            part_begin_.push_back(static_cast<int>(units_.size()));
        }
        if (capacity_ < units_.size()) {
            capacity_ = units_.size();
            taken_ = std::make_unique<std::atomic<bool>[]>(capacity_);
        }
        ran_by_.resize(units_.size());
    }

    size_t size() const { return units_.size(); }
    const Unit& operator[](size_t u) const { return units_[u]; }
    // Part p's units are [first(p), first(p + 1)).
    int first(int part) const { return part_begin_[static_cast<size_t>(part)]; }

    // Before each region that hands them out (each()): every unit back in the queue.
    void open() {
        for (size_t u = 0; u < units_.size(); ++u) taken_[u].store(false, std::memory_order_relaxed);
    }

    // Calls fn(u) once for each unit u, on the threads of a region (or on one thread, in order):
    // each thread takes the units that mine(u) gives it first, then any that are left.
    template <class Mine, class Fn>
    void each(Mine&& mine, Fn&& fn) {
        for (const bool any : {false, true})
            for (size_t u = 0; u < units_.size(); ++u)
                if ((any || mine(u)) && !taken_[u].exchange(true, std::memory_order_relaxed)) fn(u);
    }

    // The thread that ran unit u's forward (its caches hold the unit's activations), as the
    // forward's fn records it.
    void ran(size_t u, int thread) { ran_by_[u] = thread; }
    int ran_by(size_t u) const { return ran_by_[u]; }

private:
    std::vector<Unit> units_;
    std::vector<int> part_begin_;
    std::unique_ptr<std::atomic<bool>[]> taken_;  // per unit: handed out
    size_t capacity_ = 0;
    std::vector<int> ran_by_;
};

}  // namespace lenet5
