"""The run of the saddle-to-saddle experiment (module doc of the package): six staircases against
their predicted levels and times, their effective units, and Theorem 1's embedding identities."""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import numpy as np

from ...analysis.saddles import check_embedding, embed
from ...core.conv import Conv, PooledDense
from ...core.data import Dataset
from ...core.icl_data import cubic_features, in_context_regression
from ...core.layers import Layer
from ...core.nets import with_activation
from ...dynamics.trainer import train
from ...results import Result, at_least, at_most
from ...theory import attention as th
from ...theory.modes import gd_mode_strength, half_time
from ...theory.plateau_times import quadratic_unit_time_to
from ...theory.reduced_rank import reduced_rank_losses
from ...theory.staircase import find_plateaus
from ..base import Progress, quiet
from ..linear_attention.run import aligned_heads, in_context_maps
from . import Config
from .leave import attention_leave, leave_checks

EPS = float(np.finfo(float).eps)
SE = 3.0
"""Standard errors allowed for a finite-sample deviation from a population prediction (attention)."""
QUAD_TARGET = 1.0
"""The quadratic task's target coefficient c on every ray (equal: the units differ by their init only)."""
PANELS = ("linear FC", "ReLU FC", "separate attention", "linear conv", "ReLU conv", "quadratic")
KEYS = ("linear", "relu", "attention", "conv_linear", "conv_relu", "quadratic")


@dataclass
class Panel:
    """One architecture's run and predictions, units in learning order: records ``t``, ``loss``,
    ``units`` (count), ``strength`` (T, K) each unit's measured strength ũ (half learned at ``half``);
    the predicted ``levels`` (K + 1,: k learned units) and drop ``times`` (K,) with the fixed part of
    their tolerance ``time_extra`` (finite η: the exact GD map's half time against the predicted one,
    plus one step; attention: 3 standard errors of the sample); the exact GD map of every unit's
    remaining loss ``unit_map`` (steps + 1, K) on ``map_t``, with the units' ``drops`` (K,) (how far
    the map is from each saddle, independent of ``levels``) and ``level_extra`` (sample terms)."""

    t: np.ndarray
    loss: np.ndarray
    units: np.ndarray
    strength: np.ndarray
    half: np.ndarray
    levels: np.ndarray
    times: np.ndarray
    time_extra: np.ndarray
    map_t: np.ndarray
    unit_map: np.ndarray
    drops: np.ndarray
    level_extra: np.ndarray
    expected_units: int
    mechanism: str
    leave: dict | None = None
    """Attention: ``analyse``'s time to leave each intermediate plateau (:mod:`.leave`)."""


def _records(cfg: Config, steps: int, lr: float) -> dict:
    return dict(steps=steps, lr=lr, n_records=cfg.records, spacing="log", observables="units")


def _crossing(t, loss, level: float) -> tuple[float, float]:
    """The first time ``loss`` falls to ``level`` (linear between records) and the width of the
    bracketing record interval (NaN, NaN if it never does)."""
    i = np.nonzero(np.asarray(loss) <= level)[0]
    if i.size == 0 or i[0] == 0:
        return math.nan, math.nan
    j = int(i[0])
    return th.crossing_time(t, loss, level), float(t[j] - t[j - 1])


# ----------------------------------------------------------------- logistic modes (data-induced)


def _mode_panel(run, lr, steps, w, lam, c, u0, floor, K_units, gain=1.0) -> Panel:
    """A panel of independent balanced modes: mode h has remaining loss ``½ w_h (c_h − ũ_h)²`` with
    ``dũ/dt = 2 λ_h ũ (c_h − ũ)``, in ``a = λũ`` Saxe's equation, whose GD map ``a_{k+1} = a_k (1 +
    η(λc − a_k))²`` is exact for an aligned balanced init (:func:`~biasfree.theory.modes.gd_mode_strength`).
    Levels ``floor + ½ Σ_{later} w c²``; times the flow's half times ``ln(c/ũ₀ − 1)/(2λc)``
    (:func:`~biasfree.theory.modes.half_time`); units learned in order of time; the measured ũ is
    ``gain`` times the unit's effective-unit magnitude (sorted: the first learned is the largest)."""
    w, lam, c, u0 = (np.asarray(a, float) for a in (w, lam, c, u0))
    times = np.asarray(half_time(lam * c, lam * u0), float).reshape(-1)
    o = np.argsort(times)
    w, lam, c, u0, times = w[o], lam[o], c[o], u0[o], times[o]
    k = np.arange(steps + 1)
    mt = lr * k
    u = np.stack([gd_mode_strength(k, lh * ch, lh * uh, lr) / lh
                  for lh, ch, uh in zip(lam, c, u0, strict=True)], axis=1)
    t_map = np.array([th.crossing_time(mt, -u[:, h], -0.5 * c[h]) for h in range(c.size)])
    drops = 0.5 * w * c**2
    levels = floor + np.concatenate([np.cumsum(drops[::-1])[::-1], [0.0]])
    mags = gain * np.asarray(run.units["magnitudes"])[:, :c.size]
    return Panel(np.asarray(run.t), np.asarray(run.loss), np.asarray(run.units["count"]), mags, 0.5 * c,
                 levels, times, np.abs(t_map - times) + lr, mt, 0.5 * w * (c - u) ** 2, drops,
                 np.zeros(c.size + 1), K_units, "data")


def _whitened(rng, n: int, d: int) -> np.ndarray:
    """(n, d) inputs with ``XᵀX/n = I`` to round-off (an orthonormal basis scaled by √n)."""
    q, _ = np.linalg.qr(rng.normal(size=(n, d)))
    return q * math.sqrt(n)


def _orthogonal(rng, d: int) -> np.ndarray:
    return np.linalg.qr(rng.normal(size=(d, d)))[0]


def _linear_fc(cfg: Config, rng, progress) -> tuple[Panel, tuple, np.ndarray, np.ndarray]:
    s = np.asarray(cfg.strengths, float)
    d = s.size
    X = _whitened(rng, cfg.n, d)
    U, V = _orthogonal(rng, d), _orthogonal(rng, d)
    Y = X @ (U * s @ V.T).T
    a = math.sqrt(cfg.scale)  # mode i: W₁ row i = √a₀ v_iᵀ, W₂ column i = √a₀ u_i (strength a₀)
    net = (Layer(a * V.T), Layer(a * U))
    progress("linear FC")
    run = train(net, Dataset(X, Y, mirror=False), None, alpha=1.0, **_records(cfg, cfg.steps, cfg.lr))
    levels = reduced_rank_losses(X, Y)  # independent of the modes' bookkeeping: the check compares
    p = _mode_panel(run, cfg.lr, cfg.steps, np.ones(d), np.ones(d), s, np.full(d, cfg.scale), 0.0, d)
    p.levels = levels
    return p, (Layer(math.sqrt(s[0]) * V.T[:1]), Layer(math.sqrt(s[0]) * U[:, :1])), X, Y


def _simplex(d: int) -> np.ndarray:
    """d + 1 unit vectors in d dimensions with pairwise cosine −1/d (rows)."""
    E = np.eye(d + 1) - 1.0 / (d + 1)
    B = np.linalg.svd(E)[2][:d]  # an orthonormal basis of the sum-zero plane
    R = E @ B.T
    return R / np.linalg.norm(R, axis=1, keepdims=True)


def _relu_fc(cfg: Config, rng, progress):
    c = np.asarray(cfg.strengths, float)
    K = c.size
    rays = _simplex(K - 1)
    which = np.arange(cfg.n) % K
    r = np.abs(rng.normal(size=cfg.n))
    X = r[:, None] * rays[which]
    Y = (c[which] * r)[:, None]
    a = math.sqrt(cfg.scale)
    net = (Layer(a * rays), Layer(a * np.ones((1, K))))
    progress("ReLU FC")
    run = train(net, Dataset(X, Y, mirror=False), None, alpha=0.0, **_records(cfg, cfg.steps, cfg.lr))
    lam = np.array([np.sum(r[which == h] ** 2) / cfg.n for h in range(K)])  # p_h <r²>_h
    p = _mode_panel(run, cfg.lr, cfg.steps, lam, lam, c, np.full(K, cfg.scale), 0.0, K)
    first = int(np.argmin(half_time(lam * c, lam * cfg.scale)))  # the first ray learned
    narrow = (Layer(math.sqrt(c[first]) * rays[first:first + 1]), Layer(np.full((1, 1), math.sqrt(c[first]))))
    return p, narrow, X, Y


def conv_net(K, V, n: int) -> tuple:
    """A bias-free one-channel-in conv net on inputs of length ``n``: kernels ``K`` (C, k),
    "valid" positions, average pooling and readout ``V`` (out, C)."""
    K, V = np.asarray(K, float), np.asarray(V, float)
    return Conv(K[:, None, :], None, (n,), "valid"), PooledDense(V, None, (n - K.shape[1] + 1,))


def linear_conv_task(rng, n_points: int, n: int, s, lam=None) -> tuple:
    """The linear conv panel's task: ``n_points`` inputs of length ``n`` whose mean patch p̄ = A x
    (kernel k = len(s)) has second moment ``V diag(λ) Vᵀ`` (``lam`` λ, None: all 1, p̄ whitened),
    targets ``Y = p̄ (U diag(s) Vᵀ)ᵀ`` for random rotations U, V: mode h has input variance λ_h and
    input-output strength λ_h s_h. Returns ``(X, Y, A, U, V)``: on p̄ the net is a two-layer linear net
    (docs/theory.md §11.7.7)."""
    s = np.asarray(s, float)
    k = s.size
    lam = np.ones(k) if lam is None else np.asarray(lam, float)
    probe = conv_net(np.eye(k), np.eye(k), n)  # channel o reads patch offset o: f(x) = p̄(x)
    A = np.asarray(probe[1].linear(probe[0].linear(np.eye(n)))).T  # p̄ = A x, A (k, n)
    X0 = rng.normal(size=(n_points, n))
    P0 = X0 @ A.T
    Pw = _whitened(rng, n_points, k)
    U, V = _orthogonal(rng, k), _orthogonal(rng, k)
    P = Pw @ (V * np.sqrt(lam)) @ V.T  # PᵀP/N = V diag(λ) Vᵀ (= Pw's I for λ = 1)
    X = X0 + (P - P0) @ np.linalg.pinv(A).T  # X Aᵀ = P: the mean patch is P
    return X, P @ (U * s @ V.T).T, A, U, V


def relu_conv_task(rng, n_points: int, n: int, k: int, c) -> tuple:
    """The ReLU conv panel's task: single spikes ``r e_j`` at interior positions (every kernel
    offset of a length-k kernel sees them), target ``c₊ r`` for r > 0 and ``c₋ |r|`` for r < 0,
    ``c = (c₊, c₋)``. Returns ``(X, Y, r)``."""
    c = np.asarray(c, float)
    pos = rng.integers(k - 1, n - k + 1, size=n_points)
    r = rng.normal(size=n_points)
    X = np.zeros((n_points, n))
    X[np.arange(n_points), pos] = r
    return X, (np.where(r > 0, c[0], c[1]) * np.abs(r))[:, None], r


def conv_variances(cfg: Config) -> np.ndarray:
    """The linear conv panel's mean-patch variances along its modes, ``λ_h = conv_spread^((k−1)/2 − h)``
    (geometric mean 1): the stronger target modes sit on the stronger input directions, so its rates
    λ_h s_h are further apart than linear FC's and its drops ½ λ_h s_h² its own."""
    k = cfg.conv_kernel
    return cfg.conv_spread ** ((k - 1) / 2 - np.arange(k))


def _linear_conv(cfg: Config, rng, progress) -> Panel:
    k, n = cfg.conv_kernel, cfg.conv_n
    s = np.asarray(cfg.strengths[:k], float)
    lam = conv_variances(cfg)
    X, Y, A, U, V = linear_conv_task(rng, cfg.n, n, s, lam)
    a = math.sqrt(cfg.scale)
    net = conv_net(a * V.T, a * U, n)
    progress("linear conv")
    run = train(net, Dataset(X, Y, mirror=False), None, alpha=1.0, **_records(cfg, cfg.steps, cfg.lr))
    p = _mode_panel(run, cfg.lr, cfg.steps, lam, lam, s, np.full(k, cfg.scale), 0.0, k)
    p.levels = reduced_rank_losses(X @ A.T, Y)
    return p


def _relu_conv(cfg: Config, rng, progress) -> Panel:
    k, n = cfg.conv_kernel, cfg.conv_n
    S = n - k + 1
    c = np.asarray(cfg.strengths[:2], float)  # c₊, c₋
    X, Y, r = relu_conv_task(rng, cfg.n, n, k, c)
    b = math.sqrt(cfg.scale)  # kernel ±b 1/√k (norm b), readout b: a unit of strength a₀ = b²
    K = np.stack([np.full(k, b / math.sqrt(k)), np.full(k, -b / math.sqrt(k))])
    net = conv_net(K, np.full((1, 2), b), n)
    progress("ReLU conv")
    run = train(net, Dataset(X, Y, mirror=False), None, alpha=0.0, **_records(cfg, cfg.steps, cfg.lr))
    g = math.sqrt(k) / S  # f = V ‖K‖ g |r| on the channel's sign
    w = np.array([np.sum(r[r > 0] ** 2), np.sum(r[r < 0] ** 2)]) / cfg.n  # p <r²> per sign
    # unit h: L = ½ w (c − ũ)², ũ = g V‖K‖, dũ/dt = 2 (w g) ũ (c − ũ): a mode of rate λ = w g from ũ₀ = g a₀
    return _mode_panel(run, cfg.lr, cfg.steps, w, w * g, c, np.full(2, g * cfg.scale), 0.0, 2, gain=g)


# ----------------------------------------------------------------- the quadratic net (init-induced)


def _quadratic_map(steps: int, lr: float, lam, c: float, a0) -> np.ndarray:
    """The exact GD strengths ``ũ = a b²`` (steps + 1, H) of aligned quadratic units: unit h on its
    own ray, ``L_h = ½ λ_h (c − a b²)²``, ``a ← a + ηλ(c − ab²) b²``, ``b ← b + 2ηλ(c − ab²) a b``."""
    lam, a = np.asarray(lam, float), np.asarray(a0, float).copy()
    b = math.sqrt(2) * a
    out = np.empty((steps + 1, a.size))
    for k in range(steps + 1):
        out[k] = a * b * b
        res = c - out[k]
        a, b = a + lr * lam * res * b * b, b + 2 * lr * lam * res * a * b
    return out


def _quadratic(cfg: Config, rng, progress) -> Panel:
    H = cfg.quad_units
    a0 = cfg.quad_scale * cfg.quad_ratio ** np.arange(H)  # decreasing: learned in this order
    m = cfg.n // H  # the same m radii on every ray: equal λ_h, so the init alone orders the units
    which = np.repeat(np.arange(H)[None], m, axis=0).ravel()
    r = np.repeat(rng.normal(size=m), H)
    X = np.zeros((m * H, H))
    X[np.arange(m * H), which] = r
    Y = (QUAD_TARGET * r**2)[:, None]
    net = with_activation((Layer(np.diag(math.sqrt(2) * a0)), Layer(a0[None, :].copy())), "quadratic")
    progress("quadratic")
    run = train(net, Dataset(X, Y, mirror=False), None, alpha=1.0,
                **_records(cfg, cfg.quad_steps, cfg.quad_lr))
    lam = np.array([np.sum(r[which == h] ** 4) / r.size for h in range(H)])  # p_h <r⁴>_h
    times = np.array([quadratic_unit_time_to(0.5, lam[h] * QUAD_TARGET, QUAD_TARGET, a0[h])  # §11.5
                      for h in range(H)])
    drops = 0.5 * lam * QUAD_TARGET**2
    levels = np.concatenate([np.cumsum(drops[::-1])[::-1], [0.0]])
    mt = cfg.quad_lr * np.arange(cfg.quad_steps + 1)
    u = _quadratic_map(cfg.quad_steps, cfg.quad_lr, lam, QUAD_TARGET, a0)
    t_map = np.array([th.crossing_time(mt, -u[:, h], -0.5 * QUAD_TARGET) for h in range(H)])
    return Panel(np.asarray(run.t), np.asarray(run.loss), np.asarray(run.units["count"]),
                 np.asarray(run.units["magnitudes"])[:, :H], np.full(H, 0.5 * QUAD_TARGET), levels, times,
                 np.abs(t_map - times) + cfg.quad_lr, mt, 0.5 * lam * (QUAD_TARGET - u) ** 2, drops,
                 np.zeros(H + 1), H, "init")


# ----------------------------------------------------------------- separate attention (PCR)


def _attention(cfg: Config, key, progress) -> Panel:
    lam = np.asarray(cfg.eigs, float)
    D, N, S = lam.size, cfg.n_ctx, cfg.n_seq
    cov = np.diag(lam)
    data = in_context_regression(key, S, N, D, cov)
    progress("separate attention")
    init = aligned_heads(cfg.att_scale, D, N)
    run = train((init,), data, None, keep_params=True, **_records(cfg, cfg.att_steps, cfg.att_lr))
    _, _, s, a = th.components(cov, N)
    levels = th.plateau_losses(cov, N)
    steps, lr = cfg.att_steps, cfg.att_lr
    horizon = 3 * steps

    def drop_times(s_, a_):
        """Per variant (rows), per component: the time its scalar map reaches half its PCR
        coefficient s/(2a)."""
        s_, a_ = np.broadcast_arrays(np.atleast_2d(s_), np.atleast_2d(a_))
        u = th.separate_gd(horizon, s_.reshape(-1), a_.reshape(-1), cfg.att_scale, lr)
        u = u.reshape(horizon + 1, *s_.shape)
        tt = lr * np.arange(horizon + 1)
        return np.array([[th.crossing_time(tt, -u[:, p, i], -0.5 * s_[p, i] / a_[p, i]) for i in range(D)]
                         for p in range(s_.shape[0])])

    Z, y = np.asarray(cubic_features(data.X, N))[:S], np.asarray(data.Y)[:S, 0]
    F = Z[:, [i * D + i for i in range(D)]]
    se_s, se_a = np.std(F * y[:, None], axis=0) / np.sqrt(S), np.std(F * F, axis=0) / np.sqrt(S)
    one = np.eye(D)
    t_all = drop_times(np.concatenate([s[None], s + SE * se_s * one, s + 0 * one]),
                       np.concatenate([a[None], a + 0 * one, a + SE * se_a * one]))
    times, dt = t_all[0], np.sqrt(np.sum((t_all[1:] - t_all[0]) ** 2, axis=0))
    u_sim = np.einsum("tkk->tk", in_context_maps(run.path[0]))  # B_ii: Λ is diagonal
    mt = lr * np.arange(steps + 1)
    u = th.separate_gd(steps, s, a, cfg.att_scale, lr)
    # a level's sample error: 3 standard errors of the loss at PCR_k plus the in-sample optimism
    # L_k P/S of fitting P = k(2D + 1) head parameters on S sequences
    extra = []
    for k in range(D + 1):
        res = y - Z @ th.pcr_map(cov, N, k).reshape(-1)
        extra.append(SE * np.std(0.5 * res**2) / np.sqrt(S) + levels[k] * k * (2 * D + 1) / S)
    # component i's remaining loss ½ a_i (s_i/a_i − u_i)², its drop ½ s_i²/a_i (theory/attention.py)
    progress("separate attention: time to leave (analyse)")
    leave = attention_leave(run.t, run.loss, run.path[0], np.asarray(data.X, float),
                            np.asarray(data.Y, float), init, levels, lr)
    return Panel(np.asarray(run.t), np.asarray(run.loss), np.asarray(run.units["count"]), u_sim, 0.5 * s / a,
                 levels, times, dt, mt, 0.5 * a * (s / a - u) ** 2, 0.5 * s**2 / a, np.asarray(extra), D,
                 "data", leave)


# ----------------------------------------------------------------- the checks of one panel


def _evaluate(p: Panel) -> dict:
    """Measured against predicted. Levels: each predicted level's nearest plateau
    (:func:`~biasfree.theory.staircase.find_plateaus`), within how far the exact GD map is from that
    saddle at the plateau's two records (learned units' remaining loss + unlearned units' gain, from
    ``unit_map``, not from the prediction) + 2δ round-off + the panel's sample term. Times: each
    unit's measured strength crossing half (linear between records) within ``time_extra`` + the
    bracketing record interval. Units: the count at init, at each drop and at the end."""
    t, L, K = p.t, p.loss, len(p.times)
    stair = find_plateaus(t, L, noise=0)  # the exact GD map's curve: δ is its round-off
    lv = np.array([q.level for q in stair.plateaus])
    step_of = np.minimum(np.rint(t / (p.map_t[1] - p.map_t[0])).astype(int), p.map_t.size - 1)
    meas_lvl, lvl_tol = np.full(K + 1, np.nan), np.full(K + 1, np.nan)
    mid = np.sqrt(t[1:-1] * t[2:])
    for k in range(K + 1):
        if lv.size == 0:
            break
        q = stair.plateaus[int(np.argmin(np.abs(lv - p.levels[k])))]
        j = int(np.argmin(np.abs(mid - q.t_level))) + 1  # the flattest interval: records j, j + 1
        rows = p.unit_map[step_of[[j, j + 1]]]
        dist = np.max(np.sum(rows[:, :k], axis=1) + np.sum(p.drops[k:] - rows[:, k:], axis=1))
        meas_lvl[k] = q.level
        lvl_tol[k] = dist + 2 * stair.noise + p.level_extra[k]
    meas_t, t_tol, units_at = np.full(K, np.nan), np.full(K, np.nan), np.zeros(K, int)
    for i in range(K):
        tm, width = _crossing(t, -p.strength[:, i], -p.half[i])
        meas_t[i] = tm
        t_tol[i] = p.time_extra[i] + (width if np.isfinite(width) else 0.0)
        units_at[i] = p.units[min(np.searchsorted(t, tm), t.size - 1)] if np.isfinite(tm) else -1
    return dict(levels_measured=meas_lvl, level_tol=lvl_tol, times_measured=meas_t, time_tol=t_tol,
                units_at_drops=units_at, units_final=int(p.units[-1]), units_start=int(p.units[0]),
                n_plateaus=len(stair.plateaus))


def _embeddings(narrow_lin, X_lin, Y_lin, narrow_relu, X_relu, Y_relu) -> tuple[dict, dict]:
    """Theorem 1 at the plateaus' saddles: the width-1 nets embedded into width 2 (linear: zero unit
    and split; ReLU: split), and a wrong split (its output weights summing to 1.01 of the unit's)."""
    out, checks = {}, {}
    cases = (("linear_zero", narrow_lin, X_lin, Y_lin, 1.0, "zero"),
             ("linear_split", narrow_lin, X_lin, Y_lin, 1.0, "split"),
             ("relu_split", narrow_relu, X_relu, Y_relu, 0.0, "split"))
    for name, net, X, Y, alpha, how in cases:
        e = embed(net, X, Y, alpha, how)
        out[f"embed_{name}_function_gap"], out[f"embed_{name}_function_tol"] = e.function_gap, e.function_tol
        out[f"embed_{name}_grad"], out[f"embed_{name}_grad_tol"] = e.wide.grad, e.wide.grad_tol
        out[f"embed_{name}_lambda_min"] = e.wide.lambda_min
        checks[f"embed_{name}_function"] = at_most(
            e.function_gap, e.function_tol, f"The {how} embedding of the {name.split('_')[0]} net's "
            "width-1 fixed point computes the same function (Theorem 1).", unit="max_n ‖Δf(x_n)‖")
        checks[f"embed_{name}_gradient"] = at_most(
            e.wide.grad, e.wide.grad_tol,
            f"The {how} embedding is a fixed point: zero gradient to round-off.",
            unit="‖∇L‖‖θ‖/(½<‖y‖²>)")
    W1, W2 = (np.asarray(la.W, float) for la in narrow_relu)
    # the split's output weights summing to 0.5 + 0.51 = 1.01 of the unit's
    wrong = (Layer(np.vstack([W1, W1[:1]])), Layer(np.hstack([0.5 * W2, 0.51 * W2[:, :1]])))
    bad = check_embedding(narrow_relu, wrong, X_relu, Y_relu, 0.0, "wrong split")
    out["embed_wrong_grad"], out["embed_wrong_grad_tol"] = bad.wide.grad, bad.wide.grad_tol
    out["embed_wrong_function_gap"], out["embed_wrong_function_tol"] = bad.function_gap, bad.function_tol
    checks["embed_wrong_fails"] = at_least(
        min(bad.wide.grad / bad.wide.grad_tol, bad.function_gap / bad.function_tol), 1.0,
        "Control: a wrong split (output weights summing to 1.01 of the unit's) changes the function and "
        "is not a fixed point: both exceed their round-off bounds.",
        unit="smaller of gap/bound, gradient/bound")
    return out, checks


def run(cfg: Config, seed: int = 0, progress: Progress = quiet) -> Result:
    rng = np.random.default_rng(seed)
    lin, narrow_lin, X_lin, Y_lin = _linear_fc(cfg, rng, progress)
    relu, narrow_relu, X_relu, Y_relu = _relu_fc(cfg, rng, progress)
    att = _attention(cfg, jax.random.PRNGKey(seed), progress)
    panels = dict(zip(KEYS, (lin, relu, att, _linear_conv(cfg, rng, progress), _relu_conv(cfg, rng, progress),
                             _quadratic(cfg, rng, progress)), strict=True))
    progress("embedded fixed points")
    metrics, checks = _embeddings(narrow_lin, X_lin, Y_lin, narrow_relu, X_relu, Y_relu)
    arrays = {}
    for key, title in zip(KEYS, PANELS, strict=True):
        p, ev = panels[key], _evaluate(panels[key])
        K = len(p.times)
        arrays |= {f"{key}_t": p.t, f"{key}_loss": p.loss, f"{key}_units": p.units, f"{key}_levels": p.levels,
                   f"{key}_times": p.times, f"{key}_time_tol": ev["time_tol"],
                   f"{key}_times_measured": ev["times_measured"], f"{key}_level_tol": ev["level_tol"],
                   f"{key}_levels_measured": ev["levels_measured"]}
        for k in range(K + 1):
            gap = abs(ev["levels_measured"][k] - p.levels[k])
            metrics[f"{key}_level{k}_gap"], metrics[f"{key}_level{k}_tol"] = gap, ev["level_tol"][k]
            checks[f"{key}_level{k}"] = at_most(
                gap if np.isfinite(gap) else math.inf, ev["level_tol"][k],
                f"{title}: a plateau sits at the best {k}-unit loss {p.levels[k]:.4g}.", unit="loss")
        for i in range(K):
            gap = abs(ev["times_measured"][i] - p.times[i])
            metrics[f"{key}_drop{i + 1}_time"] = ev["times_measured"][i]
            metrics[f"{key}_drop{i + 1}_predicted"] = p.times[i]
            metrics[f"{key}_drop{i + 1}_tol"] = ev["time_tol"][i]
            checks[f"{key}_drop{i + 1}_time"] = at_most(
                gap if np.isfinite(gap) else math.inf, ev["time_tol"][i],
                f"{title}: unit {i + 1} is half learned at its predicted time {p.times[i]:.4g}.",
                unit="time ηk")
        if p.leave is not None:
            more = leave_checks(key, title, p.leave)
            arrays, metrics, checks = arrays | more[0], metrics | more[1], checks | more[2]
        metrics[f"{key}_units_final"] = ev["units_final"]
        metrics[f"{key}_plateaus_found"] = ev["n_plateaus"]
        short = int(np.sum(ev["units_at_drops"] < np.arange(1, K + 1)))
        checks[f"{key}_units"] = at_most(
            short + abs(ev["units_final"] - p.expected_units) + ev["units_start"], 0,
            f"{title}: effective units 0 at init, at least i at drop i, {p.expected_units} at the end.",
            unit="count mismatches")
    notes = ("Aligned balanced inits make each unit's scalar GD map exact; times are the "
             "gradient-flow closed forms (separate attention: the population scalar maps), their "
             "tolerance the map's finite-η gap plus the bracketing record interval (attention: plus 3 "
             "standard errors of the sample). The effective units count a unit once it leaves the "
             "init-noise ball, usually before its drop shows in the loss: the count leads the staircase.")
    return Result("saddle-to-saddle", seed, {}, metrics, checks, arrays, notes)
