#include "winograd_host.h"

#include <algorithm>

#include "cpu_clones.h"

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

// dst[x] = act(src[x]) for x < n; the branch outside the loops so that each vectorises.
void store(const float* src, int n, InferAct act, float* dst) {
    if (act == InferAct::None) std::copy(src, src + n, dst);
    else if (act == InferAct::Relu)
        for (int x = 0; x < n; ++x) dst[x] = std::max(src[x], 0.0f);
    else
        for (int x = 0; x < n; ++x) dst[x] = activate(act, src[x]);
}

}  // namespace

std::vector<float> winograd_filters(const std::vector<float>& weight, int OC, int C) {
    std::vector<float> U(size_t(16) * OC * C);
    for (int o = 0; o < OC; ++o)
        for (int c = 0; c < C; ++c) {
            const float* g = weight.data() + (size_t(o) * C + c) * 9;
            float r[4][3];  // G g: rows g0, (g0+g1+g2)/2, (g0-g1+g2)/2, g2
            for (int k = 0; k < 3; ++k) {
                r[0][k] = g[k];
                r[1][k] = 0.5f * (g[k] + g[3 + k] + g[6 + k]);
                r[2][k] = 0.5f * (g[k] - g[3 + k] + g[6 + k]);
                r[3][k] = g[6 + k];
            }
            for (int i = 0; i < 4; ++i) {  // (G g) G^T: the same on each row's three columns
                const float u[4] = {r[i][0], 0.5f * (r[i][0] + r[i][1] + r[i][2]), 0.5f * (r[i][0] - r[i][1] + r[i][2]),
                                    r[i][2]};
                for (int k = 0; k < 4; ++k) U[(size_t(i * 4 + k) * OC + o) * C + c] = u[k];
            }
        }
    return U;
}

LENET5_CPU_CLONES
void winograd_input(const WinogradShape& s, const float* in, int t0, int nt, float* V) {
    const size_t xi_stride = size_t(s.C) * nt;
    std::vector<float> buf(size_t(8) * (2 * s.tiles_w() + 2));
    for (int j = 0; j < nt;) {
        const Run run = run_at(s, t0, nt, j);
        j += run.n;
        // The run's four input rows, columns x0 .. x0+L-1, zeros outside the input.
        const int L = 2 * run.n + 2, x0 = 2 * run.tx0 - s.pl;
        float* row[4] = {buf.data(), buf.data() + L, buf.data() + 2 * L, buf.data() + 3 * L};
        float* t[4] = {buf.data() + 4 * L, buf.data() + 5 * L, buf.data() + 6 * L, buf.data() + 7 * L};
        const int lo = std::max(0, -x0), hi = std::min(L, s.IW - x0);  // columns inside the input
        for (int c = 0; c < s.C; ++c) {
            const float* plane = in + size_t(c) * s.IH * s.IW;
            for (int r = 0; r < 4; ++r) {
                const int y = 2 * run.ty - s.pt + r;
                if (y < 0 || y >= s.IH || lo >= hi) {
                    std::fill(row[r], row[r] + L, 0.0f);
                    continue;
                }
                std::fill(row[r], row[r] + lo, 0.0f);
                std::copy(plane + size_t(y) * s.IW + x0 + lo, plane + size_t(y) * s.IW + x0 + hi, row[r] + lo);
                std::fill(row[r] + hi, row[r] + L, 0.0f);
            }
            for (int x = 0; x < L; ++x) {  // B^T d on every column at once
                t[0][x] = row[0][x] - row[2][x];
                t[1][x] = row[1][x] + row[2][x];
                t[2][x] = row[2][x] - row[1][x];
                t[3][x] = row[1][x] - row[3][x];
            }
            for (int i = 0; i < 4; ++i) {  // (B^T d) B, tile by tile
                float* v = V + size_t(4 * i) * xi_stride + size_t(c) * nt + run.j;
                const float* a = t[i];
                for (int k = 0; k < run.n; ++k) {
                    v[k] = a[2 * k] - a[2 * k + 2];
                    v[xi_stride + k] = a[2 * k + 1] + a[2 * k + 2];
                    v[2 * xi_stride + k] = a[2 * k + 2] - a[2 * k + 1];
                    v[3 * xi_stride + k] = a[2 * k + 1] - a[2 * k + 3];
                }
            }
        }
    }
}

LENET5_CPU_CLONES
void winograd_output(const WinogradShape& s, const float* M, int t0, int nt, int m0, int mw, const float* bias,
                     InferAct act, float* out) {
    const size_t xi_stride = size_t(mw) * nt;
    std::vector<float> buf(size_t(2) * (2 * s.tiles_w()));
    for (int j = 0; j < nt;) {
        const Run run = run_at(s, t0, nt, j);
        j += run.n;
        float* top = buf.data();
        float* bottom = buf.data() + 2 * run.n;
        const int y = 2 * run.ty, x = 2 * run.tx0, width = std::min(2 * run.n, s.OW - x);
        for (int m = 0; m < mw; ++m) {
            const float* p = M + size_t(m) * nt + run.j;
            const float b = bias[m0 + m];
            for (int k = 0; k < run.n; ++k) {
                float s0[4], s1[4];  // A^T m: rows 0+1+2 and 1-2-3, per column
                for (int col = 0; col < 4; ++col) {
                    const float m0v = p[size_t(col) * xi_stride + k], m1v = p[size_t(4 + col) * xi_stride + k];
                    const float m2v = p[size_t(8 + col) * xi_stride + k], m3v = p[size_t(12 + col) * xi_stride + k];
                    s0[col] = m0v + m1v + m2v;
                    s1[col] = m1v - m2v - m3v;
                }
                top[2 * k] = s0[0] + s0[1] + s0[2] + b;
                top[2 * k + 1] = s0[1] - s0[2] - s0[3] + b;
                bottom[2 * k] = s1[0] + s1[1] + s1[2] + b;
                bottom[2 * k + 1] = s1[1] - s1[2] - s1[3] + b;
            }
            float* plane = out + size_t(m0 + m) * s.OH * s.OW;
            store(top, width, act, plane + size_t(y) * s.OW + x);
            if (y + 1 < s.OH) store(bottom, width, act, plane + size_t(y + 1) * s.OW + x);
        }
    }
}

}  // namespace lenet5
