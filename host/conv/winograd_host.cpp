#include "conv/winograd_host.h"

#include <algorithm>

#include "common/cpu_clones.h"

namespace lenet5 {

namespace {

// A run of tiles: one tile row (ty), tiles tx0 .. tx0+n-1, at position j of the block.
struct Run {
    int j, ty, tx0, n;
};

// The run of tiles that starts at position j of the block of tiles t0 .. t0+nt-1. (The transforms
// walk runs in plain loops: a lambda's body would miss the function's CPU clones.)
Run run_at(const WinogradShape& s, int t0, int nt, int j) {
    const int tw = s.tiles_w(), t = t0 + j;
    return Run{j, t / tw, t % tw, std::min(nt - j, tw - t % tw)};
}

// B^T x for six values x0..x5 (the interpolation points 0, +-1, +-2 and infinity).
template <class T>
inline void input_rows(const T& x0, const T& x1, const T& x2, const T& x3, const T& x4, const T& x5, T out[6]) {
    out[0] = 4 * x0 - 5 * x2 + x4;
    out[1] = -4 * x1 - 4 * x2 + x3 + x4;
    out[2] = 4 * x1 - 4 * x2 - x3 + x4;
    out[3] = -2 * x1 - x2 + 2 * x3 + x4;
    out[4] = 2 * x1 - x2 - 2 * x3 + x4;
    out[5] = 4 * x1 - 5 * x3 + x5;
}

// A^T x for six values: the four outputs.
inline void output_rows(float x0, float x1, float x2, float x3, float x4, float x5, float out[4]) {
    const float a = x1 + x2, b = x1 - x2, c = x3 + x4, d = x3 - x4;
    out[0] = x0 + a + c;
    out[1] = b + 2 * d;
    out[2] = a + 4 * c;
    out[3] = b + 8 * d + x5;
}

}  // namespace

std::vector<float> winograd_filters(const std::vector<float>& weight, int OC, int C) {
    // G: rows 1/4 (g0); -1/6 (g0+g1+g2); -1/6 (g0-g1+g2); 1/24 g0 + 1/12 g1 + 1/6 g2;
    // 1/24 g0 - 1/12 g1 + 1/6 g2; g2. Computed in double, rounded once.
    static const double G[6][3] = {{0.25, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                   {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
    std::vector<float> U(size_t(36) * OC * C);
    for (int o = 0; o < OC; ++o)
        for (int c = 0; c < C; ++c) {
            const float* g = weight.data() + (size_t(o) * C + c) * 9;
            double r[6][3];  // G g
            for (int i = 0; i < 6; ++i)
                for (int k = 0; k < 3; ++k) r[i][k] = G[i][0] * g[k] + G[i][1] * g[3 + k] + G[i][2] * g[6 + k];
            for (int i = 0; i < 6; ++i)  // (G g) G^T
                for (int k = 0; k < 6; ++k)
                    U[(size_t(o) * 36 + i * 6 + k) * C + c] = float(r[i][0] * G[k][0] + r[i][1] * G[k][1] + r[i][2] * G[k][2]);
        }
    return U;
}

// The transforms vectorise over the tiles of a run: each row is split into its four phases
// (columns 4k, 4k+1, 4k+2, 4k+3), so that tile k's six columns are phase[0..3][k] and
// phase[0..1][k+1], contiguous in k.
LENET5_CPU_CLONES
void winograd_input(const WinogradShape& s, const float* in, int t0, int nt, float* V) {
    const size_t xi_stride = size_t(s.C) * nt;
    const int most = s.tiles_w() + 1, longest = 4 * most;  // phases of a run: n + 1 entries
    std::vector<float> buf(size_t(12) * longest);
    float* row[6];
    float* t[6];
    for (int r = 0; r < 6; ++r) row[r] = buf.data() + r * longest, t[r] = buf.data() + (6 + r) * longest;
    for (int j = 0; j < nt;) {
        const Run run = run_at(s, t0, nt, j);
        j += run.n;
        // The run's six input rows, columns x0 .. x0+L-1, zeros outside the input.
        const int L = 4 * run.n + 4, x0 = 4 * run.tx0 - s.pl, n = run.n;
        const int lo = std::max(0, -x0), hi = std::min(L, s.IW - x0);  // columns inside the input
        for (int c = 0; c < s.C; ++c) {
            const float* plane = in + size_t(c) * s.IH * s.IW;
            for (int r = 0; r < 6; ++r) {
                const int y = 4 * run.ty - s.pt + r;
                if (y < 0 || y >= s.IH || lo >= hi) {
                    std::fill(row[r], row[r] + L, 0.0f);
                    continue;
                }
                if (lo > 0) std::fill(row[r], row[r] + lo, 0.0f);  // (most runs have no padding to fill)
                std::copy(plane + size_t(y) * s.IW + x0 + lo, plane + size_t(y) * s.IW + x0 + hi, row[r] + lo);
                if (hi < L) std::fill(row[r] + hi, row[r] + L, 0.0f);
            }
            for (int x = 0; x < L; ++x) {  // B^T d on every column at once, written as phases
                float v[6];
                input_rows(row[0][x], row[1][x], row[2][x], row[3][x], row[4][x], row[5][x], v);
                const int k = x >> 2, q = x & 3;
                for (int i = 0; i < 6; ++i) t[i][q * most + k] = v[i];
            }
            for (int i = 0; i < 6; ++i) {  // (B^T d) B, tile by tile
                float* v = V + size_t(6 * i) * xi_stride + size_t(c) * nt + run.j;
                const float *p0 = t[i], *p1 = p0 + most, *p2 = p1 + most, *p3 = p2 + most;
                for (int k = 0; k < n; ++k) {
                    float w[6];
                    input_rows(p0[k], p1[k], p2[k], p3[k], p0[k + 1], p1[k + 1], w);
                    for (int q = 0; q < 6; ++q) v[q * xi_stride + k] = w[q];
                }
            }
        }
    }
}

LENET5_CPU_CLONES
void winograd_output(const WinogradShape& s, const float* M, int t0, int nt, int m0, int mw, const float* bias,
                     Activation act, float* out) {
    const size_t xi_stride = size_t(mw) * nt;
    const int most = s.tiles_w();
    std::vector<float> buf(size_t(24 + 4) * most);  // A^T m: [row][column][tile]; then one output row
    float* line = buf.data() + size_t(24) * most;
    for (int j = 0; j < nt;) {
        const Run run = run_at(s, t0, nt, j);
        j += run.n;
        const int y = 4 * run.ty, x = 4 * run.tx0, width = std::min(4 * run.n, s.OW - x), n = run.n;
        for (int m = 0; m < mw; ++m) {
            const float* p = M + size_t(m) * nt + run.j;
            const float b = bias[m0 + m];
            for (int col = 0; col < 6; ++col) {
                const float* q0 = p + size_t(col) * xi_stride;
                for (int k = 0; k < n; ++k) {
                    float o[4];
                    output_rows(q0[k], q0[6 * xi_stride + k], q0[12 * xi_stride + k], q0[18 * xi_stride + k],
                                q0[24 * xi_stride + k], q0[30 * xi_stride + k], o);
                    for (int r = 0; r < 4; ++r) buf[size_t(r * 6 + col) * most + k] = o[r];
                }
            }
            float* plane = out + size_t(m0 + m) * s.OH * s.OW;
            for (int r = 0; r < 4 && y + r < s.OH; ++r) {  // (A^T m) A, one output row at a time
                const float* a = buf.data() + size_t(r * 6) * most;
                for (int k = 0; k < n; ++k) {
                    float o[4];
                    output_rows(a[k], a[most + k], a[2 * most + k], a[3 * most + k], a[4 * most + k], a[5 * most + k], o);
                    for (int q = 0; q < 4; ++q) line[4 * k + q] = o[q] + b;
                }
                activate_into(line, width, act, plane + size_t(y + r) * s.OW + x);
            }
        }
    }
}

}  // namespace lenet5
