"""The run of the saddle-conjectures experiment (module doc of the package): plateau counts of
ReLU and linear nets over width × spectrum, a derived linear control, and the per-layer weight
structure of deep nets."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ...core.data import Dataset
from ...core.layers import Layer
from ...dynamics.trainer import train
from ...results import Result, at_most
from ...theory.layer_structure import layer_structure
from ...theory.modes import gd_mode_strength
from ...theory.staircase import find_plateaus
from ..base import Progress, quiet
from . import Config

KINDS = ("relu", "linear")
"""The random-init nets of each cell, in ensemble order; the aligned linear control is last."""
FOLLOWS = ("spectrum", "width", "both", "neither")


def spectrum(top, k: int) -> np.ndarray:
    """The spectrum with ``k`` distinct values: ``top[0]`` repeated d − k + 1 times, then
    ``top[1:k]`` (d = len(top))."""
    top = np.asarray(top, float)
    return np.concatenate([np.full(top.size - k + 1, top[0]), top[1:k]])


def count_plateaus(t, loss) -> float:
    """The number of plateaus :func:`~biasfree.theory.staircase.find_plateaus` finds, NaN where it
    refuses the curve (a drop it cannot resolve between two records)."""
    try:
        return float(len(find_plateaus(t, loss).plateaus))
    except ValueError:
        return math.nan


def follows(counts) -> str:
    """What a (widths, spectra) grid of plateau counts follows: "width" when the count differs
    between widths at some spectrum, "spectrum" when it differs between spectra at some width,
    "both", or "neither" (unresolved counts, NaN, are left out; a row or column with fewer than
    two resolved counts says nothing)."""
    c = np.asarray(counts, float)

    def varies(rows) -> bool:
        return any(np.unique(r[np.isfinite(r)]).size > 1 for r in rows)

    by_width, by_spectrum = varies(c.T), varies(c)
    return {(False, True): "spectrum", (True, False): "width", (True, True): "both",
            (False, False): "neither"}[(by_width, by_spectrum)]


def _whitened(rng, n: int, d: int) -> np.ndarray:
    """(n, d) inputs with ``XᵀX/n = I`` to round-off."""
    q, _ = np.linalg.qr(rng.normal(size=(n, d)))
    return q * math.sqrt(n)


def _inputs(rng, n: int, d: int, mirrored: bool) -> np.ndarray:
    """Whitened inputs; ``mirrored``: n/2 whitened points and their negatives (still whitened), the
    symmetric data on which a bias-free ReLU net's odd part is its linear twin (docs/theory.md §2)."""
    if not mirrored:
        return _whitened(rng, n, d)
    X = _whitened(rng, n // 2, d)
    return np.concatenate([X, -X])


def _rotation(rng, d: int) -> np.ndarray:
    return np.linalg.qr(rng.normal(size=(d, d)))[0]


def _aligned(m: int, U, V, a0: float) -> tuple[np.ndarray, np.ndarray]:
    """A balanced width-m two-layer linear init aligned with the modes (U, V): unit h < d reads
    v_h and writes u_h, each at √a₀ (mode strength a₀), the other units zero."""
    d = U.shape[0]
    W1, W2 = np.zeros((m, d)), np.zeros((d, m))
    W1[:d], W2[:, :d] = math.sqrt(a0) * V.T, math.sqrt(a0) * U
    return W1, W2


def _control_count(s, a0: float, lr: float, steps: np.ndarray, t: np.ndarray) -> float:
    """The plateaus of the control's exact GD curve: each aligned balanced mode follows
    ``a_{k+1} = a_k (1 + η(s − a_k))²`` (:func:`~biasfree.theory.modes.gd_mode_strength`), the loss
    ½ Σ (s_i − a_i)²: what the rule sees on the theory's own curve."""
    a = np.stack([gd_mode_strength(steps, si, a0, lr) for si in s], axis=1)
    return count_plateaus(t, 0.5 * np.sum((np.asarray(s)[None] - a) ** 2, axis=1))


def _cells(cfg: Config, rng, progress) -> dict:
    """Every (width, spectrum) cell: one ensemble of n_inits ReLU, n_inits linear (Gaussian init of
    std σ) and the aligned control, with effective units at every record."""
    d, B = len(cfg.top), cfg.n_inits
    X = _inputs(rng, cfg.n, d, cfg.mirrored)
    U, V = _rotation(rng, d), _rotation(rng, d)
    steps = int(round(cfg.horizon / cfg.lr))
    W, S = len(cfg.widths), len(cfg.distinct)
    counts = np.full((W, S, 2 * B + 1), np.nan)
    out = {"counts": counts, "control_exact": np.full((W, S), np.nan), "loss": [], "units": []}
    alpha = np.r_[np.zeros(B), np.ones(B + 1)]
    for i, m in enumerate(cfg.widths):
        a0 = m * cfg.init_scale**2 / 2  # E ¼‖W₁r + W₂ᵀq‖² for Gaussian W of std σ: ¼·2mσ²
        for j, k in enumerate(cfg.distinct):
            s = spectrum(cfg.top, k)
            Y = X @ (U * s @ V.T).T
            progress(f"width {m}, {k} distinct singular values: {B} ReLU, {B} linear nets and the control")
            W1 = rng.normal(size=(2 * B, m, d)) * cfg.init_scale
            W2 = rng.normal(size=(2 * B, d, m)) * cfg.init_scale
            C1, C2 = _aligned(m, U, V, a0)
            net = (Layer(np.concatenate([W1, C1[None]])), Layer(np.concatenate([W2, C2[None]])))
            tr = train(net, Dataset(X, Y), steps=steps, lr=cfg.lr, alpha=alpha, batched=True,
                       n_records=cfg.records, spacing="log", observables="units")
            t, loss = np.asarray(tr.t)[0], np.asarray(tr.loss)
            counts[i, j] = [count_plateaus(t, lb) for lb in loss]
            k_rec = np.rint(t / cfg.lr).astype(np.int64)  # the record steps
            out["control_exact"][i, j] = _control_count(s, a0, cfg.lr, k_rec, t)
            out["loss"].append(loss)
            out["units"].append(np.asarray(tr.units["count"]))
    out["t"] = t
    out["loss"] = np.stack(out["loss"]).reshape(W, S, *loss.shape)
    out["units"] = np.stack(out["units"]).reshape(W, S, *loss.shape)
    return out


def control_mismatches(trained, exact) -> int:
    """Cells whose trained control count differs from its exact GD map's (an unresolved count,
    NaN, differs from every count)."""
    return int(np.sum(~(np.asarray(trained) == np.asarray(exact))))


def _structure(tr, b: int) -> list[dict]:
    """Per hidden layer of ensemble member ``b``: :func:`~biasfree.theory.layer_structure.layer_structure`
    of its change from the first record to the last."""
    first = [np.asarray(la.W)[b, 0] for la in tr.path]
    last = [np.asarray(la.W)[b, -1] for la in tr.path]
    return [layer_structure(first[l], last[l], first[l + 1], last[l + 1]) for l in range(len(first) - 1)]


def _deep(cfg: Config, rng, progress) -> dict:
    """The deep-layer rule's nets (module doc of the package): ReLU and linear at every depth on the
    linear task, and the quadratic-first nets on ``y = Σ_k s_k x_k²``. Per net kind, depth and
    hidden layer: the (n_inits,) directions, units and spreads of the layers' changes."""
    d, m, B = len(cfg.top), cfg.deep_width, cfg.n_inits
    s = np.asarray(cfg.top, float)
    X = _inputs(rng, cfg.n, d, cfg.mirrored)
    U, V = _rotation(rng, d), _rotation(rng, d)
    data = Dataset(X, X @ (U * s @ V.T).T)
    steps = int(round(cfg.horizon / cfg.lr))
    out = {}
    for L in cfg.depths:
        # a mode's init strength u_kᵀ W_L⋯W_1 v_k is of order σ^L m^((L−1)/2): this σ makes it deep_strength
        sig = (cfg.deep_strength / m ** ((L - 1) / 2)) ** (1 / L)
        progress(f"depth {L}: {B} ReLU and {B} linear nets of width {m}, init std {sig:.3g}")
        dims = [d] + [m] * (L - 1) + [d]
        net = tuple(Layer(rng.normal(size=(2 * B, dims[i + 1], dims[i])) * sig) for i in range(L))
        tr = train(net, data, steps=steps, lr=cfg.lr, alpha=np.r_[np.zeros(B), np.ones(B)], batched=True,
                   n_records=cfg.records, spacing="log", observables="loss", keep_params=True)
        loss, t = np.asarray(tr.loss), np.asarray(tr.t)[0]
        for n_k, kind in enumerate(KINDS):
            members = range(n_k * B, (n_k + 1) * B)
            out[(kind, L)] = {"layers": [_structure(tr, b) for b in members],
                              "plateaus": np.array([count_plateaus(t, loss[b]) for b in members]),
                              "final": loss[list(members), -1] / loss[list(members), 0]}
    Xg = rng.normal(size=(cfg.n // 2 if cfg.mirrored else cfg.n, d))
    Xg = np.concatenate([Xg, -Xg]) if cfg.mirrored else Xg
    quad = Dataset(Xg, (Xg**2 @ s)[:, None])
    for L in (2, 3):
        progress(f"quadratic first layer, depth {L}: {B} nets of width {m}")
        dims = [d] + [m] * (L - 1) + [1]
        net = [Layer(rng.normal(size=(B, dims[i + 1], dims[i])) * cfg.quad_scale) for i in range(L)]
        net[0] = dataclasses.replace(net[0], activation="quadratic")
        tr = train(tuple(net), quad, steps=cfg.quad_steps, lr=cfg.quad_lr, alpha=0.0, batched=True,
                   n_records=cfg.records, spacing="log", observables="loss", keep_params=True)
        loss, t = np.asarray(tr.loss), np.asarray(tr.t)[0]
        out[("quadratic", L)] = {"layers": [_structure(tr, b) for b in range(B)],
                                 "plateaus": np.array([count_plateaus(t, lb) for lb in loss]),
                                 "final": loss[:, -1] / loss[:, 0]}
    return out


def resolvable(cfg: Config, exact) -> np.ndarray:
    """(widths, spectra) mask: the cells whose exact data-induced staircase (the control's GD map)
    shows 1 + k plateaus for k distinct values, where a plateau count can tell the mechanisms apart."""
    return np.asarray(exact) == (1 + np.asarray(cfg.distinct, float))[None]


def _count_metrics(cfg: Config, cells: dict) -> tuple[dict, dict]:
    """Per net kind, over the resolvable cells (:func:`resolvable`; the others are left out): how
    often its count matches the spectrum (1 + distinct values) or is unresolved, what each init's
    (widths × spectra) grid follows, and the count's mean per spectrum (every count is in the
    arrays)."""
    B = cfg.n_inits
    expected = 1 + np.asarray(cfg.distinct, float)
    ok_cell = resolvable(cfg, cells["control_exact"])
    metrics, arrays = {"resolvable_cells": float(ok_cell.mean())}, {}
    for n_k, kind in enumerate(KINDS):
        c = np.where(ok_cell[..., None], cells["counts"][..., n_k * B:(n_k + 1) * B], np.inf)  # (W, S, B)
        seen = ok_cell[..., None] & np.isfinite(cells["counts"][..., n_k * B:(n_k + 1) * B])
        metrics[f"{kind}_unresolved"] = float(1 - seen.sum() / max(ok_cell.sum() * B, 1))
        exp = np.broadcast_to(expected[None, :, None], c.shape)
        metrics[f"{kind}_matches_spectrum"] = float(np.mean(c[seen] == exp[seen])) if seen.any() else math.nan
        grid = np.where(seen, c, np.nan)
        kinds = [follows(grid[..., b]) for b in range(B)]
        for f in FOLLOWS:
            metrics[f"{kind}_follows_{f}"] = kinds.count(f) / B
        for j, k in enumerate(cfg.distinct):
            v = grid[:, j][np.isfinite(grid[:, j])]
            metrics[f"{kind}_count_mean_k{k}"] = float(v.mean()) if v.size else math.nan
        u = cells["units"][..., n_k * B:(n_k + 1) * B, -1]
        metrics[f"{kind}_units_final_mean"] = float(u.mean())
        arrays[f"{kind}_follows"] = np.array([FOLLOWS.index(f) for f in kinds])
    return metrics, arrays


def _deep_metrics(deep: dict) -> tuple[dict, dict]:
    """The deep-layer rule's metrics, named ``rule_…`` (after the plateau counts' in a sweep's
    summary, which lists metrics alphabetically), and every net's values as arrays ``deep_…``."""
    metrics, arrays = {}, {}
    for (kind, L), r in deep.items():
        for l in range(L - 1):
            for q in ("directions", "units", "spread"):
                v = np.array([layers[l][q] for layers in r["layers"]])
                arrays[f"deep_{kind}_L{L}_layer{l + 1}_{q}"] = v
                if q == "spread":  # the per-init values are in the arrays
                    metrics[f"rule_{kind}_L{L}_layer{l + 1}_spread_median"] = float(np.median(v))
        metrics[f"rule_{kind}_L{L}_final_loss_fraction_max"] = float(np.max(r["final"]))
        arrays[f"deep_{kind}_L{L}_plateaus"] = r["plateaus"]
    return metrics, arrays


def run(cfg: Config, seed: int = 0, progress: Progress = quiet) -> Result:
    rng = np.random.default_rng(seed)
    cells = _cells(cfg, rng, progress)
    deep = _deep(cfg, rng, progress)
    metrics, arrays = _count_metrics(cfg, cells)
    m2, a2 = _deep_metrics(deep)
    metrics |= m2
    arrays |= a2
    mismatch = control_mismatches(cells["counts"][..., -1], cells["control_exact"])
    metrics["control_mismatches"] = mismatch
    checks = {"linear_control_matches_theory": at_most(
        mismatch, 0, "The aligned linear control's plateau count equals that of its exact GD map (Saxe's "
        "modes, each a_{k+1} = a_k(1 + η(s − a_k))², docs/theory.md §11.5.1) in every cell: training, "
        "records and plateau rule read the data-induced staircase as theory draws it. Cells where that "
        "staircase shows 1 + k plateaus (resolvable_cells) are where the counts beside it are compared.",
        unit="cells whose count differs from the exact curve's")}
    arrays |= {"t": cells["t"], "counts": cells["counts"], "loss": cells["loss"], "units": cells["units"],
               "control_exact": cells["control_exact"], "widths": np.asarray(cfg.widths),
               "distinct": np.asarray(cfg.distinct), "depths": np.asarray(cfg.depths)}
    notes = (("Mirrored inputs (x and −x). " if cfg.mirrored else "") +
             f"Measured, not proved: {cfg.n_inits} inits per net kind and cell (init std "
             f"{cfg.init_scale:g}); plateau counts by find_plateaus (NaN: refused, a drop between two "
             "records). Spread in a layer = units used / directions used by its weight change: ≈ 1 "
             "sparse (between units), ≫ 1 low rank (between directions).")
    return Result("saddle-conjectures", seed, {}, metrics, checks, arrays, notes)
