#!/usr/bin/env python3
"""Fits the SIMD tanh of simd_layers.h and checks it in float arithmetic.

tanh(x) ~ x P(x^2) / Q(x^2) with P of degree 4 (monic) and Q of degree 3, for the least largest
relative error on [0, 7.905] (beyond it tanh rounds to 1 in float): Lawson's iteration over a
weighted linear least-squares fit of P - (tanh(x)/x) Q. Prints the coefficients as the C++
reads them, then the largest relative error of the float evaluation (the same operations, each
rounded to float) against tanh in double over 20 million points of [0, 9] and 100,000 tiny ones.

    /usr/bin/python3 cpu_opt/fit_tanh.py     (needs numpy)
"""
import numpy as np

CLAMP = 7.90531110763549805
P_DEGREE, Q_DEGREE = 4, 3


def fit(iterations=400):
    x = np.linspace(1e-4, CLAMP, 200_000)
    t, f = x * x, np.tanh(x) / x
    # Unknowns p0..p4, q1..q3 with q0 = 1: P(t) - f q1 t - f q2 t^2 - f q3 t^3 = f.
    a = np.hstack([np.vstack([t**k for k in range(P_DEGREE + 1)]).T,
                   -f[:, None] * np.vstack([t**k for k in range(1, Q_DEGREE + 1)]).T])
    weights, q_prev, best = np.ones_like(t), np.ones_like(t), None
    for _ in range(iterations):
        scale = np.sqrt(weights) / (f * q_prev)  # relative error, linearised at the last Q
        sol, *_ = np.linalg.lstsq(a * scale[:, None], f * scale, rcond=None)
        p, q = sol[:P_DEGREE + 1], np.concatenate([[1.0], sol[P_DEGREE + 1:]])
        q_prev = np.polyval(q[::-1], t)
        err = (np.polyval(p[::-1], t) / q_prev - f) / f
        if best is None or np.abs(err).max() < best[0]:
            best = (np.abs(err).max(), p, q)
        weights = weights * np.abs(err)
        weights /= weights.sum()
    _, p, q = best
    return p / p[-1], q / p[-1]  # P monic: its first Horner step is an add


def tanh_float(x, p, q):
    f32 = np.float32
    fma = lambda a, b, c: (a.astype(np.float64) * b + c).astype(f32)  # one rounding, as an fma
    x = np.minimum(f32(CLAMP), np.maximum(f32(-CLAMP), x))
    t = (x * x).astype(f32)
    pp = (t + p[3]).astype(f32)
    for k in (2, 1, 0):
        pp = fma(pp, t, p[k])
    qq = fma(np.full_like(t, q[3]), t, q[2])
    for k in (1, 0):
        qq = fma(qq, t, q[k])
    return ((pp * x).astype(f32) / qq).astype(f32)


def main():
    p, q = fit()
    p32, q32 = p.astype(np.float32), q.astype(np.float32)
    print("P (t^0..t^3, t^4 = 1):", ", ".join("%.9ef" % v for v in p32[:P_DEGREE]))
    print("Q (t^0..t^3):         ", ", ".join("%.9ef" % v for v in q32))
    x = np.concatenate([np.linspace(0, 9, 20_000_001).astype(np.float32),
                        np.logspace(-30, 0, 100_000).astype(np.float32)])
    ref = np.tanh(x.astype(np.float64))
    rel = np.abs(tanh_float(x, p32, q32) - ref) / np.maximum(ref, 1e-38)
    print("largest relative error in float: %.3g at x = %.7g" % (rel.max(), x[np.argmax(rel)]))


if __name__ == "__main__":
    main()
