"""One GD step of the "alone" row's measured run, and its gap at other steps (issue 47).

The problem is ``bench_analyse.py``'s row "alone" (784 → 256 → 10 on 5,000 mirror pairs of
pixel-like inputs, an odd target, the init × ``ALONE_SCALE``), run as ``analyse`` runs it: on
the 400 input columns that are not 0 everywhere (``measure_step.reduced``), net and twin side by
side in the one training loop (``biasfree.dynamics.trainer.run_checked``), light records.

- :func:`step_time`: seconds of one step of net + twin, the difference between a run of ``2K``
  and one of ``K`` steps (both compiled first; best of ``reps``), CPU and wall, beside the
  first layer's two products with the data (``X₊W₁ᵀ`` and the gradient's ``(∂L/∂A)ᵀX₊``,
  2·N₊·d′·m multiply-adds) timed alone in the fast layout. Run it with ``PYTHONPATH`` at one
  checkout's ``src`` and then at another's to compare two versions of the loop.
- :func:`fractions`: GD at fractions of the stability limit 2/λ̂ (λ̂ the sharpness ``analyse``
  measured on this net, 92.25: its step 5.42e-3 is a quarter of the limit), each to t = 0.6,
  with the gap |L − L̃|/L_ref at every step: how much the measured gap depends on the step
  (docs/performance.md, "Session 8"; the default step, ``measure_step.STEP_FRACTION``).

Run: ``.venv/bin/python benchmarks/alone_step.py [--steps K] [--fractions 0.125,0.25,0.5] [--t-end T]``
(session 11: ``--fractions 0.015625,0.03125,0.0625,0.125,0.25 --t-end 0.05`` for the gap's early maximum).
"""

from __future__ import annotations

import argparse
import os
import time

LAMBDA = 0.25 * 2.0 / 5.42e-3
"""The sharpness ``analyse`` measures on this net (its step 5.42e-3 is a quarter of 2/λ̂)."""


def problem():
    """``(params, data, twin)`` of the row's run: the net and its twin on the input columns that
    are not 0 everywhere, the data mirrored (``Dataset.mirrored``)."""
    import numpy as np
    from bench_analyse import ALONE_SCALE, SIZES, P
    from bench_analyse import problem as arm

    from biasfree.core.data import unchecked_dataset
    from biasfree.core.twin import twin_weights
    from biasfree.nets import Layer

    d, m, n = SIZES["alone"]
    params, X, Y = arm(d, m, n, "mirrored")
    Z = X @ (np.random.default_rng(1).normal(size=(d, P)) / np.sqrt(d))  # as bench_analyse.one
    Y = Z + Z**3 / 3
    keep = np.flatnonzero(np.any(X != 0, axis=0))
    W1, W2 = (np.asarray(layer.W) * ALONE_SCALE for layer in params)
    params = (Layer(W1[:, keep]), Layer(W2))
    return params, unchecked_dataset(X[:, keep], Y), twin_weights(params, 0.0, 2)


def _run(params, data, twin, lr: float, steps: int, n_records: int = 2):
    from biasfree.dynamics.train_config import GDConfig
    from biasfree.dynamics.trainer import run_checked as train_run

    return train_run(params, data, GDConfig(alpha=0.0, lr=lr, steps=steps, n_records=n_records), twin=twin,
                     observables="loss")


def step_time(steps: int = 20, reps: int = 2) -> dict:
    """One step of net + twin (module doc), float64 as ``analyse`` runs it: ``{"step_cpu_ms",
    "step_wall_ms", "products_cpu_ms", "load"}``."""
    import jax

    with jax.enable_x64(True):  # the loop's internals are called here, not a public function
        return _step_time(steps, reps)


def _step_time(steps: int, reps: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    params, data, twin = problem()
    lr = 0.25 * 2.0 / LAMBDA
    for k in (steps, 2 * steps):  # compile both
        _run(params, data, twin, lr, k)
    best = {}
    for _ in range(reps):
        for k in (steps, 2 * steps):
            c0, t0 = time.process_time(), time.perf_counter()
            jax.block_until_ready(jax.tree_util.tree_leaves(_run(params, data, twin, lr, k).params))
            cw = (time.process_time() - c0, time.perf_counter() - t0)
            best[k] = cw if k not in best else tuple(map(min, best[k], cw))
    X = jnp.asarray(np.asarray(data.inputs))
    W1 = jnp.asarray(np.asarray(params[0].W))
    two = jax.jit(lambda W, X, C: (W @ X.T, C @ X))  # A^T = W1 X^T and (dL/dA^T) X: the fast forms
    C = jnp.asarray(np.random.default_rng(0).normal(size=(W1.shape[0], X.shape[0])))
    jax.block_until_ready(two(W1, X, C))
    c0 = time.process_time()
    for _ in range(10):
        jax.block_until_ready(two(W1, X, C))
    return {"step_cpu_ms": 1e3 * (best[2 * steps][0] - best[steps][0]) / steps,
            "step_wall_ms": 1e3 * (best[2 * steps][1] - best[steps][1]) / steps,
            "products_cpu_ms": 1e3 * (time.process_time() - c0) / 10, "load": os.getloadavg()[0]}


def fractions(fracs=(0.125, 0.25, 0.5), t_end: float = 0.6) -> list[dict]:
    """GD at each fraction of the limit 2/λ̂ to ``t_end`` (module doc): the gap's maximum over the
    steps (of L_ref = max(L(θ₀), ½<‖y‖²>)), its step and time, and both losses at the end."""
    import jax
    import numpy as np

    from biasfree.dynamics.diagnosis import DivergenceError

    params, data, twin = problem()
    Y = np.asarray(data.Y)
    rows = []
    assert jax.config.jax_enable_x64, "float64, as analyse runs it: call inside jax.enable_x64(True)"
    for frac in fracs:
        lr = frac * 2.0 / LAMBDA
        steps = int(np.ceil(t_end / lr))
        try:
            tr = _run(params, data, twin, lr, steps, n_records=steps + 1)
        except DivergenceError as e:  # past the limit of the sharpness on the way
            rows.append({"fraction": frac, "lr": lr, "steps": steps, "diverged": str(e).split(":")[0]})
            continue
        L, Lt = np.asarray(tr.loss), np.asarray(tr.twin.loss)
        gap = np.abs(L - Lt) / max(L[0], 0.5 * np.mean(np.sum(Y**2, axis=1)))
        k = int(np.argmax(gap))
        rows.append({"fraction": frac, "lr": lr, "steps": steps, "gap_max": float(gap[k]), "step": k,
                     "t": k * lr, "loss_end": float(L[-1]), "twin_loss_end": float(Lt[-1])})
    return rows


if __name__ == "__main__":
    import jax

    jax.config.update("jax_enable_x64", True)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="K: a step is a 2K-step run less a K-step one")
    ap.add_argument("--fractions", default="", help="comma-separated fractions of the stability limit")
    ap.add_argument("--t-end", type=float, default=0.6, help="the time each --fractions run goes to")
    a = ap.parse_args()
    if a.fractions:
        for r in fractions(tuple(float(f) for f in a.fractions.split(",")), a.t_end):
            if "diverged" in r:
                print(f"{r['fraction']:g} of the limit: lr {r['lr']:.4g}: {r['diverged']}")
                continue
            print(f"{r['fraction']:g} of the limit: lr {r['lr']:.4g}, {r['steps']} steps to t = {a.t_end:g}: "
                  "gap max "
                  f"{100 * r['gap_max']:.4f}% of L_ref at step {r['step']} (t = {r['t']:.4g}); at the end "
                  f"L = {r['loss_end']:.6g}, L~ = {r['twin_loss_end']:.6g}", flush=True)
    else:
        s = step_time(a.steps)
        print(f"load {s['load']:.1f}: one step of net + twin {s['step_cpu_ms']:.1f} ms CPU, "
              f"{s['step_wall_ms']:.1f} ms wall; its two first-layer products alone "
              f"{s['products_cpu_ms']:.1f} ms CPU "
              f"({s['step_cpu_ms'] / s['products_cpu_ms']:.2f}x)")
