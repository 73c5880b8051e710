"""The cost of recording effective units (docs/theory.md §11.1), side by side in one run.

``bf.train(..., observables="units")`` against ``observables="loss"`` on the same net, data
and records (issue 49: at most 10% over a run with plain losses). Arms alternate, each is
run once before it is timed, and each ratio uses the fastest of its repeats. The row is the ratio of
process CPU time (every thread's; the goal is ratio ≤ 1.10): on a shared machine the wall-clock
ratio of two whole runs carries the other processes' load (it is printed too). The count's own CPU
time (``with_units`` on the weights a losses-only run recorded with ``keep_params``, timed alone)
is printed as a share of the losses-only run. Workloads:

- ``relu``: a two-layer ReLU net, d = 20, width 100, N = 1024 Gaussian points, 3,000 GD
  steps, 101 records (the count merges aligned units: an n × n comparison per record);
- ``linear``: the same net at α = 1 (the count is the rank of W₂W₁: one SVD per record);
- ``quadratic``: the same widths with σ(z) = z².

Run: ``.venv/bin/python benchmarks/bench_units.py [--quick] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import biasfree as bf
from biasfree.dynamics.trajectory import with_units
from biasfree.nets import with_activation


def problem(seed: int = 0, d: int = 20, width: int = 100, n: int = 1024):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = np.sin(X @ rng.normal(size=(d, 1)) / np.sqrt(d)) + X[:, :1] ** 2
    net = bf.init_gaussian(jax.random.PRNGKey(seed), (d, width, 1), scale=1e-3)
    return bf.Dataset(X, Y), net


def race(arms: dict, repeat: int) -> dict:
    """The fastest of ``repeat`` alternating runs of each arm, after one untimed run of each:
    ``{arm: (wall seconds, CPU seconds)}``, each the least over the repeats. The process's CPU
    time (every thread's) leaves out the time spent waiting for a core, which on a shared machine
    is most of a wall-clock difference."""
    for fn in arms.values():
        fn()
    wall, cpu = dict.fromkeys(arms, np.inf), dict.fromkeys(arms, np.inf)
    for _ in range(repeat):
        for k, fn in arms.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[k] = min(wall[k], time.perf_counter() - t0)
            cpu[k] = min(cpu[k], time.process_time() - c0)
    return {k: (wall[k], cpu[k]) for k in arms}


def main(quick: bool, json_path: str | None) -> dict:
    data, net = problem()
    steps, repeat = (300, 2) if quick else (3000, 5)
    out = {}
    for name, alpha, params in (("relu", 0.0, net), ("linear", 1.0, net),
                                ("quadratic", 0.0, with_activation(net, "quadratic"))):
        lr = 0.002 if name == "quadratic" else 0.05

        def arm(obs, params=params, alpha=alpha, lr=lr):
            return lambda: jax.block_until_ready(bf.train(params, data, steps=steps, lr=lr, alpha=alpha,
                                                          n_records=101, observables=obs).loss)
        r = race({"loss": arm("loss"), "units": arm("units")}, repeat)
        (w_loss, c_loss), (w_units, c_units) = r["loss"], r["units"]
        out[f"units_overhead_{name}"] = w_units / w_loss - 1
        out[f"units_cpu_ratio_{name}"] = c_units / c_loss
        kept = bf.train(params, data, steps=steps, lr=lr, alpha=alpha, n_records=101, observables="loss",
                        keep_params=True)
        count = race({"count": lambda kept=kept, alpha=alpha: with_units(kept, alpha, False)},
                     repeat)["count"][1]
        out[f"units_count_share_{name}"] = count / c_loss
        print(f"[units] {name}: {steps} steps, 101 records. CPU: losses only {c_loss:.3f}s, with effective "
              f"units {c_units:.3f}s, ratio {c_units / c_loss:.3f} (goal <= 1.10); the count alone "
              f"{count:.3f}s, {out[f'units_count_share_{name}']:.1%} of the losses-only run. Wall: "
              f"{w_loss:.3f}s and {w_units:.3f}s, ratio {w_units / w_loss:.3f}")
    if json_path:
        from biasfree import store

        store.write_json(json_path, out)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="300 steps, best of 2")
    ap.add_argument("--json", default=None, help="write the ratios to this file")
    args = ap.parse_args()
    main(args.quick, args.json)
