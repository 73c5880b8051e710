"""The run of :mod:`biasfree.claims.conv_collapse` (its claim, config and presets): the
measurements and the checks that compare them with theory."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ...core.conv import Conv
from ...core.data import Dataset, symmetrize
from ...core.draws import normal
from ...core.inits import init_conv, init_gaussian
from ...core.layers import scale_params
from ...core.real_data import load_data
from ...dynamics import GDConfig
from ...dynamics.ensemble import Member, Runs, gd_members
from ...results import Result, at_most, config_dict
from ..base import Progress, _quiet
from ..checks import PAPER_LEVEL, ROUND_OFF, twin_identity
from . import FRACTION, Config

DIGITS_SHAPE = (8, 8)
EPS = float(np.finfo(float).eps)

# ------------------------------------------------------------------ data


def digits(cfg: Config, seed: int) -> Dataset:
    """``n_images`` bundled digits (pixels / 16, one-hot), symmetrised: [X₊; −X₊], [Y; −Y]."""
    raw = load_data("digits", target="onehot", symmetrize_data=True, n=cfg.n_images, seed=seed)
    return Dataset(raw.X, raw.Y)


def teacher(cfg: Config, key) -> Dataset:
    """Gaussian signals x (length S) and the translation-equivariant teacher
    ``y_s = φ((κ ⋆ x)_s)`` at every position s (p = S outputs), φ(u) = u + sin(4u) odd,
    κ a unit-norm Gaussian filter applied by :class:`~biasfree.core.conv.Conv` ("same"
    padding); symmetrised."""
    k_x, k_f = jax.random.split(key)
    S = cfg.teacher_length
    kappa = normal(k_f, (1, 1, cfg.teacher_kernel))
    X = normal(k_x, (cfg.teacher_n, S))
    U = Conv(kappa / jnp.linalg.norm(kappa), None, (S,), "same").linear(X)
    Y = U + jnp.sin(4 * U)
    return Dataset(*(np.asarray(a) for a in symmetrize(X, Y)))


# ------------------------------------------------------------------ members


def collapse_members(params, pair, alphas) -> dict[str, Member]:
    """One random init at every α (each α < 1 beside its twin) and the pair-channel init
    at every α < 1 beside its twin."""
    out = {f"α={a:g}": Member(params, float(a), twin=a < 1) for a in alphas}
    return out | {f"pair α={a:g}": Member(pair, float(a), twin=True) for a in alphas if a < 1}


def padded(params, units: int):
    """``params`` (conv or dense, two layers) with hidden units/channels added up to
    ``units``, all-zero in and out. Exact: a zero unit with a zero readout gets zero
    gradients (σ_α(0) = 0, no bias), so it stays zero and the net's run is unchanged. It
    lets runs with different C share one compiled ensemble call."""
    first, last = params
    w = first.weight  # torch's layout: units (channels) first
    extra = units - w.shape[0]
    if extra == 0:
        return params
    first = first.with_weight(jnp.pad(w, ((0, extra),) + ((0, 0),) * (w.ndim - 1)))
    per = first.n_out // units  # positions per unit: 1 for a dense layer
    return first, last.with_weight(jnp.pad(last.weight, ((0, 0), (0, extra * per))))


def sweep_members(cfg: Config, key, p: int, alpha: float) -> tuple[dict[str, Member], list, list]:
    """Random conv nets (dense readout) over ``sweep_channels`` (std ``scale``) and
    ``sweep_scales`` (C = ``channels``), ``sweep_inits`` each, and the dense width-C net
    from the same σ beside each: ``(members, channel rows, scale rows)``; a row is
    (kind, C, σ, [member names]). The channel sweep's nets are :func:`padded` to the
    largest C (one compiled call for all of them)."""
    members, by_c, by_s = {}, [], []
    c_max = max(cfg.sweep_channels)
    keys = jax.random.split(key, cfg.sweep_inits)
    settings = [(C, cfg.scale, by_c) for C in cfg.sweep_channels]
    settings += [(cfg.channels, s, by_s) for s in cfg.sweep_scales]
    for C, sigma, rows in settings:
        for kind in ("conv", "dense"):
            names = []
            for i, k in enumerate(keys):
                name = f"{kind} C={C} σ={sigma:.1e} #{i}"
                if name not in members:
                    unit = (init_conv(k, DIGITS_SHAPE, (1, int(C)), cfg.kernel, p, 1.0) if kind == "conv"
                            else init_gaussian(k, (DIGITS_SHAPE[0] * DIGITS_SHAPE[1], int(C), p), 1.0))
                    net = scale_params(unit, float(sigma))
                    members[name] = Member(padded(net, c_max) if rows is by_c else net, alpha, twin=True)
                names.append(name)
            rows.append((kind, int(C), float(sigma), names))
    return members, by_c, by_s


# ------------------------------------------------------------------ measurements


def initial_identity_error(runs: Runs, name: str) -> float:
    """``|L(0) − L_twin(0) − ½⟨f_even(0)²⟩| / L(0)``: on symmetric data with an odd target
    the twin computes f_odd = c·W₂A x and the cross term ⟨(y − f_odd) f_even⟩ averages to
    zero (odd × even), so the initial gap is exactly half the even energy (§1.3)."""
    a, b = runs[name], runs.twin(name)
    L0 = float(a.loss[0])
    return abs(L0 - float(b.loss[0]) - 0.5 * float(a.even_energy[0])) / L0


def sweep_table(runs: Runs, rows) -> np.ndarray:
    """(rows, inits) twin gaps of the members of each sweep row."""
    return np.array([[runs.twin_gap(n) for n in names] for _, _, _, names in rows])


def _collapse_arrays(runs: Runs, alphas, prefix: str) -> dict:
    """Loss curves of the shared init at each α and of each α's twin (α = 1: itself)."""
    loss = np.stack([np.asarray(runs[f"α={a:g}"].loss) for a in alphas])
    twin = np.stack([np.asarray((runs.twin(f"α={a:g}") if a < 1 else runs[f"α={a:g}"]).loss)
                     for a in alphas])
    pair = np.array([runs.twin_gap(f"pair α={a:g}") for a in alphas if a < 1])
    return {f"{prefix}_loss": loss, f"{prefix}_twin_loss": twin, f"{prefix}_pair_gap": pair,
            f"{prefix}_even": np.stack([np.asarray(runs[f"α={a:g}"].even_energy) for a in alphas])}


# ------------------------------------------------------------------ the experiment


def run(cfg: Config, seed: int = 0, progress: Progress = _quiet) -> Result:
    alphas = np.asarray(cfg.alphas, dtype=float)
    a_min = float(alphas.min())
    k_teach, k_dig, k_dpair, k_tnet, k_tpair, k_sweep = jax.random.split(jax.random.PRNGKey(seed), 6)
    gd_cfg = GDConfig(lr=cfg.lr, steps=int(np.ceil(cfg.t_max / cfg.lr)), n_records=cfg.n_records)

    progress("data: symmetrised digits; Gaussian signals with a translation-equivariant teacher")
    dig, tea = digits(cfg, seed), teacher(cfg, k_teach)
    p = int(dig.Y.shape[1])
    ch = (1, cfg.channels)

    progress("digits: one shared init at every α, pair channels, the channel and scale sweeps "
             "(conv and dense), each beside its linear twin")
    members = collapse_members(
        init_conv(k_dig, DIGITS_SHAPE, ch, cfg.kernel, p, cfg.scale),
        init_conv(k_dpair, DIGITS_SHAPE, ch, cfg.kernel, p, cfg.scale, pairs=True), alphas)
    sweep, rows_c, rows_s = sweep_members(cfg, k_sweep, p, a_min)
    runs_d = gd_members(members | sweep, dig, gd_cfg)

    progress("teacher: one shared init at every α and pair channels")
    shape_t = (cfg.teacher_length,)
    runs_t = gd_members(collapse_members(
        init_conv(k_tnet, shape_t, ch, cfg.kernel, cfg.teacher_length, cfg.scale),
        init_conv(k_tpair, shape_t, ch, cfg.kernel, cfg.teacher_length, cfg.scale, pairs=True),
        alphas), tea, gd_cfg)

    progress("checks")
    leaky = [f"α={a:g}" for a in alphas if a < 1]
    gap_d = np.array([runs_d.twin_gap(n) for n in leaky])
    gap_t = np.array([runs_t.twin_gap(n) for n in leaky])
    pairs = [f"pair α={a:g}" for a in alphas if a < 1]
    pair_gap = max(max(runs_d.twin_gap(n) for n in pairs), max(runs_t.twin_gap(n) for n in pairs))
    randoms = [(runs_d, n) for n in leaky + list(sweep)] + [(runs_t, n) for n in leaky]
    init_err = max(initial_identity_error(r, n) for r, n in randoms)
    gaps_c, gaps_s = sweep_table(runs_d, rows_c), sweep_table(runs_d, rows_s)

    # The random-init gaps are measured, not checked: the paper's 0.3% is its dense claim at its
    # setting, and no threshold for conv nets follows from theory (§7.4); the figure and the
    # metrics put each gap beside 0.3%. The checks are the identities that theory makes exact.
    checks = {
        "pair_channels_equal_linear_twin": twin_identity(
            Runs({**{f"digits {n}": runs_d[n] for n in pairs},
                          **{f"teacher {n}": runs_t[n] for n in pairs}},
                         {**{f"digits {n}": runs_d.twin(n) for n in pairs},
                          **{f"teacher {n}": runs_t.twin(n) for n in pairs}}),
            [f"{d} {n}" for d in ("digits", "teacher") for n in pairs],
            "Pair-channel (k, −k) conv nets with readouts (v, −v), on both data sets,"),
        "initial_gap_is_half_even_energy": at_most(
            init_err, ROUND_OFF,
            "For every random init (collapse runs and sweeps, conv and dense) the loss gap to the twin "
            "at t = 0 equals ½⟨f_even²⟩ to round-off: on symmetric data the even part is the only "
            "departure from the linear twin (§1.3, §7.1).", unit=FRACTION),
    }
    i_main_c = list(cfg.sweep_channels).index(cfg.channels) if cfg.channels in cfg.sweep_channels else None
    metrics = {
        "digits_gap_max": float(gap_d.max()), "teacher_gap_max": float(gap_t.max()),
        "digits_gap_over_paper_level": float(gap_d.max() / PAPER_LEVEL),
        "teacher_gap_over_paper_level": float(gap_t.max() / PAPER_LEVEL),
        "pair_gap_max": float(pair_gap), "pair_gap_over_round_off_budget": float(pair_gap / ROUND_OFF),
        "pair_gap_over_eps": float(pair_gap / EPS), "initial_identity_error_max": float(init_err),
        "steps": float(gd_cfg.steps),
        "digits_final_over_initial_loss": float(runs_d[f"α={a_min:g}"].loss[-1]
                                                / runs_d[f"α={a_min:g}"].loss[0]),
        "teacher_final_over_initial_loss": float(runs_t[f"α={a_min:g}"].loss[-1]
                                                 / runs_t[f"α={a_min:g}"].loss[0]),
    }
    for a, gd_, gt in zip([a for a in alphas if a < 1], gap_d, gap_t, strict=True):
        metrics[f"digits_gap_alpha_{a:g}"] = float(gd_)
        metrics[f"teacher_gap_alpha_{a:g}"] = float(gt)
    for (kind, C, sigma, _), g in zip(rows_c + rows_s, np.concatenate([gaps_c, gaps_s]), strict=True):
        metrics[f"sweep_{kind}_C{C}_std{sigma:.0e}_gap_median"] = float(np.median(g))
        metrics[f"sweep_{kind}_C{C}_std{sigma:.0e}_gap_max"] = float(np.max(g))
    if i_main_c is not None:
        metrics["conv_over_dense_gap_at_main_setting"] = float(
            np.median(gaps_c[2 * i_main_c]) / np.median(gaps_c[2 * i_main_c + 1]))

    t = np.asarray(runs_d[f"α={a_min:g}"].t)
    arrays = {"alphas": alphas, "t": t, "paper_level": np.asarray(PAPER_LEVEL),
              "round_off": np.asarray(ROUND_OFF),
              **_collapse_arrays(runs_d, alphas, "digits"), **_collapse_arrays(runs_t, alphas, "teacher"),
              "sweep_channels": np.array([C for k, C, _, _ in rows_c if k == "conv"]),
              "sweep_scales": np.array([s for k, _, s, _ in rows_s if k == "conv"]),
              "gaps_channels_conv": gaps_c[0::2], "gaps_channels_dense": gaps_c[1::2],
              "gaps_scales_conv": gaps_s[0::2], "gaps_scales_dense": gaps_s[1::2],
              "sweep_alpha": np.asarray(a_min), "channels": np.asarray(cfg.channels),
              "scale": np.asarray(cfg.scale)}
    notes = (f"Digits: {cfg.n_images} images symmetrised to {2 * cfg.n_images} points, raw pixels / 16, "
             f"one-hot targets; 2-D conv 1 → {cfg.channels} channels, {cfg.kernel}×{cfg.kernel} 'same', "
             f"dense readout. Teacher: {cfg.teacher_n} Gaussian signals of length {cfg.teacher_length} "
             f"(symmetrised), y_s = φ((κ⋆x)_s) at each position, φ(u) = u + sin 4u, filter size "
             f"{cfg.teacher_kernel}; 1-D conv, dense readout. Init std {cfg.scale:g}; GD η = {cfg.lr:g}, "
             f"{gd_cfg.steps} steps. "
             f"Sweeps on digits at α = {a_min:g}, {cfg.sweep_inits} init(s) per setting; the dense net "
             "beside each conv net has width C (one hidden unit per channel).")
    return Result("conv-collapse", seed, config_dict(cfg), metrics, checks, arrays, notes)
