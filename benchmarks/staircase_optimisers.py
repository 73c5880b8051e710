"""The saddle-to-saddle staircase beyond gradient descent: measured, not claimed (issue 49,
item 9; the numbers are recorded in docs/theory.md §11.6). Nothing here is a check: each row
prints what it measures.

Three tasks, each from one small init, trained by ``bf.train`` under GD, Adam, sign descent
(``optax.sign_sgd``) and Muon (``optax.contrib.muon``, its defaults: Nesterov momentum 0.95,
5 Newton–Schulz steps on every 2-D weight):

- ``linear``: a two-layer linear net (α = 1, width 8, init std 1e-3) on whitened inputs
  (d = 4, N = 64, XᵀX/N = I exactly) with targets y = Cx, C = U diag(4, 2, 1, 0.5) Vᵀ for
  random rotations U, V (so no mode lies along a coordinate axis);
- ``relu``: a two-layer ReLU net (α = 0, width 16, init std 1e-3) on the same inputs and their
  mirrors −x, with the same odd target;
- ``quadratic``: σ(z) = z², three units aligned with e₁, e₂, e₃ at init scales 0.1, 0.02, 0.004
  (w_i = v_i = b_i), target y = Σ_k x_k², x ~ N(0, I₃), N = 200 (docs/theory.md §11.2).

The step sizes follow one rule: resolve the dynamics in ≳ 1,000 steps, in the flow regime.
GD: η = 0.02, so η s₁ = 0.08 and a GD step's growth factor (1 + ηs)² is within ηs/2 = 4% of the
flow's e^{2ηs} (§11.6). The κ = 0 optimisers (Adam, sign descent, Muon) move each weight entry
(Adam, sign descent) or each singular value of a weight (Muon) by about η a step whatever the
gradient's size: η = 2e-3, so the largest factor singular value of the solution, √s₁ = 2, is
≥ 1,000 steps away. ``--lr-check`` reruns the linear task at η/4 to show the drop-time ratios
do not depend on it.

Per run: losses and effective units (``observables="units"``) at 400 log-spaced steps
(1,000 for the quadratic net, whose last escape is abrupt),
plateaus by :func:`~biasfree.theory.staircase.find_plateaus` (time = step), their levels against
the reference levels (reduced-rank regression ``L_k`` for the linear and ReLU tasks; GD's own
plateau levels for the quadratic task, the losses of the embedded fixed points it visits),
the drop times :func:`~biasfree.theory.staircase.drop_times` and the ratio of successive ones
(GD, linear: ≈ (s_i/s_{i+1})·ln(s_{i+1}/a₀)/ln(s_i/a₀) by §3.1; "one rate" means ratios near 1),
the unit counts visited (held ≥ 3 records) and the final loss. For the linear and ReLU tasks
also each target mode's half time (its strength u_iᵀ M v_i reaching s_i/2, M the net's odd part
c W₂W₁) and their successive ratios: GD's ≈ s_i/s_{i+1} = 2, while additive growth at one rate
(Rhee, Simon & Karkada 2026: each factor singular value grows by ≈ η a step) would give
√(s_{i+1}/s_i) = 0.71, the smaller mode first.

Run: ``python benchmarks/staircase_optimisers.py [--lr-check] [--seed S] [--json FILE]`` (well under two
minutes on 2 cores).
"""

from __future__ import annotations

import argparse

import jax
import numpy as np
import optax
import optax.contrib

import biasfree as bf
from biasfree.core.layers import Layer
from biasfree.dynamics.train_config import record_steps
from biasfree.theory.plateau_times import mode_half_times
from biasfree.theory.reduced_rank import reduced_rank_losses
from biasfree.theory.staircase import drop_times, find_plateaus

S = np.array([4.0, 2.0, 1.0, 0.5])
GD_LR, KAPPA0_LR = 0.02, 2e-3
N_RECORDS = {"linear": 400, "relu": 400, "quadratic": 1000}
"""Log-spaced records per run: the quadratic net's last escape falls within ~2% of its time."""
OPTIMISERS = {"GD": optax.sgd, "Adam": optax.adam, "sign": optax.sign_sgd, "Muon": optax.contrib.muon}


def _rotation(rng, n):
    q, r = np.linalg.qr(rng.normal(size=(n, n)))
    return q * np.sign(np.diag(r))


def linear_data(seed=0, n=64, mirrored=False):
    """Whitened inputs (XᵀX/N = I exactly) and y = Cx, C = U diag(S) Vᵀ; with ``mirrored`` the
    N/2 points and their mirrors −x (still white, the target still odd)."""
    rng = np.random.default_rng(seed)
    d = S.size
    half = n // 2 if mirrored else n
    X = np.linalg.qr(rng.normal(size=(half, d)))[0] * np.sqrt(half)
    if mirrored:
        X = np.vstack([X, -X])
    C = _rotation(rng, d) @ np.diag(S) @ _rotation(rng, d).T
    return bf.Dataset(X, X @ C.T)


def tasks(seed=0):
    """name -> (data, init, α, GD steps, κ=0 steps, reference levels or None)."""
    lin = linear_data(seed)
    sym = linear_data(seed, mirrored=True)
    key = jax.random.PRNGKey(seed)
    rng = np.random.default_rng(seed)
    Xq = rng.normal(size=(200, 3))
    quad = bf.Dataset(Xq, np.sum(Xq**2, axis=1, keepdims=True))
    b = np.array([0.1, 0.02, 0.004])
    return {
        "linear": (lin, bf.init_gaussian(key, (4, 8, 4), scale=1e-3), 1.0, 1500, 4000,
                   reduced_rank_losses(np.asarray(lin.X), np.asarray(lin.Y))),
        "relu": (sym, bf.init_gaussian(key, (4, 16, 4), scale=1e-3), 0.0, 3000, 4000,
                 reduced_rank_losses(np.asarray(sym.X), np.asarray(sym.Y))),
        "quadratic": (quad, (Layer(np.diag(b), activation="quadratic"), Layer(b[None, :])), 0.0, 8000, 4000,
                      None),
    }


def stages(count, hold=3):
    """The unit counts held for ≥ ``hold`` consecutive records, in time order."""
    edges = np.flatnonzero(np.diff(count)) + 1
    bounds = zip(np.r_[0, edges], np.r_[edges, count.size], strict=True)
    return [int(count[s]) for s, e in bounds if e - s >= hold]


def measure(data, init, alpha, opt_name, lr, steps, levels, n_records, modes=False):
    """One run: its staircase, drop times and their ratios, unit stages and final loss; with
    ``modes`` (linear and ReLU tasks) the half times of the target's modes too."""
    run = bf.train(init, data, OPTIMISERS[opt_name](lr), steps=steps, alpha=alpha, n_records=n_records,
                   spacing="log", observables="units", keep_params=modes)
    t = record_steps(steps, n_records, "log").astype(float)  # the trainer's own record steps
    loss = np.asarray(run.loss)
    out = {"optimiser": opt_name, "lr": lr, "steps": steps, "units": stages(np.asarray(run.units["count"])),
           "final": float(loss[-1]), "L0": float(loss[0]), "refused": None}
    try:
        st = find_plateaus(t, loss)
        times = drop_times(t, loss, st)
    except ValueError as err:  # e.g. a fixed-step κ = 0 optimiser's oscillation read as unresolved drops
        out.update(plateaus=None, levels=[], drop_times=[], ratios=[], refused=str(err).split(";")[0])
    else:
        out.update(plateaus=len(st.plateaus), levels=[p.level for p in st.plateaus],
                   drop_times=times.tolist(), ratios=(times[1:] / times[:-1]).tolist())
    if modes:
        half = mode_half_times(t, run.path[0].W, run.path[1].W, data.X, data.Y, alpha)
        out["mode_half_steps"] = half.tolist()
        out["mode_ratios"] = (half[1:] / half[:-1]).tolist()
    if levels is not None:
        out["nearest_k"] = [int(np.argmin(np.abs(levels - lv))) for lv in out["levels"]]
        out["gaps"] = [float(lv - levels[k]) for lv, k in zip(out["levels"], out["nearest_k"], strict=True)]
    return out


def main(lr_check=False, json_path=None, seed=0):
    results = {}
    for name, (data, init, alpha, gd_steps, k0_steps, levels) in tasks(seed).items():
        rows = []
        for opt in OPTIMISERS:
            check = [KAPPA0_LR / 4] if lr_check and name == "linear" else []
            lrs = [GD_LR] if opt == "GD" else [KAPPA0_LR, *check]
            for lr in lrs:
                steps = gd_steps if opt == "GD" else round(k0_steps * KAPPA0_LR / lr)
                rows.append(measure(data, init, alpha, opt, lr, steps, levels, N_RECORDS[name],
                                    modes=name != "quadratic"))
        if levels is None:  # the quadratic net: GD's plateau levels are the fixed points' losses
            levels = np.array(rows[0]["levels"])
            for r in rows:
                r["nearest_k"] = [int(np.argmin(np.abs(levels - lv))) for lv in r["levels"]]
                r["gaps"] = [float(lv - levels[k]) for lv, k in zip(r["levels"], r["nearest_k"], strict=True)]
        print(f"[{name}] reference levels: {np.array2string(np.asarray(levels), precision=4)}")
        for r in rows:
            if r["refused"]:
                print(f"  {r['optimiser']:5s} lr={r['lr']:<7g} steps={r['steps']:<5d} no staircase: "
                      f"find_plateaus refused ({r['refused']}) units={r['units']} final={r['final']:.3g}")
                continue
            print(f"  {r['optimiser']:5s} lr={r['lr']:<7g} steps={r['steps']:<5d} plateaus={r['plateaus']} "
                  f"levels={np.round(r['levels'], 4).tolist()} (k={r['nearest_k']}, "
                  f"gaps={np.array2string(np.asarray(r['gaps']), precision=2)}) "
                  f"drop steps={np.round(r['drop_times'], 1).tolist()} "
                  f"ratios={np.round(r['ratios'], 2).tolist()} "
                  f"units={r['units']} final={r['final']:.3g}")
            if "mode_half_steps" in r:
                print(f"        mode half steps={np.round(r['mode_half_steps'], 1).tolist()} "
                      f"ratios t_(i+1)/t_i={np.round(r['mode_ratios'], 2).tolist()}")
        results[name] = {"levels": np.asarray(levels).tolist(), "runs": rows}
    if json_path:
        from biasfree import store

        store.write_json(json_path, results)
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lr-check", action="store_true", help="rerun the linear task at η/4 (κ = 0 optimisers)")
    ap.add_argument("--json", default=None, help="write the measurements to this file")
    ap.add_argument("--seed", type=int, default=0, help="data rotations, inputs and init (default 0)")
    args = ap.parse_args()
    main(args.lr_check, args.json, args.seed)
