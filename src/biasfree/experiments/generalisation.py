"""Generalisation: train *and test* loss of bias-free ReLU nets equal the linear net's,
time × (1+α)/2, on a noisy linear teacher with N comparable to d.

Data (THEORY.md §2.1): n Gaussian draws ``x ~ N(0, I_d)`` plus their negatives
(N = 2n training points), targets ``y = Tx + ε``, ``ε ~ N(0, σ²)`` (mirrored with its
point), a unit teacher T (p = 1). n ≈ d, so the noise is fitted late in training and the
test loss first falls, then rises (early stopping pays). Test points are fresh draws
(not symmetrised).

What is exact and what is measured:

- **pair init** (§2.3): ``f_even ≡ 0``, so the leaky net *is* its linear twin
  ``√c·θ`` (α = 1, step ηc, c = (1+α)/2): train and test loss at time t equal the twin's
  at c t, to round-off (the same parameters up to the factor, on any input).
- **population loss** [derived]: for x ~ N(0, I), a noise independent of x, and a net
  whose odd part is ``β_effᵀx``,

      R = E ½ (y - f(x))² = ½ (||β_eff - T||² + σ²) + ½ E f_even(x)²,

  since odd and even functions are orthogonal under a symmetric distribution and the
  target's clean part is odd. For a two-layer net ``f_even = (1-c) Σ_k v_k |w_kᵀx|`` and
  (arc-cosine kernel, ``ρ_kl = cos∠(w_k, w_l)``)

      E |w_kᵀx| |w_lᵀx| = (2/π) ||w_k|| ||w_l|| (√(1 - ρ_kl²) + ρ_kl arcsin ρ_kl).

  So R is known exactly from the parameters; the test loss on n_test fresh points
  estimates it with standard error ``std(ℓ)/√n_test`` (for a linear f, the residual is
  N(0, v) with v = ||β - T||² + σ², so ``std(ℓ) = v/√2``).
- **random small init**: the even part is small, not zero; the gap to the twin is
  measured (train and test), and ``½ E f_even²`` says how much of the test-loss gap the
  even part explains.
- **gradient flow**: the linear twin integrated by ``theory.reference_curve`` (solve_ivp
  on the data moments) gives ``β(t)`` hence a predicted test curve ``R(β(t))``,
  independent of the GD simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np

from .. import theory
from ..data import Dataset, symmetrize
from ..nets import Layer, Params, forward, pair_up, slope_factor
from ..theory import population_loss_linear
from ..train import GDConfig
from ._common import ROUND_OFF, run_with_twins
from .base import Experiment, Progress, Result, _quiet, at_most, config_dict, expect_config, require_positive

SIGMAS = 5.0
"""A finite-sample check allows 5 standard errors (two-sided false alarm ≈ 6e-7 for one
Gaussian estimate)."""


@dataclass(frozen=True)
class Config:
    """``d`` input size, ``n`` Gaussian draws (N = 2n points), ``noise`` σ, ``n_test``
    fresh test points, ``width`` hidden units (even), ``alphas`` leaky slopes (< 1),
    ``scale`` init std, ``lr`` GD step η, ``t_max`` run length, ``n_records`` log-spaced records,
    ``flow_records`` records at which the gradient-flow reference is evaluated."""

    d: int = 100
    n: int = 60
    noise: float = 0.5
    n_test: int = 20000
    width: int = 100
    alphas: tuple[float, ...] = (0.0, 0.5)
    scale: float = 1e-3
    lr: float = 0.02
    t_max: float = 200.0
    n_records: int = 301
    flow_records: int = 61

    def __post_init__(self):
        require_positive(self, "n_records", "flow_records")
        if self.d < 1 or self.n < 2 or self.n_test < 100:
            raise ValueError(f"need d >= 1, n >= 2 draws and n_test >= 100, got d={self.d}, "
                             f"n={self.n}, n_test={self.n_test}")
        if self.width < 2 or self.width % 2:
            raise ValueError(f"width={self.width} must be even and >= 2 (pair init)")
        if any(not 0 <= a < 1 for a in self.alphas) or not self.alphas:
            raise ValueError(f"alphas={self.alphas} must be non-empty slopes in [0, 1) "
                             "(α = 1 is the linear twin itself)")
        if not (self.noise >= 0 and self.scale > 0 and self.lr > 0 and self.t_max > 0):
            raise ValueError("noise >= 0, scale > 0, lr > 0 and t_max > 0 are required")


PRESETS = {
    "tiny": Config(d=20, n=15, n_test=4000, width=20, t_max=120.0, n_records=121,
                   flow_records=25),
    "paper": Config(),
}


def _test_losses(params: Params, X, Y, alpha) -> np.ndarray:
    """Per-point test losses ``½ (y - f(x))²`` (n_test,)."""
    return 0.5 * (np.asarray(Y)[:, 0] - np.asarray(forward(params, X, alpha))[:, 0]) ** 2


def _member(params, i: int) -> Params:
    return tuple(Layer(np.asarray(layer.W)[i]) for layer in params)


def run(cfg: Config, seed: int = 0, progress: Progress = _quiet) -> Result:
    """Run the experiment from ``cfg`` (e.g. ``PRESETS["tiny"]``) with random ``seed``."""
    expect_config(cfg, Config)
    rng = np.random.default_rng(seed)
    d, m = cfg.d, cfg.width
    alphas = np.asarray(cfg.alphas, float)
    cs = slope_factor(alphas)
    A = len(alphas)

    progress("data")
    T = rng.normal(size=(1, d))
    T /= np.linalg.norm(T)
    X = rng.normal(size=(cfg.n, d))
    X, Y = symmetrize(X, X @ T.T + cfg.noise * rng.normal(size=(cfg.n, 1)))
    X, Y = np.asarray(X), np.asarray(Y)
    Xt = rng.normal(size=(cfg.n_test, d))
    Yt = Xt @ T.T + cfg.noise * rng.normal(size=(cfg.n_test, 1))
    data = Dataset(X, Y, Xt, Yt)
    lstsq_floor = theory.linear_floor(X, Y)

    progress("GD: pair and random inits for every α, and their linear twins")
    half = (Layer(cfg.scale * rng.normal(size=(m // 2, d))),
            Layer(cfg.scale * rng.normal(size=(1, m // 2))))
    pair = pair_up(half)
    rand = (Layer(cfg.scale * rng.normal(size=(m, d))), Layer(cfg.scale * rng.normal(size=(1, m))))
    a_all = np.r_[alphas, alphas]
    batch = jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]),
                                   *([pair] * A + [rand] * A))
    steps = int(np.ceil(cfg.t_max / cfg.lr))
    leaky, twin = run_with_twins(batch, data, GDConfig(lr=cfg.lr, steps=steps,
                                                       n_records=cfg.n_records, spacing="log"),
                                 a_all)
    tr = jax.tree_util.tree_map(lambda x, y: np.concatenate([np.asarray(x), np.asarray(y)]),
                                leaky, twin)
    t = np.asarray(tr.t[0])
    L, Lt = np.asarray(tr.loss), np.asarray(tr.test_loss)
    beta = np.asarray(tr.beta)[..., 0]  # (B, T, d)
    B2 = 2 * A  # members 0..B2-1 leaky (pair then random), B2.. the twins

    progress("population loss of β_eff and of the final nets")
    pop_lin = population_loss_linear(beta[..., None], T, noise=cfg.noise)  # (B, T)
    lin_members = list(range(A)) + list(range(B2, 2 * B2))  # pair nets and every twin
    se_lin = SIGMAS * np.sqrt(2.0 / cfg.n_test)  # relative: std(ℓ)/mean(ℓ) = √2
    pop_gap_lin = float(np.max(np.abs(Lt[lin_members] - pop_lin[lin_members])
                               / pop_lin[lin_members]))
    final = []
    for i in range(A, B2):  # random-init leaky nets: the even part counts
        p_i = _member(tr.params, i)
        R, half_even2 = theory.population_loss_two_layer(p_i, T, cfg.noise, a_all[i])
        ell = _test_losses(p_i, Xt, Yt, a_all[i])
        final.append((abs(ell.mean() - R) / (SIGMAS * ell.std() / np.sqrt(cfg.n_test)),
                      half_even2, R))
    final = np.asarray(final)

    progress("gradient-flow reference (linear twin, solve_ivp)")
    # the pair net of slope α is the linear half net √(2c)·half run at time c t (§2.3)
    t_flow = t[np.unique(np.round(np.geomspace(1, len(t) - 1, cfg.flow_records)).astype(int))]
    pop_flow = np.stack([
        population_loss_linear(theory.reference_curve(
            jax.tree_util.tree_map(lambda x, f=np.sqrt(2 * c): f * np.asarray(x), half),
            X, Y, c * t_flow, method="ode").beta, T, noise=cfg.noise) for c in cs])
    j_flow = np.searchsorted(t, t_flow)  # t_flow is a subset of the GD record times
    gd_vs_flow = float(np.max(np.abs(pop_lin[:A][:, j_flow] - pop_flow)) / pop_lin[0, 0])

    progress("checks")
    L0, Lt0 = L[:, :1], Lt[:, :1]
    gap_train = np.max(np.abs(L[:B2] - L[B2:]), axis=1) / L0[:B2, 0]
    gap_test = np.max(np.abs(Lt[:B2] - Lt[B2:]), axis=1) / Lt0[:B2, 0]
    j_best = np.argmin(Lt, axis=1)
    t_best = t[j_best]
    checks = {
        "pair_init_train_and_test_equal_linear_twin": at_most(
            float(max(gap_train[:A].max(), gap_test[:A].max())), ROUND_OFF,
            "With antisymmetric-pair init, every leaky net's train and test loss at time t "
            "equal its linear twin's (√c·init, step ηc) at time c t, to round-off (§2.3).",
            unit="fraction of L(0)"),
        "test_loss_equals_population_loss_of_beta": at_most(
            pop_gap_lin, se_lin,
            "For linear-function nets (pair init, twins) the test loss at every record "
            "equals ½(||β_eff - T||² + σ²) within 5 standard errors of the n_test sample "
            "(relative, 5√(2/n_test)).",
            unit="relative error (fraction of the population loss)"),
        "random_init_population_loss_with_even_part": at_most(
            float(final[:, 0].max()), 1.0,
            "For small random init the final test loss equals ½(||β_eff - T||² + σ²) + "
            "½E f_even² (arc-cosine kernel) within 5 standard errors (value: gap / 5 s.e.).",
            unit="multiples of 5 standard errors"),
    }
    metrics = {"lstsq_train_floor": lstsq_floor, "noise": cfg.noise,
               "population_loss_of_teacher": 0.5 * cfg.noise**2,
               "t_max": float(t[-1]), "steps": steps,
               "pair_population_loss_gd_vs_flow_over_R0": gd_vs_flow}
    for i, a in enumerate(alphas):
        c = cs[i]
        for k, name in ((i, "pair"), (A + i, "random")):
            metrics[f"{name}_train_gap_to_twin_alpha_{a:g}"] = float(gap_train[k])
            metrics[f"{name}_test_gap_to_twin_alpha_{a:g}"] = float(gap_test[k])
            metrics[f"{name}_best_test_time_x_c_alpha_{a:g}"] = float(t_best[k] * c)
            metrics[f"{name}_best_test_loss_alpha_{a:g}"] = float(Lt[k, j_best[k]])
            metrics[f"{name}_final_test_loss_alpha_{a:g}"] = float(Lt[k, -1])
        metrics[f"twin_best_test_time_alpha_{a:g}"] = float(t_best[B2 + A + i] * c)
        metrics[f"random_final_half_even_energy_alpha_{a:g}"] = float(final[i, 1])
        metrics[f"random_final_test_loss_gap_to_twin_alpha_{a:g}"] = float(
            Lt[A + i, -1] - Lt[B2 + A + i, -1])
        metrics[f"random_max_even_energy_alpha_{a:g}"] = float(np.max(tr.even_energy[A + i]))
    arrays = {"alphas": alphas, "t": t, "loss": L, "test_loss": Lt, "population_loss": pop_lin,
              "t_flow": t_flow, "population_loss_flow": pop_flow,
              "even_energy": np.asarray(tr.even_energy), "noise": np.asarray(cfg.noise)}
    notes = (f"d = {d}, N = {2 * cfg.n} symmetric points (n = {cfg.n} draws), σ = {cfg.noise:g}, "
             f"width {m}, init std {cfg.scale:g}, GD η = {cfg.lr:g}; members: pair init for "
             f"α = {list(cfg.alphas)}, random init for the same α, then each one's linear twin.")
    return Result("generalisation", seed, config_dict(cfg), metrics, checks, arrays, notes)


EXPERIMENT = Experiment(
    name="generalisation",
    claim="Train and test loss of bias-free (leaky) ReLU nets on a noisy linear teacher equal "
          "the linear net's with time × (1+α)/2; test loss is the population loss of β_eff.",
    run=run, config=Config, presets=PRESETS,
    paper_claim=("Claim 2 (dynamics), on held-out data: the linear equivalence with time × (1+α)/2 holds "
                 "for the test loss too, not only the training loss."))
