"""The run of :mod:`biasfree.claims.verdict_calibration` (its claim, config and presets): the
measurements and the checks that compare them with theory."""

from __future__ import annotations

import jax
import numpy as np

from ...analysis import regime as rg
from ...analysis import verdict as vd
from ...analysis.analyse import analyse
from ...core.data import symmetrize
from ...core.layers import Layer, scale_params
from ...core.moments import whiten
from ...core.targets import sine_target
from ...core.twin import slope_factor
from ...dynamics.twin_training import train_with_twin
from ...expressivity.decomposition import net_function, odd_nonlinearity
from ...results import Result, at_most, config_dict
from ..base import Progress, _quiet
from . import STRUCTURAL, Config


def _data(rng, w, cfg: Config, asym: float):
    """Whitened inputs and the paper's target ``wᵀx + sin(4wᵀx)`` (:func:`~biasfree.sine_target`'s
    formula, in NumPy)."""

    def target(X):
        z = X @ np.asarray(w)
        return (z + np.sin(4.0 * z))[:, None]

    X = rng.normal(size=(cfg.n, cfg.d))
    Xs = np.array(symmetrize(X, target(X))[0])
    k = int(round(asym * cfg.n))
    if k:  # replace k mirror points by fresh draws: those k have no mirror
        Xs[cfg.n:cfg.n + k] = rng.normal(size=(k, cfg.d))
    Xw = np.asarray(whiten(Xs)[0])
    return Xw, target(Xw)


def _gaussian(rng, widths, scale, bias):
    """N(0, scale²) weights (and biases): :func:`biasfree.init_gaussian`'s law, drawn by NumPy
    (no compiled random call per shape)."""
    return tuple(Layer(scale * rng.normal(size=(o, i)), scale * rng.normal(size=o) if bias else None)
                 for i, o in zip(widths[:-1], widths[1:], strict=True))


def _torch_default(rng, widths, bias):
    layers = []
    for i, o in zip(widths[:-1], widths[1:], strict=True):
        bound = 1.0 / np.sqrt(i)
        layers.append(Layer(rng.uniform(-bound, bound, (o, i)),
                            rng.uniform(-bound, bound, o) if bias else None))
    return tuple(layers)


def _pad(params, m: int):
    """The same net with every hidden layer padded to ``m`` units of zero weights and biases:
    such a unit outputs σ(0) = 0 and gets zero gradient (its in-gradient carries its zero
    out-weights, its out-gradient its zero output), so GD runs the same function and loss
    step for step, and one compiled loop serves every width."""
    out = []
    for i, la in enumerate(params):
        W = np.asarray(la.W)
        rows = m - W.shape[0] if i < len(params) - 1 else 0
        cols = m - W.shape[1] if i > 0 else 0
        b = None if la.b is None else np.pad(np.asarray(la.b), (0, rows))
        out.append(Layer(np.pad(W, ((0, rows), (0, cols))), b))
    return tuple(out)


def _truth(params, X, Y, max_steps: int, pad_to: int) -> tuple[float, int, bool]:
    """Measured gap D (fraction of L(0)) to the twin of the bias-free weights, the steps run,
    and whether they reached the horizon (False: stopped at ``max_steps``)."""
    L = len(params)
    c = float(slope_factor(0.0))
    ws, ks = c ** ((L - 1) / L), c ** (2 * (L - 1) / L)
    free = tuple(Layer(la.W) for la in params)
    modes = rg.data_modes(X, Y)
    lr = rg.default_lr(free, modes, c)
    a0 = float(np.linalg.norm(odd_nonlinearity(net_function(free, 0.0), X).beta, 2))
    T, _ = rg.default_t_max(modes, a0, ks, depth=L)
    need = int(max(1, np.ceil(T / lr)))
    steps = min(max_steps, need)
    run = train_with_twin(_pad(params, pad_to), _pad(scale_params(free, ws), pad_to), X, Y, alpha=0.0,
                          lr=lr, time_scale=ks, steps=steps, n_records=2)
    return run.gap_max / max(float(run.loss[0]), 1e-300), steps, steps == need


def run(cfg: Config, seed: int = 0, progress: Progress = _quiet) -> Result:
    """Run the experiment from ``cfg`` (e.g. ``PRESETS["tiny"]``) with random ``seed``
    (data, target and every init draw)."""
    rng = np.random.default_rng(seed)
    _, w = sine_target(jax.random.PRNGKey(seed), cfg.d)
    cols = [f"{s:g}" for s in cfg.scales] + (["torch"] if cfg.torch_default else [])
    shape = (len(cfg.depths), len(cfg.biases), len(cfg.asymmetries), len(cfg.widths), len(cols))
    pred = np.zeros(shape, bool)
    gap = np.zeros(shape)
    level = np.zeros(shape, int)
    structural = np.zeros(shape, bool)
    steps = np.zeros(shape, int)
    full = np.zeros(shape, bool)
    for ia, asym in enumerate(cfg.asymmetries):
        X, Y = _data(np.random.default_rng([seed, ia]), w, cfg, asym)
        for iL, L in enumerate(cfg.depths):
            for ib, bias in enumerate(cfg.biases):
                progress(f"depth {L}, biases {bias}, asymmetry {asym:g}")
                for iw, m in enumerate(cfg.widths):
                    widths = (cfg.d,) + (m,) * (L - 1) + (1,)
                    for js, col in enumerate(cols):
                        params = (_torch_default(rng, widths, bias) if col == "torch"
                                  else _gaussian(rng, widths, float(col), bias))
                        t = analyse(params, (X, Y), alpha=0.0, t_max=1.0, n_times=2).verdict.training
                        at = (iL, ib, ia, iw, js)
                        level[at] = vd.LEVELS.index(t.level)
                        pred[at] = t.level in (vd.EXACT, vd.EFFECTIVE)
                        structural[at] = any(r.startswith(STRUCTURAL) for r in t.reasons)
                        gap[at], steps[at], full[at] = _truth(params, X, Y, cfg.max_steps,
                                                              max(cfg.widths) if cfg.share_compiles else m)
    # the truth is the gap over the whole run: a run cut at max_steps (a deep net still on its
    # plateau, both curves flat at L(0)) has no truth and leaves the table
    truth = gap <= vd.PAPER_LEVEL
    table = {"linear_linear": int(np.sum(pred & truth & full)),
             "linear_not": int(np.sum(pred & ~truth & full)),
             "not_linear": int(np.sum(~pred & truth & full)),
             "not_not": int(np.sum(~pred & ~truth & full))}
    agree = float(np.mean((pred == truth)[full])) if full.any() else float("nan")
    checks = {
        "no_false_linear": at_most(
            table["linear_not"], 0,
            "analyse never predicts 'effectively linear' (or exactly) for a net whose measured gap to its "
            "twin exceeds the paper's 0.3% of L(0).", unit="grid points"),
        "structural_refusals_hold": at_most(
            int(np.sum(structural & truth & full)), 0,
            "every net refused for a structural reason (biases, asymmetric inputs, depth > 2, init not "
            "small) is measured more than 0.3% of L(0) off its twin.", unit="grid points"),
    }
    metrics = {"agreement": agree, "points": int(np.sum(full)), "paper_level": vd.PAPER_LEVEL,
               **{f"confusion_{k}": float(v) for k, v in table.items()},
               "capped_runs": float(np.sum(~full))}
    notes = _disagreements(pred, truth, gap, full, cfg, cols) + (
        f" Agreement {100 * agree:.1f}% over the {int(np.sum(full))} points whose truth run reached its "
        f"horizon; {int(np.sum(~full))} runs stopped at max_steps = {cfg.max_steps} have no truth.")
    arrays = {"predicted_linear": pred, "gap": gap, "level": level, "structural": structural, "full": full,
              "steps": steps, "widths": np.asarray(cfg.widths), "depths": np.asarray(cfg.depths),
              "biases": np.asarray(cfg.biases), "asymmetries": np.asarray(cfg.asymmetries, float),
              "columns": np.asarray(cols), "paper_level": np.asarray(vd.PAPER_LEVEL)}
    return Result("verdict-calibration", seed, config_dict(cfg), metrics, checks, arrays, notes)


def _disagreements(pred, truth, gap, full, cfg: Config, cols) -> str:
    """One phrase per disagreeing point: where, what the verdict said, the measured gap."""
    out = []
    for at in zip(*np.nonzero((pred != truth) & full), strict=True):
        iL, ib, ia, iw, js = (int(i) for i in at)
        said = "linear" if pred[at] else "not linear"
        out.append(f"depth {cfg.depths[iL]}, biases {cfg.biases[ib]}, asymmetry {cfg.asymmetries[ia]:g}, "
                   f"width {cfg.widths[iw]}, init {cols[js]}: verdict {said}, measured gap "
                   f"{100 * gap[at]:.3g}% of L(0)")
    if not out:
        return "Verdict and measured truth agree at every point."
    return "Disagreements: " + "; ".join(out) + "."
