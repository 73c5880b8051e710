"""Side-by-side timings of the training engine, reported as ratios in one run.

1. Compiled GD (``jit`` + ``lax.scan``) vs a Python loop over a jitted step.
2. One ``vmap`` ensemble vs the same runs one after another.
3. Gradient flow (diffrax, adaptive) vs GD: solver steps needed to match the flow
   solution at t_max to 1e-6 relative.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/bench_engine.py [--quick]``).
Timings exclude compilation (each function is run once before it is timed).
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import biasfree as bf


def best_of(fn, repeat=3):
    fn()  # compile / warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return min(times)


def main(quick: bool) -> None:
    d, n, m = (10, 200, 20) if quick else (20, 1000, 100)
    steps, B = (300, 4) if quick else (2000, 8)
    key = jax.random.PRNGKey(0)
    target, _ = bf.sine_target(key, d)
    data = bf.make_dataset(key, target, n, d, whitened=True)
    params = bf.init_gaussian(jax.random.PRNGKey(1), (d, m, 1), 0.01)
    cfg = bf.GDConfig(alpha=0.0, lr=0.02, steps=steps, n_records=2)

    grad = jax.jit(jax.grad(bf.objective), static_argnames=("loss",))

    def python_loop():
        p = params
        for _ in range(steps):
            g = grad(p, data.X, data.Y, 0.0, 0.0, "mse")
            p = jax.tree_util.tree_map(lambda a, b: a - cfg.lr * b, p, g)
        return p

    t_scan = best_of(lambda: bf.gd(params, data, cfg).loss)
    t_loop = best_of(python_loop, repeat=1)
    print(f"[1] GD {steps} steps, N={2 * n}, d={d}, m={m}: scan {t_scan:.3f}s, "
          f"python loop {t_loop:.3f}s -> scan is {t_loop / t_scan:.1f}x faster")

    keys = jax.random.split(jax.random.PRNGKey(2), B)
    batch = jax.vmap(lambda k: bf.init_gaussian(k, (d, m, 1), 0.01))(keys)
    alphas = np.linspace(0, 1, B)
    t_vmap = best_of(lambda: bf.gd_ensemble(batch, data, cfg, alpha=alphas).loss)

    def sequential():
        return [bf.gd(jax.tree_util.tree_map(lambda a, i=i: a[i], batch), data,
                      bf.GDConfig(alpha=float(alphas[i]), lr=cfg.lr, steps=steps,
                                  n_records=2)).loss for i in range(B)]

    t_seq = best_of(sequential, repeat=1)
    print(f"[2] ensemble of {B}: vmap {t_vmap:.3f}s, sequential {t_seq:.3f}s -> "
          f"{t_seq / t_vmap:.1f}x")

    t_max = 8.0
    ref = bf.flow(params, data, bf.FlowConfig(alpha=0.0, t_max=t_max, n_records=2, rtol=1e-12,
                                              atol=1e-14))
    fl = bf.flow(params, data, bf.FlowConfig(alpha=0.0, t_max=t_max, n_records=2, rtol=1e-7,
                                             atol=1e-9))
    L_ref = float(ref.loss[-1])
    fl_err = abs(float(fl.loss[-1]) - L_ref) / L_ref
    need = None
    for k in (100, 1000, 10_000, 100_000):
        tr = bf.gd(params, data, bf.GDConfig(alpha=0.0, lr=t_max / k, steps=k, n_records=2))
        err = abs(float(tr.loss[-1]) - L_ref) / L_ref
        if err <= max(fl_err, 1e-6):
            need = k
            break
    print(f"[3] gradient flow to t={t_max}: diffrax {int(fl.stats['steps'])} adaptive steps "
          f"(rel. error {fl_err:.1e}); GD needs {need or '>100000'} steps for the same "
          f"accuracy (last tried error {err:.1e})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    main(ap.parse_args().quick)
