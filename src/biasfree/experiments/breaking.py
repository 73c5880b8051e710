"""What breaks the equivalence: biases, asymmetric data, a target with an even part.

THEORY.md §1.3 and §5. Two-layer ReLU-family nets (slope α, c = (1 + α)/2) from the
same antisymmetric-pair init (§2.3), trained by GD on the paper's odd target
``y = wᵀx + sin(4 wᵀx)``. Each run is compared with

- its **linear twin**: ``√c·init`` (biases included, so a biased twin is affine), α = 1,
  step ``η c``, same step count (record j at twin time c t), on the same data;
  deviation ``D = max_t |L(t) - L_lin(c t)| / L(0)``;
- the **linear floor**: the least-squares residual ``min_B ½<||y - Bᵀx||²>`` on the
  training set (``numpy.linalg.lstsq``; with an intercept column for the biased net).
  No linear (or affine) net, however trained, ends below it.

Runs:

- **control**: bias-free, symmetric data (every x with -x), odd target. On a symmetric
  sample the odd and even parts of any function are orthogonal, the odd part of a
  bias-free two-layer net is linear, so its loss is ``≥`` the floor at every time
  (exact, §1.3); the pair init keeps it on the twin's curve to round-off.
- **biases**: the same pair weights plus Gaussian hidden biases: the net is no longer
  odd, the pairing is not preserved, and it can fit the sine.
- **asymmetric data**: bias-free, but the -x half of the inputs is dropped
  (:func:`biasfree.asymmetric_half`); the half set is stored twice so every bias-free
  run has the same number of rows (one compiled program; repeating every point leaves
  the mean loss and its gradient unchanged).
- **even target**: bias-free, symmetric data, target plus ``|x_1|``: the even part of
  the net learns it, which no linear map can.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .. import theory
from ..data import Dataset, abs_target, asymmetric_half, gaussian_inputs, sine_target, symmetrize
from ..nets import Layer, init_gaussian, init_pairs, slope_factor
from ..train import GDConfig
from ._common import PAPER_LEVEL, ROUND_OFF, run_with_twins, twin_gap
from .base import (
    Experiment,
    Progress,
    Result,
    _quiet,
    at_least,
    at_most,
    config_dict,
    expect_config,
    require_positive,
)

CASES = ("control", "biases", "asymmetric_data", "even_target")


@dataclass(frozen=True)
class Config:
    """``d`` input size, ``n`` Gaussian draws (2n points once symmetrised), ``freq``
    the sine's frequency, ``width`` hidden units, ``alpha`` slope, ``scale`` std of
    the pair init, ``bias_scale`` std of the hidden biases, ``lr`` GD step η,
    ``steps`` GD steps, ``n_records`` records."""

    d: int = 3
    n: int = 200
    freq: float = 4.0
    width: int = 64
    alpha: float = 0.0
    scale: float = 0.05
    bias_scale: float = 0.05
    lr: float = 0.05
    steps: int = 10000
    n_records: int = 201

    def __post_init__(self):
        require_positive(self, "lr", "steps", "n_records")
        if self.d < 1 or self.n < self.d:
            raise ValueError(f"need d >= 1 and n >= d draws, got d={self.d}, n={self.n}")
        if self.width < 2 or self.width % 2:
            raise ValueError(f"width={self.width} must be even and >= 2 (pair init)")
        if self.scale <= 0 or self.bias_scale <= 0:
            raise ValueError("scale and bias_scale must be > 0")


PRESETS = {
    "tiny": Config(n=100, width=32, steps=3000),
    "paper": Config(),
}


@partial(jax.jit, static_argnums=1)
def _setup(key, cfg: Config):
    """Symmetric inputs, odd sine targets, the even-target variant, one pair init and
    hidden biases."""
    k_x, k_w, k_pair, k_bias = jax.random.split(key, 4)
    target, _ = sine_target(k_w, cfg.d, cfg.freq)
    X = gaussian_inputs(k_x, cfg.n, cfg.d)
    X, Y = symmetrize(X, target(X))
    params = init_pairs(k_pair, (cfg.d, cfg.width, 1), cfg.scale)
    b = init_gaussian(k_bias, (cfg.d, cfg.width, 1), cfg.bias_scale, bias=True)[0].b
    return X, Y, Y + abs_target(0)(X), params, b


def _batch1(params):
    return jax.tree_util.tree_map(lambda a: np.asarray(a)[None], params)


def run(cfg: Config, seed: int = 0, progress: Progress = _quiet) -> Result:
    """Run the experiment from ``cfg`` (e.g. ``PRESETS["tiny"]``) with random ``seed``."""
    expect_config(cfg, Config)
    c = float(slope_factor(cfg.alpha))

    progress("data and initialisation")
    X, Y, Y_even, pair, b = _setup(jax.random.PRNGKey(seed), cfg)
    Xh, Yh = asymmetric_half(X, Y)
    biased = (Layer(pair[0].W, b), Layer(pair[1].W, jnp.zeros(1)))
    datasets = {"control": Dataset(X, Y), "biases": Dataset(X, Y),
                "asymmetric_data": Dataset(jnp.concatenate([Xh, Xh]), jnp.concatenate([Yh, Yh])),
                "even_target": Dataset(X, Y_even)}
    lf = theory.linear_floor
    floors = {"control": lf(X, Y), "biases": lf(X, Y, intercept=True),
              "asymmetric_data": lf(Xh, Yh), "even_target": lf(X, Y_even)}
    gd_cfg = GDConfig(lr=cfg.lr, steps=cfg.steps, n_records=cfg.n_records)

    runs = {}
    for case in CASES:
        progress(f"{case.replace('_', ' ')}: GD and linear twin")
        net = biased if case == "biases" else pair
        runs[case] = run_with_twins(_batch1(net), datasets[case], gd_cfg, cfg.alpha)

    progress("checks")
    D = {k: float(twin_gap(*v)[0]) for k, v in runs.items()}
    L = {k: np.asarray(v[0].loss[0]) for k, v in runs.items()}
    L_twin = {k: np.asarray(v[1].loss[0]) for k, v in runs.items()}
    below = {k: (floors[k] - L[k][-1]) / floors[k] for k in CASES}
    ctrl_margin = float(np.min(L["control"] - floors["control"]) / floors["control"])

    checks = {
        "control_on_linear_curve": at_most(
            D["control"], ROUND_OFF,
            "Bias-free, symmetric data, odd target, pair init: the ReLU-family net's loss "
            "equals its linear twin's (time c t) to round-off (§2.3).",
            unit="fraction of L(0)"),
        "control_never_below_linear_floor": at_least(
            ctrl_margin, -ROUND_OFF,
            "Bias-free on symmetric data the loss never goes below the least-squares linear "
            "floor, at any time (odd part linear, even part orthogonal to it, §1.3).",
            unit="fraction of the linear floor"),
    }
    claims = {
        "biases": "with hidden biases",
        "asymmetric_data": "on asymmetric data (the -x half dropped)",
        "even_target": "with the target's even part |x1| added",
    }
    for case, how in claims.items():
        checks[f"{case}_leave_linear_curve"] = at_least(
            D[case], PAPER_LEVEL,
            f"From the same pair init, {how}, the net leaves its linear twin's curve by at "
            "least the paper's 0.3% of L(0).",
            unit="fraction of L(0)")
        checks[f"{case}_beat_linear_floor"] = at_least(
            below[case], PAPER_LEVEL,
            f"{how[0].upper() + how[1:]}, the net ends at least 0.3% below the best linear "
            "least-squares loss on its training set, which no linear net can do.",
            unit="fraction of the linear floor")

    metrics = {"c": c, "control_min_margin_above_floor": ctrl_margin}
    for case in CASES:
        metrics[f"{case}_deviation_from_twin"] = D[case]
        metrics[f"{case}_linear_floor"] = floors[case]
        metrics[f"{case}_final_loss"] = float(L[case][-1])
        metrics[f"{case}_twin_final_loss"] = float(L_twin[case][-1])
        metrics[f"{case}_fraction_below_floor"] = float(below[case])
        metrics[f"{case}_final_even_energy"] = float(runs[case][0].even_energy[0, -1])
    metrics["biases_linear_floor_without_intercept"] = floors["control"]

    arrays = {"t": np.asarray(runs["control"][0].t[0]), "cases": np.asarray(CASES),
              "loss": np.stack([L[k] for k in CASES]),
              "loss_twin": np.stack([L_twin[k] for k in CASES]),
              "even_energy": np.stack([np.asarray(runs[k][0].even_energy[0]) for k in CASES]),
              "floor": np.asarray([floors[k] for k in CASES]),
              "deviation": np.asarray([D[k] for k in CASES]), "c": np.asarray(c),
              "alpha": np.asarray(cfg.alpha)}
    notes = (f"Slope α = {cfg.alpha:g} (c = {c:g}), width {cfg.width}, pair init std "
             f"{cfg.scale:g}, GD η = {cfg.lr:g} for {cfg.steps} steps. Fraction below the "
             "linear floor at the end: " + ", ".join(f"{k} {below[k]:.3g}" for k in CASES) + ".")
    return Result("breaking", seed, config_dict(cfg), metrics, checks, arrays, notes)


EXPERIMENT = Experiment(
    name="breaking",
    claim="Biases, asymmetric data or an even target make a ReLU net leave the linear curve "
          "and beat the linear floor; the bias-free symmetric control cannot.",
    run=run, config=Config, presets=PRESETS,
    paper_claim=("Claim 4 (consequences), what breaks it: biases, asymmetric data or an even target make a"
                 " ReLU net leave the linear net's behaviour."))
