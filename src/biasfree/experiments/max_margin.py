"""Logistic loss on separable symmetric data: leaky nets inherit the linear max-margin bias.

THEORY.md §2.8. The pair argument (§2.3) needs only ``ℓ(-y, -f) = ℓ(y, f)``, which the
logistic loss satisfies, so on symmetric data a two-layer antisymmetric-pair leaky net
(slope α, c = (1 + α)/2) trained by GD *is* its linear twin (``√c·init``, α = 1, step
``η c``, same step count) step for step. A linear net trained by GD on separable data
converges in direction to the hard-margin SVM without intercept
(Soudry et al. 2018; Ji & Telgarsky 2019):

    w_svm = argmin ||w||²  subject to  y_i wᵀx_i >= 1 for every i,

so ``β_eff(t)/||β_eff(t)||`` tends to ``w_svm/||w_svm||``, logarithmically slowly
(the direction error decays like 1/log t). ``w_svm`` is solved with
``scipy.optimize.minimize(method="SLSQP")`` and certified: at the solution every
active constraint has margin 1 and ``w_svm = Σ_active μ_i y_i x_i`` with μ ≥ 0
(KKT; ``scipy.optimize.nnls`` finds μ), which for this convex problem proves optimality.

Data: Gaussian inputs, labels ``sign(w*ᵀx)`` keeping only ``|w*ᵀx| >= margin``
(:func:`biasfree.label_data`), then symmetrised (labels are odd in x). Records are
log-spaced in the step count.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import numpy as np
from scipy.optimize import minimize, nnls

from ..data import Dataset, gaussian_inputs, label_data, symmetrize
from ..nets import init_gaussian, init_pairs
from ..train import GDConfig
from ._common import ROUND_OFF, batch_scaled, run_with_twins, stack_params, twin_gap
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

TARGET_COS = 0.99
"""The issue's success level for direction convergence (cos between β_eff and w_svm)."""

KKT_TOL = 1e-8
"""Certificate tolerance for the SVM: SLSQP with ftol 1e-15 meets the constraints and
the stationarity condition to ~1e-14 relative; 1e-8 leaves six orders for conditioning."""


@dataclass(frozen=True)
class Config:
    """``d`` input size, ``n`` Gaussian draws before the margin filter (then
    symmetrised), ``margin`` the label margin, ``width`` hidden units, ``alphas`` the
    slopes, ``scale`` init std, ``lr`` GD step η, ``steps`` GD steps, ``n_records``
    log-spaced records."""

    d: int = 10
    n: int = 20
    margin: float = 0.1
    width: int = 64
    alphas: tuple[float, ...] = (0.0, 0.5)
    scale: float = 0.01
    lr: float = 4.0
    steps: int = 300_000
    n_records: int = 80

    def __post_init__(self):
        require_positive(self, "lr", "steps", "n_records")
        if self.d < 2 or self.n < 2:
            raise ValueError(f"need d >= 2 and n >= 2, got d={self.d}, n={self.n}")
        if self.width < 2 or self.width % 2:
            raise ValueError(f"width={self.width} must be even and >= 2 (pair init)")
        if not self.alphas or any(not 0 <= a < 1 for a in self.alphas):
            raise ValueError(f"alphas={self.alphas}: give leaky slopes in [0, 1)")
        if self.margin < 0 or self.scale <= 0:
            raise ValueError("margin must be >= 0 and scale > 0")


PRESETS = {
    "tiny": Config(d=5, n=10, width=16, steps=3000, n_records=40),
    "paper": Config(),
}


def hard_margin_svm(X, y) -> np.ndarray:
    """``argmin ||w||² s.t. y_i wᵀx_i >= 1`` (no intercept) for inputs ``X`` (N, d) and
    labels ``y`` (N,) in {-1, +1}, by SLSQP started from the least-squares direction
    rescaled to feasibility. SLSQP's own status is not trusted (at ftol 1e-15 it may stop
    with "positive directional derivative" at the optimum): the result is accepted if
    it meets the constraints, and its optimality is certified by :func:`kkt_residual`.
    Raises ``ValueError`` if the constraints stay violated (data not separable through
    the origin)."""
    X, y = np.asarray(X, float), np.asarray(y, float).ravel()
    Z = y[:, None] * X
    w0, *_ = np.linalg.lstsq(X, y, rcond=None)
    m0 = np.min(Z @ w0)
    w0 = w0 / m0 if m0 > 0 else w0
    res = minimize(lambda w: w @ w, w0, jac=lambda w: 2 * w, method="SLSQP",
                   constraints=[{"type": "ineq", "fun": lambda w: Z @ w - 1.0,
                                 "jac": lambda w: Z}],
                   options={"ftol": 1e-15, "maxiter": 1000})
    if np.min(Z @ res.x) < 1.0 - KKT_TOL:
        raise ValueError(f"hard-margin SVM failed ({res.message}): the data are not separable "
                         "by a hyperplane through the origin; use label_data with a margin")
    return res.x


def kkt_residual(X, y, w) -> float:
    """Relative KKT residual of ``w`` for the hard-margin SVM: ``max(constraint
    violation, ||w - Σ_active μ_i y_i x_i|| / ||w||)`` with μ >= 0 from
    ``scipy.optimize.nnls`` over the constraints active within ``KKT_TOL``."""
    X, y = np.asarray(X, float), np.asarray(y, float).ravel()
    Z = y[:, None] * X
    m = Z @ w
    active = m <= 1.0 + KKT_TOL
    res = nnls(Z[active].T, w)[1] if active.any() else np.linalg.norm(w)  # none active: μ = 0
    return float(max(1.0 - np.min(m), res / np.linalg.norm(w)))


def cosine(B, w) -> np.ndarray:
    """Cosine between the rows (last axis) of ``B`` and the vector ``w``."""
    B = np.asarray(B, float)
    return (B @ w) / (np.linalg.norm(B, axis=-1) * np.linalg.norm(w))


@partial(jax.jit, static_argnums=1)
def _setup(key, cfg: Config):
    k_x, k_pair, k_rand = jax.random.split(key, 3)
    widths = (cfg.d, cfg.width, 1)
    return (gaussian_inputs(k_x, cfg.n, cfg.d), init_pairs(k_pair, widths, 1.0),
            init_gaussian(k_rand, widths, 1.0))


def run(cfg: Config, seed: int = 0, progress: Progress = _quiet) -> Result:
    """Run the experiment from ``cfg`` (e.g. ``PRESETS["tiny"]``) with random ``seed``."""
    expect_config(cfg, Config)
    alphas = np.asarray(cfg.alphas, dtype=float)
    A = len(alphas)

    progress("separable symmetric data, hard-margin SVM")
    key = jax.random.PRNGKey(seed)
    X0, pair, gauss = _setup(key, cfg)
    Xk, Yk, w_teacher = label_data(jax.random.fold_in(key, 1), X0, cfg.margin)
    X, Y = symmetrize(Xk, Yk)
    data = Dataset(X, Y)
    y = np.asarray(Y)[:, 0]
    w_svm = hard_margin_svm(X, y)
    kkt = kkt_residual(X, y, w_svm)
    mean_dir = np.mean(y[:, None] * np.asarray(X), axis=0)
    cos_mean, cos_teacher = cosine(mean_dir, w_svm), cosine(np.asarray(w_teacher), w_svm)

    progress("logistic GD: pair and random init, with linear twins")
    params = stack_params(batch_scaled(pair, np.full(A, cfg.scale)),
                          batch_scaled(gauss, np.full(A, cfg.scale)))
    gd_cfg = GDConfig(lr=cfg.lr, steps=cfg.steps, loss="logistic", spacing="log",
                      n_records=cfg.n_records)
    leaky, twin = run_with_twins(params, data, gd_cfg, np.r_[alphas, alphas])

    progress("directions and checks")
    t = np.asarray(leaky.t[0])
    beta = np.asarray(leaky.beta)[..., 0]  # (2A, T, d): pairs first, then random
    beta_twin = np.asarray(twin.beta)[..., 0]
    cos = cosine(beta, w_svm)
    D = twin_gap(leaky, twin)
    beta_gap = np.max(np.linalg.norm(beta - beta_twin, axis=-1)
                      / np.maximum(np.linalg.norm(beta, axis=-1), 1e-300), axis=-1)
    margin_ratio = (np.min(np.einsum("btd,nd->btn", beta, y[:, None] * np.asarray(X)), axis=-1)
                    / np.linalg.norm(beta, axis=-1) * np.linalg.norm(w_svm))

    checks = {
        "svm_certified": at_most(
            kkt, KKT_TOL,
            "The SLSQP hard-margin SVM meets its constraints and the KKT stationarity "
            "condition w = Σ μ_i y_i x_i, μ >= 0 (nnls), so it is the optimum.",
            unit="relative KKT residual"),
        "target_direction_is_discriminating": at_most(
            max(cos_mean, cos_teacher), TARGET_COS,
            "The data make the direction test meaningful: the mean direction <y x> and the "
            "labelling teacher w* each have cosine below 0.99 with w_svm.",
            unit="cosine"),
        "pair_init_is_linear_net_logistic": at_most(
            float(np.max(D[:A])), ROUND_OFF,
            "With logistic loss the pair-init leaky nets' loss equals their linear twins' to "
            "round-off at every record (ℓ(-y,-f) = ℓ(y,f), §2.8).",
            unit="fraction of L(0)"),
        "pair_init_beta_equals_linear_net": at_most(
            float(np.max(beta_gap[:A])), ROUND_OFF,
            "The pair-init leaky nets' β_eff(t) equals their linear twins' to round-off, "
            "relative to ||β_eff(t)||, along the whole trajectory.",
            unit="fraction of ‖β_eff(t)‖"),
        "pair_init_converges_to_max_margin": at_least(
            float(np.min(cos[:A, -1])), TARGET_COS,
            "Every pair-init leaky net's β_eff ends within cosine 0.99 of the hard-margin "
            "SVM direction (the linear net's implicit bias, §2.8).",
            unit="cosine with w_svm"),
    }
    metrics = {"n_points": int(X.shape[0]), "svm_kkt_residual": kkt,
               "svm_margin": float(1 / np.linalg.norm(w_svm)),
               "cos_mean_direction_svm": float(cos_mean),
               "cos_teacher_svm": float(cos_teacher), "t_max": float(t[-1])}
    for i, a in enumerate(alphas):
        for name, j in (("pair", i), ("random", A + i)):
            metrics[f"cos_svm_{name}_alpha_{a:g}"] = float(cos[j, -1])
            metrics[f"margin_ratio_{name}_alpha_{a:g}"] = float(margin_ratio[j, -1])
            metrics[f"twin_loss_deviation_{name}_alpha_{a:g}"] = float(D[j])
            metrics[f"twin_beta_deviation_{name}_alpha_{a:g}"] = float(beta_gap[j])
            hit = np.nonzero(cos[j] >= TARGET_COS)[0]
            metrics[f"first_time_cos_0.99_{name}_alpha_{a:g}"] = float(t[hit[0]]) if hit.size \
                else float("nan")
    arrays = {"t": t, "alphas": alphas, "cos": cos, "margin_ratio": margin_ratio,
              "loss": np.asarray(leaky.loss), "loss_twin": np.asarray(twin.loss),
              "beta_norm": np.linalg.norm(beta, axis=-1), "w_svm": w_svm,
              "cos_mean_direction": np.asarray(cos_mean), "cos_teacher": np.asarray(cos_teacher)}
    notes = (f"{X.shape[0]} points in d = {cfg.d} (margin {cfg.margin:g}, symmetrised); "
             f"logistic GD η = {cfg.lr:g} for {cfg.steps} steps (t = {t[-1]:g}); rows of "
             "'cos' are pair-init nets per α, then random-init nets per α. Random init: "
             + ", ".join(f"α={a:g} cos {cos[A + i, -1]:.5f}" for i, a in enumerate(alphas)) + ".")
    return Result("max-margin", seed, config_dict(cfg), metrics, checks, arrays, notes)


EXPERIMENT = Experiment(
    name="max-margin",
    claim="With logistic loss on separable symmetric data, leaky nets equal linear nets and "
          "converge in direction to the hard-margin SVM.",
    run=run, config=Config, presets=PRESETS,
    paper_claim=("Claim 4 (consequences), implicit bias: leaky nets inherit the linear net's max-margin "
                 "(hard-margin SVM) direction under logistic loss."))
