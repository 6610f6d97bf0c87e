#!/usr/bin/env python3
"""Derives the F(5,5) tile of simd_winograd_tiles.h and compares the points it could use.

For a set of points (finite ones, then infinity) builds Toom-Cook's A^T, G and B^T for F(m,5) in
exact fractions and checks y = A^T [(G g) * (B^T d)] against the correlation on random integers.
Then, for each candidate set, the float error of a C3-like output (4 connections x 5 kernel rows
summed at the points, as the lane code sums them) against the exact sum, as a ratio to the direct
float sum's error, over random inputs in [-1, 1] and weights in [-0.2, 0.2]. Last, the tables of
the chosen set as the C++ reads them (the rows of +a negated, with G's, so that B^T's rows of +a
and -a are E + O and E - O).

    python3 cpu_opt/winograd_points.py [TRIALS]     (standard library only; default 300 trials)
"""
import math
import random
import struct
import sys
from fractions import Fraction as Fr

R = 5  # taps


def poly_times(a, b):
    out = [Fr(0)] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i + j] += x * y
    return out


def matrices(m, points):
    """A^T (m x n), G (n x R), B^T (n x n) for the finite points and infinity, n = m + R - 1."""
    n = m + R - 1
    assert len(points) == n - 1
    at = [[p**j for p in points] + [Fr(int(j == m - 1))] for j in range(m)]
    g, bt = [], []
    for i, p in enumerate(points):
        f = math.prod((p - q for k, q in enumerate(points) if k != i), start=Fr(1))
        g.append([p**k / f for k in range(R)])
        row = [Fr(1)]
        for k, q in enumerate(points):
            if k != i:
                row = poly_times(row, [-q, Fr(1)])
        bt.append(row + [Fr(0)] * (n - len(row)))
    g.append([Fr(int(k == R - 1)) for k in range(R)])
    row = [Fr(1)]
    for q in points:
        row = poly_times(row, [-q, Fr(1)])
    bt.append(row)
    return at, g, bt


def exact(m, at, g, bt, trials=20):
    n = m + R - 1
    rng = random.Random(0)
    for _ in range(trials):
        d = [Fr(rng.randint(-9, 9)) for _ in range(n)]
        w = [Fr(rng.randint(-9, 9)) for _ in range(R)]
        u = [sum(g[i][k] * w[k] for k in range(R)) for i in range(n)]
        v = [sum(bt[i][k] * d[k] for k in range(n)) for i in range(n)]
        y = [sum(at[j][i] * u[i] * v[i] for i in range(n)) for j in range(m)]
        if y != [sum(w[k] * d[j + k] for k in range(R)) for j in range(m)]:
            return False
    return True


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def times(mat, v):  # a matrix (entries rounded to float) times v, each product and sum rounded
    out = []
    for row in mat:
        s = 0.0
        for c, x in zip(row, v):
            if c:
                s = f32(s + f32(c * x))
        out.append(s)
    return out


def error_ratio(m, at, g, bt, trials, connections=4):
    n = m + R - 1
    at, g, bt = ([[f32(float(x)) for x in row] for row in mat] for mat in (at, g, bt))
    rng = random.Random(1)
    err = err_direct = 0.0
    for _ in range(trials):
        rows = [([f32(rng.uniform(-1, 1)) for _ in range(n)], [f32(rng.uniform(-0.2, 0.2)) for _ in range(R)])
                for _ in range(connections * R)]
        want = [math.fsum(w[k] * d[j + k] for d, w in rows for k in range(R)) for j in range(m)]
        sums, direct = [0.0] * n, [0.0] * m
        for d, w in rows:
            u, v = times(g, w), times(bt, d)
            sums = [f32(s + f32(a * b)) for s, a, b in zip(sums, u, v)]
            for j in range(m):
                for k in range(R):
                    direct[j] = f32(direct[j] + f32(w[k] * d[j + k]))
        err += sum((a - b) ** 2 for a, b in zip(times(at, sums), want))
        err_direct += sum((a - b) ** 2 for a, b in zip(direct, want))
    return math.sqrt(err / err_direct)


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    h, q = Fr(1, 2), Fr(1, 4)
    base = [Fr(1), Fr(-1), h, -h, Fr(2), Fr(-2)]
    candidates = {
        "F(4,5): 0, +-1, +-1/2, +-2 (the points of the F(4,5) tile)": (4, [Fr(0)] + base),
        "F(5,5): +-1, +-1/2, +-2, +-1/4 (chosen)": (5, base + [q, -q]),
        "F(5,5): 0, +-1, +-1/2, +-2, 4": (5, [Fr(0)] + base + [Fr(4)]),
        "F(5,5): 0, +-1, +-1/2, +-2, -1/4": (5, [Fr(0)] + base + [-q]),
        "F(5,5): +-1, +-1/2, +-2, +-1/3": (5, base + [Fr(1, 3), Fr(-1, 3)]),
        "F(5,5): +-1, +-1/2, +-2, +-3/2": (5, base + [Fr(3, 2), Fr(-3, 2)]),
        "F(5,5): +-1, +-1/2, +-2, +-3": (5, base + [Fr(3), Fr(-3)]),
    }
    print("float error over the direct sum's (%d trials; every set checked exact)" % trials)
    for name, (m, points) in candidates.items():
        mats = matrices(m, points)
        assert exact(m, *mats), name
        print("  %5.2f  %s" % (error_ratio(m, *mats, trials), name))

    at, g, bt = matrices(5, base + [q, -q])
    for p in range(0, 8, 2):  # the rows of +a negated (in G too: the products stay)
        bt[p], g[p] = [-x for x in bt[p]], [-x for x in g[p]]
    assert exact(5, at, g, bt)
    for p in range(0, 8, 2):
        assert all(bt[p + 1][k] == (bt[p][k] if k % 2 == 0 else -bt[p][k]) for k in range(9))

    def c(x):
        return "%d.0f" % x.numerator if x.denominator == 1 else "%d.0f / %d" % (x.numerator, x.denominator)

    print("kGT (by tap):")
    for k in range(R):
        print("  {" + ", ".join(c(g[p][k]) for p in range(9)) + "},")
    print("kBEven, kBOdd (the rows of +a on the inputs 0 2 4 6 and 1 3 5 7):")
    for p in range(0, 8, 2):
        print("  {%s}  {%s}" % (", ".join(c(bt[p][k]) for k in (0, 2, 4, 6)), ", ".join(c(bt[p][k]) for k in (1, 3, 5, 7))))
    assert all(bt[p][8] == 0 for p in range(8)) and all(bt[8][k] == 0 for k in (1, 3, 5, 7))
    print("kBInf (infinity's row on 0 2 4 6 8): {%s}" % ", ".join(c(bt[8][k]) for k in (0, 2, 4, 6, 8)))
    print("kAT (A^T's columns of +a):")
    for j in range(5):
        print("  {" + ", ".join(c(at[j][p]) for p in range(0, 8, 2)) + "},")


if __name__ == "__main__":
    main()
