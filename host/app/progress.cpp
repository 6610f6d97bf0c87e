#include "app/progress.h"

#include <unistd.h>

#include <cstdio>

namespace lenet5 {

ProgressBar::ProgressBar() : enabled_(::isatty(STDERR_FILENO) == 1) {}

void ProgressBar::update(const std::string& label, int done, int total) {
    if (!enabled_ || total <= 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (done <= 1 || total != last_total_) {
        start_ = now;
        last_total_ = total;
    }
    // Redraw at most 10 times a second, and always at the end.
    if (drawn_ && done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double eta = done > 1 ? elapsed / (done - 1) * (total - done) : 0.0;
    constexpr int width = 30;
    const int filled = static_cast<int>(static_cast<long long>(width) * done / total);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r%s [%s] %d/%d  ETA %4.0fs ", label.c_str(), bar.c_str(), done, total, eta);
    std::fflush(stderr);
    drawn_ = true;
}

void ProgressBar::clear() {
    if (!drawn_) return;
    std::fprintf(stderr, "\r%*s\r", 79, "");
    std::fflush(stderr);
    drawn_ = false;
}

}  // namespace lenet5
