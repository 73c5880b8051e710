"""The run of :mod:`biasfree.claims.real_data`: its measurements and their checks against theory."""

from __future__ import annotations

import jax
import numpy as np

from ... import theory
from ...core.data import Dataset, symmetrize
from ...core.inits import init_gaussian, init_pairs
from ...core.layers import Params
from ...core.moments import whiten
from ...core.nets import even_part, forward
from ...core.real_data import load_data
from ...core.twin import slope_factor
from ...dynamics import GDConfig, Member, Runs, train
from ...expressivity.decomposition import net_function, odd_nonlinearity
from ...results import Result, at_most
from ..base import Progress, quiet
from ..checks import PAPER_LEVEL, twin_identity
from . import EPS, Config


def _split(params: Params, X, alpha) -> tuple[float, float, float, float]:
    """(<||βᵀx||²>, <||f_odd - βᵀx||²>, <||f_even||²>, nonlinear fraction of the odd part)."""
    fit = odd_nonlinearity(net_function(params, alpha), X)
    lin = float(np.mean(np.sum((X @ fit.beta) ** 2, axis=1)))
    even = float(np.mean(np.sum(np.asarray(even_part(params, X, alpha)) ** 2, axis=1)))
    return lin, fit.residual, even, fit.fraction


def _accuracy(params: Params, X, labels, alpha) -> float:
    return float(np.mean(np.argmax(np.asarray(forward(params, X, alpha)), axis=1) == labels))


def _data(cfg: Config, seed: int):
    """Digits, a random held-out split; the training images symmetrised and whitened
    (rank "auto"), the held-out ones mapped alike. Returns (Dataset, whitening, raw)."""
    raw = load_data("digits", symmetrize_data=False, n=cfg.n_images, seed=seed)
    perm = np.random.default_rng(seed).permutation(raw.X.shape[0])
    n_test = int(round(cfg.test_fraction * raw.X.shape[0]))
    test, train = perm[:n_test], perm[n_test:]
    Xs, Ys = (np.asarray(v) for v in symmetrize(raw.X[train], raw.Y[train]))
    w = whiten(Xs, rank="auto")
    return Dataset(np.asarray(w.X), Ys, raw.X[test] @ np.asarray(w.M), raw.Y[test]), w, raw


def _members(key, cfg: Config, d: int, p: int) -> dict[str, Member]:
    """Pair init and ``n_random`` random inits (std ``scale``), each with its twin."""
    keys = jax.random.split(key, 1 + cfg.n_random)
    widths = (d, cfg.width, p)
    return {"pair": Member(init_pairs(keys[0], widths, cfg.scale), cfg.alpha, twin=True)} | {
        f"random {i}": Member(init_gaussian(keys[i], widths, cfg.scale), cfg.alpha, twin=True)
        for i in range(1, 1 + cfg.n_random)}


def _predictions(members: dict[str, Member], data: Dataset, t, cfg: Config):
    """Gradient-flow predictions (ODE, ``theory.reference_curve``) at a log-spaced subset
    ``t_flow`` of the records: of the first random init (its linear twin), and of the
    pair net's width-m linear net (:func:`theory.pair_to_linear`) at time c t."""
    j = np.r_[0, np.unique(np.round(np.geomspace(1, len(t) - 1, cfg.flow_records)).astype(int))]
    c = float(slope_factor(cfg.alpha))
    random = theory.reference_curve(members["random 1"].params, data.X, data.Y, t[j], alpha=cfg.alpha)
    pair = theory.reference_curve(theory.pair_to_linear(members["pair"].params, cfg.alpha), data.X,
                                  data.Y, c * t[j], alpha=1.0)
    return j, random, pair


def run(cfg: Config, seed: int = 0, progress: Progress = quiet) -> Result:
    a = cfg.alpha

    progress("data: digits, held-out split, symmetrise, whiten(rank='auto')")
    data, w, raw = _data(cfg, seed)
    X, Y = np.asarray(data.X), np.asarray(data.Y)
    d = X.shape[1]
    labels_t = np.argmax(np.asarray(data.Y_test), axis=1)
    kappa = float(w.eigenvalues[0] / w.eigenvalues[w.rank - 1])
    lin_floor = theory.linear_floor(X, Y)

    progress(f"GD: pair init and {cfg.n_random} random inits, and their linear twins")
    members = _members(jax.random.PRNGKey(seed), cfg, d, Y.shape[1])
    steps = int(np.ceil(cfg.t_max / cfg.lr))
    runs = train(members, data, GDConfig(lr=cfg.lr, steps=steps, n_records=cfg.n_records,
                                              spacing="log"))
    names, randoms = list(members), [n for n in members if n != "pair"]
    t = np.asarray(runs["pair"].t)

    progress("gradient-flow prediction of the first random init (linear twin, ODE)")
    j_flow, curve, pair_curve = _predictions(members, data, t, cfg)
    L = {n: np.asarray(runs[n].loss) for n in names}
    gap_pred = float(np.max(np.abs(L["random 1"][j_flow] - curve.loss)) / L["random 1"][0])
    pair_gd_vs_flow = float(np.max(np.abs(L["pair"][j_flow] - pair_curve.loss)) / L["pair"][0])

    progress("odd/even split and accuracy of the trained nets")
    splits = {n: _split(runs[n].params, X, a) for n in names}
    acc = {n: _accuracy(runs[n].params, data.X_test, labels_t, a) for n in names}
    acc_twin = {n: _accuracy(runs.twin(n).params, data.X_test, labels_t, 1.0) for n in names}

    progress("checks")
    checks = {
        "whitening_exact_on_rank_deficient_digits": at_most(
            float(np.max(np.abs(X.T @ X / X.shape[0] - np.eye(d)))), 100 * EPS * kappa,
            f"whiten(rank='auto') drops the {w.dropped} null pixel directions and makes the rest "
            "exactly white: max |XᵀX/N - I| within 100 ε κ, the round-off of an eigendecomposition "
            f"of condition κ = {kappa:.3g}.", unit="absolute (dimensionless)"),
        "pair_init_equals_linear_twin_on_digits": twin_identity(
            runs, ["pair"], "On real data (digits), the pair-init ReLU net", test=True),
    }
    metrics = _metrics(runs, randoms, splits, acc, acc_twin, lin_floor) | {
        "n_train_points": int(X.shape[0]), "n_test_images": int(labels_t.size), "d_whitened": int(d),
        "dropped_directions": int(w.dropped), "condition_number": kappa,
        "raw_asymmetry": float(raw.raw_asymmetry), "linear_floor": lin_floor, "steps": steps,
        "t_max": float(t[-1]), "random_gap_to_prediction": gap_pred,
        "pair_gd_vs_flow_prediction": pair_gd_vs_flow}
    arrays = {"t": t, "members": np.asarray(names), "loss": np.stack([L[n] for n in names]),
              "twin_loss": np.stack([np.asarray(runs.twin(n).loss) for n in names]),
              "test_loss": np.stack([np.asarray(runs[n].test_loss) for n in names]),
              "twin_test_loss": np.stack([np.asarray(runs.twin(n).test_loss) for n in names]),
              "t_flow": t[j_flow], "predicted_loss": curve.loss, "pair_predicted_loss": pair_curve.loss,
              "even_energy": np.stack([np.asarray(runs[n].even_energy) for n in names]),
              "splits": np.array([splits[n][:3] for n in names]),
              "accuracy": np.array([acc[n] for n in names]),
              "twin_accuracy": np.array([acc_twin[n] for n in names]),
              "gap": np.array([runs.twin_gap(n) for n in names]),
              "linear_floor": np.asarray(lin_floor), "eigenvalues": w.eigenvalues}
    n_img = raw.X.shape[0]
    notes = (f"digits: {n_img} images ({n_img - labels_t.size} train, symmetrised to {X.shape[0]} points; "
             f"{labels_t.size} held out), whitened to d = {d} ({w.dropped} null directions dropped); width "
             f"{cfg.width}, α = {a:g}, init std {cfg.scale:g}, GD η = {cfg.lr:g} for {steps} steps. "
             f"Members: {', '.join(names)}; each beside its linear twin. Prediction: {curve.note}.")
    return Result("real-data", seed, {}, metrics, checks, arrays, notes)


def _metrics(runs: Runs, randoms: list[str], splits, acc, acc_twin, lin_floor) -> dict[str, float]:
    """The random inits' measured distance from their twins: loss gaps (train, test), the
    even and nonlinear-odd share of the trained nets, held-out accuracy."""
    gap = np.array([runs.twin_gap(n) for n in randoms])
    S = np.array([splits[n] for n in randoms])  # (lin, odd nonlinear, even, nonlinear fraction)
    return {
        "random_gap_to_twin_median": float(np.median(gap)), "random_gap_to_twin_max": float(np.max(gap)),
        "random_test_gap_to_twin_max": max(runs.twin_gap(n, test=True) for n in randoms),
        "random_gap_over_paper_level": float(np.median(gap) / PAPER_LEVEL),
        "random_final_even_fraction_max": float(np.max(S[:, 2] / S[:, :3].sum(axis=1))),
        "random_final_odd_nonlinear_fraction_max": float(S[:, 3].max()),
        "random_max_even_energy": max(float(np.max(runs[n].even_energy)) for n in randoms),
        "random_final_loss_over_linear_floor": float(np.median([runs[n].loss[-1] for n in randoms])
                                                     / lin_floor),
        "random_test_accuracy_mean": float(np.mean([acc[n] for n in randoms])),
        "twin_test_accuracy_mean": float(np.mean([acc_twin[n] for n in randoms])),
        "random_final_test_loss_gap_to_twin": max(
            abs(float(runs[n].test_loss[-1] - runs.twin(n).test_loss[-1])) for n in randoms),
    }
