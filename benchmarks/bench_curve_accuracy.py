"""The stiff two-layer solver against DOP853 where DOP853 finishes: bench_analyse's small arm
(64→256→10 on 5,000 raw pixel-like inputs, ReLU), its linear twin √c·(W_1, W_2) over the horizon
``analyse`` picks (201 points, time × c), DOP853 at rtol 1e-11 against ROS34PW2 at analyse's
rtol 1e-6 and at the default 1e-8: seconds, steps, max|ΔL|/L(0) and max|ΔP|/max|P|.

Run: ``.venv/bin/python benchmarks/bench_curve_accuracy.py`` (DOP853 takes a minute or more).
"""

from __future__ import annotations

import time

import numpy as np
from bench_analyse import SIZES, problem

import biasfree as bf
from biasfree.core.layers import Layer
from biasfree.theory.reference import _linear_net_ode, _moment_loss


def main() -> None:
    params, X, Y = problem(*SIZES["small"], "raw")
    c = 0.5  # ReLU
    res = bf.analyse(params, (X, Y), alpha=0.0)
    ts = c * np.asarray(res.prediction.t)
    lin = tuple(Layer(np.sqrt(c) * np.asarray(layer.W)) for layer in params)
    N = X.shape[0]
    Sxx, Syx, y_power = X.T @ X / N, Y.T @ X / N, float(np.sum(Y**2) / N)
    out = {}
    for name, kw in (("dop853", dict(solver="dop853")), ("ros34pw2 1e-6", dict(solver="ros34pw2", rtol=1e-6,
                                                                              atol=1e-9)),
                     ("ros34pw2 1e-8", dict(solver="ros34pw2"))):
        stats: dict = {}
        t0 = time.perf_counter()
        P = _linear_net_ode(lin, Sxx, Syx, ts, 0.0, stats=stats, **kw)
        out[name] = (P, _moment_loss(P, Sxx, Syx, y_power))
        print(f"{name:14} {time.perf_counter() - t0:7.2f} s  steps {stats.get('steps', '-')}", flush=True)
    P0, L0 = out["dop853"]
    for name in ("ros34pw2 1e-6", "ros34pw2 1e-8"):
        P, L = out[name]
        print(f"{name:14} max|ΔL|/L(0) {np.max(np.abs(L - L0)) / L0[0]:.2g}  "
              f"max|ΔP|/max|P| {np.max(np.abs(P - P0)) / np.max(np.abs(P0)):.2g}")


if __name__ == "__main__":
    main()
