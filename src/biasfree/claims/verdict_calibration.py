"""How far can `analyse`'s verdict be trusted? Its prediction of training, from the init
alone, against the truth measured by training, over a grid of nets and data.

docs/theory.md §6. At each point of a grid (init scale σ from 1e-4 to PyTorch's default,
width m, data asymmetry, depth 2 and 3, biases on and off) :func:`biasfree.analyse` is
called *without* training, and its training answer (``verdict.training``: the twin
theory's assumptions and the predicted gap, §6.4) is read as "linear" when it is
*exactly* or *effectively linear*. The truth is measured: the net and its linear twin
(the bias-free weights × the twin scale, step × k_t: what a user would predict from the
twin) trained by the same GD, with the gap

    D = max over every step k of |L(θ_k) − L_twin(θ̃_k)| / L(0)

(:func:`~biasfree.dynamics.twin_training.train_with_twin`); "linear" when D ≤ 0.3% (the paper's
level). The step is analyse's default (a quarter of the estimated stability limit), the
run analyse's default horizon, at most ``max_steps`` steps.

Data: the paper's (Gaussian inputs and their negatives, whitened; odd target
``wᵀx + sin(4wᵀx)``). Asymmetry a ∈ [0, 1]: that fraction of the mirror half is replaced
by fresh independent draws (a = 1: no point has its mirror). The PyTorch column is
nn.Linear's default init, U(±1/√fan_in) for weights and biases.

Checks (counts, not tuned rates): the verdict never calls "linear" a point whose measured
gap exceeds 0.3% (false "linear"), and every point refused for a structural reason
(biases, asymmetric inputs, depth > 2, init not small: §6.4) is measured off its twin. The
agreement and the confusion table are metrics; the closing note lists the disagreements.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np

from ..analysis import regime as rg
from ..analysis import verdict as vd
from ..analysis.analyse import analyse
from ..core.data import symmetrize
from ..core.layers import Layer, scale_params
from ..core.moments import whiten
from ..core.targets import sine_target
from ..core.twin import slope_factor
from ..dynamics.twin_training import train_with_twin
from ..expressivity.decomposition import net_function, odd_nonlinearity
from ..results import Result, at_most, config_dict
from .base import Experiment, Progress, _quiet, expect_config, require_positive

STRUCTURAL = ("biases", "asymmetric inputs", "depth", "init not small")
"""Reasons of the training prediction that come from the theory's assumptions (§6.4)."""


@dataclass(frozen=True)
class Config:
    """``d`` inputs, ``n`` Gaussian draws (2n points once symmetrised), ``scales`` init stds
    σ (increasing; per weight, biases alike), ``torch_default`` adds PyTorch's default init
    as a last column, ``widths`` hidden widths (increasing), ``asymmetries`` fractions of
    the mirror half replaced by fresh draws, ``depths`` from {2, 3}, ``biases`` from
    {False, True}, ``max_steps`` cap on each truth run's GD steps; ``share_compiles`` pads
    every net to the widest with zero units (:func:`_pad`, exact) so that one compiled loop
    serves every width: cheaper for small nets, whose cost is compilation, dearer for wide
    ones."""

    d: int = 8
    n: int = 100
    scales: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1)
    torch_default: bool = True
    widths: tuple[int, ...] = (8, 32, 128, 512)
    asymmetries: tuple[float, ...] = (0.0, 1.0)
    depths: tuple[int, ...] = (2, 3)
    biases: tuple[bool, ...] = (False, True)
    max_steps: int = 20_000
    share_compiles: bool = False

    def __post_init__(self):
        require_positive(self, "d", "n", "max_steps")
        sc = np.asarray(self.scales, float)
        if sc.size + self.torch_default < 2 or np.any(sc <= 0) or np.any(np.diff(sc) <= 0):
            raise ValueError(f"scales={self.scales} must be increasing positive init stds, with "
                             "torch_default at least 2 columns (the contour needs them)")
        w = np.asarray(self.widths)
        if w.size < 2 or np.any(w < 1) or np.any(np.diff(w) <= 0):
            raise ValueError(f"widths={self.widths} must be >= 2 increasing positive widths")
        if not self.asymmetries or any(not 0.0 <= a <= 1.0 for a in self.asymmetries):
            raise ValueError(f"asymmetries={self.asymmetries} must be fractions in [0, 1]")
        if not self.depths or any(L not in (2, 3) for L in self.depths):
            raise ValueError(f"depths={self.depths} must be taken from (2, 3)")
        if not self.biases or any(not isinstance(b, bool) for b in self.biases):
            raise ValueError(f"biases={self.biases} must be taken from (False, True)")


PRESETS = {
    "tiny": Config(d=4, n=20, scales=(1e-2,), widths=(8, 64), max_steps=3000, share_compiles=True),
    "paper": Config(),
}


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
    expect_config(cfg, Config)
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


EXPERIMENT = Experiment(
    name="verdict-calibration",
    claim="analyse's prediction of training (from the init alone) against the gap to the linear twin "
          "measured by training, over init scale × width × asymmetry × depth × biases.",
    run=run, config=Config, presets=PRESETS,
    paper_claim="Claim 2's accuracy (\"errors below 0.3%\" of L(0) from small init) as a test of "
                "analyse: its verdict from the init alone against the gap measured by training.")
