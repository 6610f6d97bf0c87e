#include "conv/conv_rows_host.h"

#include <algorithm>

#include "common/cpu_clones.h"

namespace lenet5 {

LENET5_CPU_CLONES
void conv_rows(const ConvRowsShape& s, const float* in, const float* weight, const float* bias, Activation act, int y0,
               int ny, int m0, int mw, float* out, float* scratch) {
    const int PW = s.OW + s.kw - 1, taps = s.kh * s.kw;
    float* sum = scratch + size_t(s.C) * s.kh * PW;
    const int lo = std::min(PW, std::max(0, s.pl)), hi = std::max(lo, std::min(PW, s.pl + s.IW));  // columns inside
    for (int y = y0; y < y0 + ny; ++y) {
        for (int c = 0; c < s.C; ++c)  // padded[c][ky][x] = in[c][y - pt + ky][x - pl], 0 outside
            for (int ky = 0; ky < s.kh; ++ky) {
                float* row = scratch + size_t(c * s.kh + ky) * PW;
                const int iy = y - s.pt + ky;
                std::fill(row, row + PW, 0.0f);
                if (iy >= 0 && iy < s.IH)
                    std::copy(in + (size_t(c) * s.IH + iy) * s.IW + (lo - s.pl), in + (size_t(c) * s.IH + iy) * s.IW + (hi - s.pl),
                              row + lo);
            }
        for (int m = m0; m < m0 + mw; ++m) {
            std::fill(sum, sum + s.OW, bias[m]);
            const float* w = weight + size_t(m) * s.C * taps;
            for (int c = 0; c < s.C; ++c)
                for (int ky = 0; ky < s.kh; ++ky) {
                    const float* row = scratch + size_t(c * s.kh + ky) * PW;
                    for (int kx = 0; kx < s.kw; ++kx) {
                        const float v = w[(c * s.kh + ky) * s.kw + kx];
                        for (int x = 0; x < s.OW; ++x) sum[x] += v * row[x + kx];
                    }
                }
            activate_into(sum, s.OW, act, out + (size_t(m) * s.OH + y) * s.OW);
        }
    }
}

}  // namespace lenet5
