"""Headline: two-layer bias-free leaky ReLU nets learn like linear nets, time × (1+α)/2.

The paper's figure (THEORY.md §2.3–2.6, §3.1–3.2): d-dimensional Gaussian inputs plus
their negatives, the odd target ``y = wᵀx + sin(4 wᵀx)``, two-layer nets with slopes α
from small initialisation. Inputs are whitened exactly (``<x xᵀ> = I``), so the
closed form of §3.1 applies with ``s = ||Σ_yx||``; one set of runs uses the raw
(finite-sample, not whitened) inputs to measure what whitening buys.

Runs (all full-batch GD unless named):

- **rank-one**: balanced, zero-even init aligned with ``Σ_yx`` (§2.5), raw strength
  ``a0/c`` so every α starts from the same *effective* function ``ã0 = a0``; then
  theory predicts exact collapse in the rescaled time ``c t``. Also solved by
  gradient flow (diffrax) for the solver-tolerance check.
- **pair**: antisymmetric-pair init (§2.3) against its mapped linear net.
- **random**: small Gaussian inits (the paper's setting), each shared by every α,
  against their equivalent linear nets ``sqrt(c)·init`` trained with step ``η c``
  (§2.4). The gap varies a lot between inits (one init in six measured here gave 2%
  where the others gave 0.1–0.2%), so ``n_inits`` of them are run and the median gap
  is checked against the paper's 0.3%; the worst one is reported beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import theory
from ..data import Dataset, cross_covariance, input_covariance, sine_target, symmetrize, whiten
from ..nets import init_gaussian, init_rank_one, pair_up, scale_params, slope_factor
from ..train import FlowConfig, GDConfig, flow_ensemble, gd_ensemble
from ._common import PAPER_LEVEL, ROUND_OFF, crossing_time, run_with_twins, twin_gap
from .base import Experiment, Result, _quiet, at_most, check_size, config_dict


@dataclass(frozen=True)
class Config:
    """``d`` input size, ``n`` Gaussian draws (2n points once symmetrised), ``width``
    hidden units, ``alphas`` slopes, ``a0`` effective initial mode strength of the
    rank-one runs, ``random_scale`` std of the small Gaussian inits, ``n_inits`` how many, ``lr`` GD step η,
    ``horizon`` run length in units of the slowest theoretical half time,
    ``n_records`` records, ``rtol``/``atol`` gradient-flow tolerances."""

    d: int = 20
    n: int = 1000
    width: int = 100
    alphas: tuple = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    a0: float = 1e-3
    random_scale: float = 1e-2
    n_inits: int = 8
    lr: float = 0.04
    horizon: float = 3.0
    n_records: int = 200
    rtol: float = 1e-10
    atol: float = 1e-12

    def __post_init__(self):
        if self.d < 1 or self.n < self.d or self.width < 2 or self.width % 2:
            raise ValueError("need d >= 1, n >= d and an even width >= 2")
        if 1.0 not in self.alphas:
            raise ValueError("alphas must include 1.0 (the linear reference)")


CONFIGS = {
    "tiny": Config(alphas=(0.0, 0.5, 1.0), lr=0.05, n_records=100),
    "paper": Config(),
}


def mode_of(X, Y):
    """``(s, r, <y²>)``: top singular value and right vector of ``Σ_yx`` (p = 1), and
    the target power ``tr<y yᵀ>``."""
    sxy = np.asarray(cross_covariance(X, Y))[0]
    s = float(np.linalg.norm(sxy))
    return s, sxy / s, float(np.mean(np.sum(np.asarray(Y) ** 2, axis=1)))


def mode_strength_path(beta, r):
    """``a(t) = rᵀ β_eff(t)`` for ``beta`` (..., T, d, 1) and unit ``r``."""
    return np.asarray(beta)[..., 0] @ r


def run(size: str = "paper", seed: int = 0, progress=_quiet) -> Result:
    check_size(size)
    cfg = CONFIGS[size]
    alphas = np.asarray(cfg.alphas, dtype=float)
    cs = slope_factor(alphas)
    k_data, k_target, k_pair, k_rand, k_r1 = jax.random.split(jax.random.PRNGKey(seed), 5)

    progress("data")
    target, _ = sine_target(k_target, cfg.d)
    X_raw = jax.random.normal(k_data, (cfg.n, cfg.d))
    X_raw, Y = symmetrize(X_raw, target(X_raw))
    Xw, _ = whiten(X_raw)
    white, raw = Dataset(Xw, Y), Dataset(X_raw, Y)
    s, r, y_power = mode_of(Xw, Y)
    s_raw, r_raw, _ = mode_of(X_raw, Y)
    cov_dev = float(np.linalg.norm(np.asarray(input_covariance(X_raw)) - np.eye(cfg.d), 2))

    t_half_slowest = float(theory.half_time(s, cfg.a0)) / cs.min()
    steps = int(np.ceil(cfg.horizon * t_half_slowest / cfg.lr))
    gd_cfg = GDConfig(lr=cfg.lr, steps=steps, n_records=cfg.n_records)
    t_max = steps * cfg.lr
    B = len(alphas)

    def rank_one(direction, a0_raw):
        """Unit-strength rank-one init scaled so that its raw strength is a0_raw (B,)."""
        unit = init_rank_one(k_r1, cfg.d, cfg.width, 1.0, direction=direction)
        return jax.vmap(lambda f: scale_params(unit, f))(jnp.sqrt(jnp.asarray(a0_raw)))

    progress("rank-one init: GD, linear twins, gradient flow")
    p_r1 = rank_one(r, cfg.a0 / cs)
    gd_r1, twin_r1 = run_with_twins(p_r1, white, gd_cfg, alphas)
    fl_r1 = flow_ensemble(p_r1, white,
                          FlowConfig(t_max=t_max, n_records=cfg.n_records, rtol=cfg.rtol,
                                     atol=cfg.atol), alpha=alphas)
    gd_raw = gd_ensemble(rank_one(r_raw, cfg.a0 / cs), raw, gd_cfg, alpha=alphas)

    progress("pair init: GD against mapped linear nets")
    half = init_gaussian(k_pair, (cfg.d, cfg.width // 2, 1), cfg.random_scale)
    gd_pair = gd_ensemble(pair_up(half), white, gd_cfg, alpha=alphas, batched_params=False)
    twin_pair = gd_ensemble(jax.vmap(lambda f: scale_params(half, f))(jnp.sqrt(2 * cs)), white,
                            gd_cfg, alpha=np.ones(B), lr=cfg.lr * cs)

    progress("small random init: GD against equivalent linear nets")
    inits = jax.vmap(lambda k: init_gaussian(k, (cfg.d, cfg.width, 1), cfg.random_scale))(
        jax.random.split(k_rand, cfg.n_inits))
    # init 0 with every α (the figure); the other inits with the smallest α (the
    # largest gap: the even part's weight 1 - c is largest there)
    which = np.concatenate([np.zeros(B, int), np.arange(1, cfg.n_inits)])
    a_rand = np.concatenate([alphas, np.full(cfg.n_inits - 1, alphas.min())])
    p_rand = jax.tree_util.tree_map(lambda a: a[which], inits)
    gd_all, twin_all = run_with_twins(p_rand, white, gd_cfg, a_rand)
    gd_rand, twin_rand = (jax.tree_util.tree_map(lambda a: a[:B], tr) for tr in (gd_all, twin_all))

    progress("theory and checks")
    t = np.asarray(gd_r1.t[0])
    ks = np.rint(t / cfg.lr).astype(int)
    L_th = np.stack([theory.leaky_loss(t, s, cfg.a0 / c, a, y_power) for a, c in zip(alphas, cs,
                                                                                      strict=True)])
    L0 = float(L_th[0, 0])
    a_gd = mode_strength_path(gd_r1.beta, r)
    a_fl = mode_strength_path(fl_r1.beta, r)
    a_gd_th = np.stack([theory.gd_mode_strength(ks, s, cfg.a0, cfg.lr * c) for c in cs])
    a_raw = mode_strength_path(gd_raw.beta, r_raw)

    t_half_th = np.asarray(theory.half_time(s, cfg.a0)) / cs
    t_half_gd = np.array([crossing_time(t, a_gd[i], s / 2) for i in range(B)])
    t_half_fl = np.array([crossing_time(fl_r1.t[i], a_fl[i], s / 2) for i in range(B)])
    t_half_raw = np.array([crossing_time(t, a_raw[i], s_raw / 2) for i in range(B)])
    t_half_raw_th = np.asarray(theory.half_time(s_raw, cfg.a0)) / cs
    L_end_rand = np.asarray(gd_rand.loss)[:, -1]
    t_half_rand = np.array([
        gd_rand.member(i).half_time(0.5 * (float(gd_rand.loss[i, 0]) + L_end_rand[i]))
        for i in range(B)])
    i_lin = int(np.argmax(alphas == 1.0))

    t_fl = np.asarray(fl_r1.t[0])
    L_th_fl = np.stack([theory.leaky_loss(t_fl, s, cfg.a0 / c, a, y_power)
                        for a, c in zip(alphas, cs, strict=True)])
    gap_flow = float(np.max(np.abs(np.asarray(fl_r1.loss) - L_th_fl)) / L0)
    gap_gd = np.max(np.abs(np.asarray(gd_r1.loss) - L_th), axis=1) / L0
    gap_gd_map = float(np.max(np.abs(a_gd - a_gd_th)) / s)
    pair_gap = float(np.max(twin_gap(gd_pair, twin_pair)))
    r1_gap = float(np.max(twin_gap(gd_r1, twin_r1)))
    all_gaps = twin_gap(gd_all, twin_all)
    rand_gap = all_gaps[:B]
    rand_gaps = np.concatenate([[rand_gap.max()], all_gaps[B:]])  # per init, max over α
    flow_tol = max(cfg.rtol, cfg.atol) * float(np.max(fl_r1.stats["steps"]))
    half_gd_err = float(np.nanmax(np.abs(t_half_gd / t_half_th - 1)))
    half_raw_err = float(np.nanmax(np.abs(t_half_raw / t_half_raw_th - 1)))
    scaling = t_half_fl * cs / t_half_fl[i_lin]
    eta_cs = cfg.lr * float(cs.max()) * s

    checks = {
        "pair_init_equals_linear_net": at_most(
            pair_gap, ROUND_OFF,
            "With antisymmetric-pair init each leaky net's GD loss equals its mapped linear "
            "net's (width halved, weights × sqrt(1+α), step × c) to round-off (§2.3)."),
        "rank_one_init_equals_linear_net": at_most(
            r1_gap, ROUND_OFF,
            "With rank-one balanced zero-even init each leaky net's GD loss equals the linear "
            "net started at sqrt(c)·init with step η c to round-off (§2.4–2.5)."),
        "flow_matches_closed_form": at_most(
            gap_flow, flow_tol,
            f"Gradient flow (rtol {cfg.rtol:g}) on whitened data from aligned rank-one init "
            "follows the closed-form leaky curve L(ct) of §3.2 to solver tolerance (max gap / "
            "L(0) ≤ rtol × solver steps, the accumulated local error)."),
        "gd_matches_exact_discrete_map": at_most(
            gap_gd_map, ROUND_OFF,
            "GD on whitened data from aligned rank-one init follows the exact discrete map "
            "ã_{k+1} = ã_k (1 + η c (s - ã_k))² to round-off (max gap / s)."),
        "gd_half_time_within_step_error": at_most(
            half_gd_err, eta_cs,
            "GD half times match the gradient-flow closed form within the first-order "
            "step-size error η c s / 2 (threshold: η c s, twice that estimate)."),
        "raw_data_half_time_within_whitening_error": at_most(
            half_raw_err, 2 * cov_dev + eta_cs,
            "On raw (unwhitened) finite-sample inputs the half times match the closed form "
            "within 2 ||Σ_xx - I||₂ + η c s (first-order input-covariance and step errors)."),
        "random_init_close_to_linear_net": at_most(
            float(np.median(rand_gaps)), PAPER_LEVEL,
            f"For a typical small random Gaussian init (the median over {cfg.n_inits} inits of "
            "the max over t, at the smallest α) the leaky net's loss stays within 0.3% of L(0) "
            "of its equivalent linear net at time c t, the paper's level; individual inits "
            "can exceed it (see random_init_gap_worst and the fraction under 0.3%)."),
        "half_times_scale_as_2_over_1_plus_alpha": at_most(
            float(np.max(np.abs(scaling - 1))), 1e-6,
            "From the same effective init, half times scale exactly as 2/(1+α) "
            "(gradient flow, max |c t½(α) / t½(1) - 1|)."),
    }
    metrics = {"s": s, "s_raw": s_raw, "y_power": y_power, "L0": L0,
               "final_loss_theory": 0.5 * (y_power - s**2),
               "input_cov_deviation": cov_dev, "t_max": t_max, "steps": steps,
               "flow_steps_max": float(np.max(fl_r1.stats["steps"])),
               "gd_closed_form_max_gap": float(np.max(gap_gd)),
               "random_init_gap_median": float(np.median(rand_gaps)),
               "random_init_gap_worst": float(np.max(rand_gaps)),
               "random_init_fraction_under_0.3%": float(np.mean(rand_gaps <= PAPER_LEVEL))}
    for i, a in enumerate(alphas):
        metrics[f"random_init_gap_alpha_{a:g}"] = float(rand_gap[i])
        metrics[f"t_half_theory_alpha_{a:g}"] = float(t_half_th[i])
        metrics[f"t_half_gd_alpha_{a:g}"] = float(t_half_gd[i])
        metrics[f"random_init_half_time_ratio_x_c_alpha_{a:g}"] = float(
            t_half_rand[i] * cs[i] / t_half_rand[i_lin])
        metrics[f"random_init_max_even_energy_alpha_{a:g}"] = float(
            np.max(gd_rand.even_energy[i]))

    arrays = {
        "alphas": alphas, "t": t, "loss_rank_one": np.asarray(gd_r1.loss), "loss_theory": L_th,
        "t_flow": t_fl, "loss_theory_flow": L_th_fl, "loss_flow": np.asarray(fl_r1.loss),
        "loss_random": np.asarray(gd_rand.loss), "loss_random_twin": np.asarray(twin_rand.loss),
        "loss_pair": np.asarray(gd_pair.loss), "loss_pair_twin": np.asarray(twin_pair.loss),
        "even_energy_random": np.asarray(gd_rand.even_energy), "random_init_gaps": rand_gaps,
        "t_half_theory": t_half_th, "t_half_gd": t_half_gd, "L0": np.asarray(L0),
    }
    notes = (f"Whitened inputs, s = {s:.4f}. Rank-one runs start from effective strength "
             f"ã0 = {cfg.a0:g} for every α; random-init runs: {cfg.n_inits} Gaussian inits "
             f"(std {cfg.random_scale:g}), each shared across α (figure: the first); "
             f"max gaps to the linear twins {np.array2string(rand_gaps, precision=4)}. "
             f"GD step η = {cfg.lr:g}, {steps} steps.")
    return Result("leaky-collapse", size, seed, config_dict(cfg), metrics, checks, arrays, notes)


EXPERIMENT = Experiment(
    name="leaky-collapse",
    claim="Two-layer bias-free leaky ReLU nets on symmetric data learn like linear nets "
          "with time rescaled by (1+α)/2.",
    run=run, configs=CONFIGS,
    paper_claim=("Claim 2 (dynamics): on symmetric data a two-layer bias-free leaky ReLU net learns "
                 "exactly like a linear net with time rescaled by (1+α)/2, giving closed-form learning "
                 "curves."))
