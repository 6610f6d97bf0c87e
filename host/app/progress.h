// A one-line progress bar with ETA on stderr, drawn only when stderr is a terminal.
#pragma once
#include <chrono>
#include <string>

namespace lenet5 {

class ProgressBar {
public:
    ProgressBar();  // decides once whether stderr is a terminal
    void update(const std::string& label, int done, int total);
    void clear();  // erases the bar before a table row is printed

private:
    bool enabled_;
    bool drawn_ = false;
    int last_total_ = 0;
    std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace lenet5
