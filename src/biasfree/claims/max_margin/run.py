"""The run of :mod:`biasfree.claims.max_margin`: its measurements and their checks against theory."""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

from ...core.data import Dataset, gaussian_inputs, label_data, symmetrize
from ...core.inits import init_gaussian, init_pairs
from ...core.layers import scale_params
from ...dynamics import GDConfig, Member, train
from ...results import Result, at_least, at_most
from ...theory.margin import KKT_TOL, cosine, hard_margin_svm, kkt_residual, margin_ratio
from ..base import Progress, quiet
from ..checks import twin_identity
from . import TARGET_COS, Config, member_name


@partial(jax.jit, static_argnums=1)
def _setup(key, cfg: Config):
    k_x, k_pair, k_rand = jax.random.split(key, 3)
    widths = (cfg.d, cfg.width, 1)
    return (gaussian_inputs(k_x, cfg.n, cfg.d), init_pairs(k_pair, widths, 1.0),
            init_gaussian(k_rand, widths, 1.0))


def _members(cfg: Config, pair, gauss) -> dict[str, Member]:
    """Per slope α a pair-init net (with its linear twin) and a random-init net, std ``scale``."""
    inits = {"pair": scale_params(pair, cfg.scale), "random": scale_params(gauss, cfg.scale)}
    return {member_name(k, a): Member(p, alpha=a, twin=True)
            for k, p in inits.items() for a in cfg.alphas}


def _directions(runs, w_svm, X, y) -> dict[str, dict]:
    """Per member: cos(β_eff(t), w_svm), normalised margin, loss, ||β_eff||, and the relative
    gap of β_eff to its linear twin's."""
    out = {}
    for name in runs:
        beta, beta_twin = (np.asarray(tr.beta)[..., 0] for tr in (runs[name], runs.twin(name)))
        norm = np.linalg.norm(beta, axis=-1)
        out[name] = {"cos": cosine(beta, w_svm), "margin_ratio": margin_ratio(beta, X, y, w_svm),
                     "loss": np.asarray(runs[name].loss), "loss_twin": np.asarray(runs.twin(name).loss),
                     "beta_norm": norm, "twin_beta_gap": float(np.max(
                         np.linalg.norm(beta - beta_twin, axis=-1) / np.maximum(norm, 1e-300)))}
    return out


def run(cfg: Config, seed: int = 0, progress: Progress = quiet) -> Result:
    progress("separable symmetric data, hard-margin SVM")
    key = jax.random.PRNGKey(seed)
    X0, pair, gauss = _setup(key, cfg)
    Xk, Yk, w_teacher = label_data(jax.random.fold_in(key, 1), X0, cfg.margin)
    data = Dataset(*symmetrize(Xk, Yk))
    X, y = np.asarray(data.X), np.asarray(data.Y)[:, 0]
    w_svm = hard_margin_svm(X, y)
    kkt = kkt_residual(X, y, w_svm)
    cos_mean = cosine(np.mean(y[:, None] * X, axis=0), w_svm)
    cos_teacher = cosine(np.asarray(w_teacher), w_svm)

    progress("logistic GD: pair and random init, with linear twins")
    runs = train(_members(cfg, pair, gauss), data,
                      GDConfig(lr=cfg.lr, steps=cfg.steps, loss="logistic", spacing="log",
                               n_records=cfg.n_records))

    progress("directions and checks")
    t = np.asarray(runs[member_name("pair", cfg.alphas[0])].t)
    dirs = _directions(runs, w_svm, X, y)
    pairs = [member_name("pair", a) for a in cfg.alphas]
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
        "pair_init_is_linear_net_logistic": twin_identity(
            runs, pairs, "With logistic loss (ℓ(-y,-f) = ℓ(y,f), §2.8) the pair-init leaky nets"),
        "pair_init_converges_to_max_margin": at_least(
            min(dirs[p]["cos"][-1] for p in pairs), TARGET_COS,
            "Every pair-init leaky net's β_eff ends within cosine 0.99 of the hard-margin "
            "SVM direction (the linear net's implicit bias, §2.8).",
            unit="cosine with w_svm"),
    }
    metrics = {"n_points": int(X.shape[0]), "svm_kkt_residual": kkt,
               "svm_margin": float(1 / np.linalg.norm(w_svm)),
               "cos_mean_direction_svm": float(cos_mean),
               "cos_teacher_svm": float(cos_teacher), "t_max": float(t[-1])}
    arrays = {"t": t, "alphas": np.asarray(cfg.alphas, float), "w_svm": w_svm,
              "cos_mean_direction": np.asarray(cos_mean), "cos_teacher": np.asarray(cos_teacher)}
    for name, m in dirs.items():
        hit = np.nonzero(m["cos"] >= TARGET_COS)[0]
        metrics |= {f"cos_svm_{name}": float(m["cos"][-1]),
                    f"margin_ratio_{name}": float(m["margin_ratio"][-1]),
                    f"twin_loss_deviation_{name}": runs.twin_gap(name),
                    f"twin_beta_deviation_{name}": m["twin_beta_gap"],
                    f"first_time_cos_0.99_{name}": float(t[hit[0]]) if hit.size else float("nan")}
        arrays |= {f"{k}_{name}": m[k] for k in ("cos", "margin_ratio", "loss", "loss_twin", "beta_norm")}
    notes = (f"{X.shape[0]} points in d = {cfg.d} (margin {cfg.margin:g}, symmetrised); "
             f"logistic GD η = {cfg.lr:g} for {cfg.steps} steps (t = {t[-1]:g}). Random init: "
             + ", ".join(f"α={a:g} cos {dirs[member_name('random', a)]['cos'][-1]:.5f}"
                         for a in cfg.alphas) + ".")
    return Result("max-margin", seed, {}, metrics, checks, arrays, notes)
