"""The run of :mod:`biasfree.claims.expressivity`: its measurements and their checks against theory."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ...core.data import Dataset, gaussian_inputs, symmetrize
from ...core.nets import forward
from ...core.targets import product_target, sine_target
from ...dynamics import GDConfig
from ...expressivity.depth_separation import fit_net
from ...expressivity.floors import dataset_floor, odd_floor, two_layer_floor
from ...results import Result, at_least, at_most
from ...theory.floors import (
    product_homogeneous_floor,
    radial_square_floor,
    radial_square_target,
    sine_floor_closed_form,
)
from ..base import Progress, quiet
from . import ARCH_LABELS, Config

_Z, _ABS_Z = "z (standard errors)", "|z| (standard errors)"  # the units of the statistical checks


def _z(a, se_a, b, se_b) -> float:
    """``(a - b) / sqrt(se_a² + se_b²)``: the difference in combined standard errors
    (0 when both sides are exact and equal)."""
    diff, err = float(a - b), float(np.hypot(se_a, se_b))
    if err == 0.0:
        return 0.0 if diff == 0.0 else float(np.copysign(np.inf, diff))
    return diff / err


def _slice_points(cfg: Config):
    g = np.linspace(-cfg.extent, cfg.extent, cfg.grid)
    G1, G2 = np.meshgrid(g, g, indexing="ij")
    P = np.zeros((cfg.grid**2, cfg.d))
    P[:, 0], P[:, 1], P[:, 2] = G1.ravel(), G2.ravel(), 1.0
    return g, P


def _floor_checks(name, fl, sample, exact_F, exact_H, cfg) -> dict:
    """Floors against their closed forms ``exact_F`` (two-layer) and ``exact_H`` (any
    depth, or None), both in loss units; the training set's exact odd floor (``sample``,
    the odd floor of the training draws, with its SE) against the population one."""
    z = cfg.z
    checks = {f"{name}_floor_matches_closed_form": at_most(
        abs(_z(fl.total.value, fl.total.error, exact_F, 0.0)), z,
        f"The Monte-Carlo two-layer floor of {name} agrees with its Gaussian closed form within "
        f"{z:g} standard errors (|z|).", unit=_ABS_Z)}
    if exact_H is not None:
        checks[f"{name}_homogeneous_floor_matches_closed_form"] = at_most(
            abs(_z(fl.any_depth.value, fl.any_depth.error, exact_H, 0.0)), z,
            f"The ray-quadrature 1-homogeneous floor of {name} agrees with its closed form within "
            f"{z:g} standard errors (|z|).", unit=_ABS_Z)
    checks[f"{name}_train_set_floor_consistent"] = at_most(
        abs(_z(sample.value, sample.error, fl.odd.value, fl.odd.error)), z,
        f"The exact odd floor of the {cfg.n_train}-draw training set differs from the population "
        f"one by at most {z:g} combined standard errors (the finite-sample gap).", unit=_ABS_Z)
    return checks


def _net_checks(name, fits, fl, dsf, z) -> dict:
    """``fits``: arch -> (test loss, its SE, training-loss curve). Two-layer bias-free:
    never below the exact set floor in training, not below the population floor in test.
    Odd targets: depth 3 and biases go below it, depth 3 stays above the any-depth
    floor. Even target: only biases help (the two-layer floor binds every depth)."""
    F, se_F = fl.total.value, fl.total.error
    H, se_H = fl.any_depth.value, fl.any_depth.error
    (t2, s2, curve), (t3, s3, _), (tb, sb, _) = fits["two_layer"], fits["depth3"], fits["biased"]
    checks = {
        f"{name}_two_layer_train_never_below_set_floor": at_least(
            float(np.min(curve - dsf.value)) / dsf.power, -1e-10,
            f"At every recorded time the two-layer bias-free net's training loss on {name} is at "
            "least the exact floor of its symmetric training set (round-off allowance 1e-10).",
            unit="fraction of ½<y²> (training set)"),
        f"{name}_two_layer_test_not_below_floor": at_least(
            _z(t2, s2, F, se_F), -z,
            f"The trained two-layer bias-free net's test loss on {name} is not below the "
            f"population two-layer floor by more than {z:g} standard errors (z).", unit=_Z),
        f"{name}_biased_below_two_layer_floor": at_least(
            _z(F, se_F, tb, sb), z,
            f"The two-layer net with biases beats the bias-free two-layer floor on {name} by at "
            f"least {z:g} standard errors (z).", unit=_Z),
    }
    if name == "even":
        checks["even_depth3_not_below_two_layer_floor"] = at_least(
            _z(t3, s3, F, se_F), -z,
            "On the even target the depth-3 bias-free net does not beat the two-layer floor (it "
            f"is also the 1-homogeneous floor of every depth) by more than {z:g} SE (z).", unit=_Z)
    else:
        checks[f"{name}_depth3_below_two_layer_floor"] = at_least(
            _z(F, se_F, t3, s3), z,
            f"The depth-3 bias-free net's test loss on {name} is below the two-layer floor by at "
            f"least {z:g} standard errors (z): depth expresses odd nonlinearity.", unit=_Z)
        checks[f"{name}_depth3_test_above_homogeneous_floor"] = at_least(
            _z(t3, s3, H, se_H), -z,
            f"The depth-3 bias-free net's test loss on {name} is not below the 1-homogeneous "
            f"floor of every depth by more than {z:g} standard errors (z).", unit=_Z)
    return checks


def _targets(key, d: int) -> tuple[dict, np.ndarray]:
    """(name -> (target, ½E y² (the loss of f = 0), normalised two-layer floor, normalised
    any-depth floor or None), the sine's w): closed forms for x ~ N(0, I_d). x1x2x3 and the radial
    square have E y² = 1, so ½E y² = ½."""
    sine, w = sine_target(key, d)
    sine_F, sine_P = sine_floor_closed_form(w)
    return {"x1x2x3": (product_target((0, 1, 2)), 0.5, 1.0, product_homogeneous_floor(d, 3)),
            "sine": (sine, sine_P, sine_F / sine_P, None),
            "even": (radial_square_target(d), 0.5, radial_square_floor(d), radial_square_floor(d))}, w


def run(cfg: Config, seed: int = 0, progress: Progress = quiet) -> Result:
    keys = jax.random.split(jax.random.PRNGKey(seed), 5)
    targets, w = _targets(keys[0], cfg.d)
    X0 = gaussian_inputs(keys[1], cfg.n_train, cfg.d)
    X_train = symmetrize(X0)
    X_test = gaussian_inputs(keys[2], cfg.n_test, cfg.d)
    X_mc = np.asarray(gaussian_inputs(keys[3], cfg.n_mc, cfg.d))
    grid, P_slice = _slice_points(cfg)
    gd_cfg = GDConfig(alpha=0.0, lr=cfg.lr, steps=cfg.steps, n_records=cfg.n_records, spacing="log")
    widths = {"two_layer": (cfg.d, cfg.width, 1), "depth3": (cfg.d, cfg.width, cfg.width, 1),
              "biased": (cfg.d, cfg.width, 1)}

    metrics: dict[str, float] = {"w_norm": float(np.linalg.norm(w)), "sine_power_exact": targets["sine"][1]}
    checks: dict = {}
    arrays: dict[str, np.ndarray] = {"slice_grid": grid}
    for name, (f, power_exact, F_norm, H_norm) in targets.items():
        progress(f"{name}: floors (Monte Carlo + ray quadrature)")
        fl = two_layer_floor(f, X_mc)
        sample = odd_floor(f, np.asarray(X0))  # equals the training set's exact odd floor
        Y = f(X_train)  # the target on both x and -x (not -y: the even target is even)
        dsf = dataset_floor(X_train, Y)
        checks |= _floor_checks(name, fl, sample, F_norm * power_exact,
                                None if H_norm is None else H_norm * power_exact, cfg)
        power = fl.total.power
        metrics |= {f"{name}_floor_two_layer": fl.total.normalised,
                    f"{name}_floor_two_layer_se": fl.total.normalised_se,
                    f"{name}_floor_two_layer_exact": F_norm,
                    f"{name}_floor_odd": fl.odd.normalised, f"{name}_floor_even": fl.even.normalised,
                    f"{name}_floor_homogeneous": fl.any_depth.normalised,
                    f"{name}_floor_homogeneous_se": fl.any_depth.normalised_se,
                    f"{name}_floor_train_set": dsf.normalised, f"{name}_power_mc": power}
        arrays[f"floor_{name}"] = np.array([fl.total.normalised, fl.total.normalised_se,
                                            fl.any_depth.normalised, fl.any_depth.normalised_se,
                                            dsf.normalised])
        arrays[f"slice_target_{name}"] = np.asarray(f(P_slice)).reshape(cfg.grid, cfg.grid)

        data = Dataset(X_train, Y)  # test loss only at the end: recording it costs compile time
        y_test = np.asarray(f(X_test))
        fits = {}
        for arch, wid in widths.items():
            progress(f"{name}: training {ARCH_LABELS[arch]}")
            fit = fit_net(data, keys[4], wid, gd_cfg, gain=cfg.gain, bias=arch == "biased")
            # its held-out loss <½||y - f||²> ± SE
            ell = 0.5 * np.sum((y_test - np.asarray(forward(fit.params, X_test, 0.0))) ** 2, axis=1)
            test_loss, se_test = float(np.mean(ell)), float(np.std(ell, ddof=1) / np.sqrt(ell.size))
            curve = np.asarray(fit.trajectory.loss)
            fits[arch] = (test_loss, se_test, curve)
            arrays[f"t_{arch}_{name}"] = np.asarray(fit.trajectory.t)
            arrays[f"train_{arch}_{name}"] = curve / dsf.power
            arrays[f"test_{arch}_{name}"] = np.array([test_loss, se_test]) / power
            arrays[f"slice_{arch}_{name}"] = np.asarray(
                forward(fit.params, jnp.asarray(P_slice), 0.0)).reshape(cfg.grid, cfg.grid)
            metrics[f"{name}_{arch}_test_loss"] = test_loss / power
            metrics[f"{name}_{arch}_train_loss"] = fit.train_loss / dsf.power
        checks |= _net_checks(name, fits, fl, dsf, cfg.z)

    notes = (f"d = {cfg.d}; {cfg.n_train} training draws plus mirrors; floors from {cfg.n_mc} "
             f"Monte-Carlo draws; losses normalised by the loss of f = 0, ½E y²; sine: ||w|| = "
             f"{np.linalg.norm(w):.3f}. The exact training-set bound covers the odd part only: on "
             "the even target a wide net's even part can fit the finite training set, so training "
             "losses fall below the population floor there while test losses stay above it. "
             "Slices: x3 = 1, other coordinates 0.")
    return Result("expressivity", seed, {}, metrics, checks, arrays, notes)
