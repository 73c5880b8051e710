"""The step of a default measurement (docs/theory.md §6.3) from the measured sharpness.

GD on a loss L is stable while η λ_max(∇²L) < 2. The bound of
:func:`~biasfree.analysis.regime.default_lr`, λ_max(Σ_xx) Σ_l Π_{j≠l} ‖W_j‖₂² at the larger of
the init and the balanced solution, multiplies the data's strongest direction by the weights'
largest norm, which lie in different directions on raw pixels (‖B‖₂ = 155 comes from input
directions of variance 1e-6 that GD does not reach in any budget). On the 784→256→10 bench net
(benchmarks/bench_analyse.py, row "alone") it is 3.6e5 where the Hessian's λ_max is 114: its step
1.4e-6 made the horizon 20 million steps (cut to 200,000); the measured step, 5.4e-3, makes it
5,024.

Here the sharpness is measured: ``λ̂ = max(λ_max(∇²L(θ)), k_t λ_max(∇²L̃(θ̃)))`` for the net and
its twin (whose step is η k_t, §2.4), each by Lanczos (:data:`LANCZOS_TOL`) on the
Hessian–vector product ``v ↦ ∇²L v`` (forward over reverse differentiation, one jitted program)
on :data:`SAMPLE_ROWS` rows (whole mirror pairs where the inputs are ``[X₊; −X₊]``). The step is
:data:`STEP_FRACTION` of the stability limit, ``η = STEP_FRACTION · 2/λ̂``. The sharpness grows
as the weights grow, so it is measured again at the run's end: past half the limit the run is
made again at the end's step (:func:`settle`), and :func:`certify` puts ``η λ̂_end`` in the
evidence: a run past ``η λ̂_end = 2`` was not a stable GD run, and its answer says so instead
of reading the gap. Inputs that are 0 everywhere (a zero border of pixels) are left out of the
run and of the sharpness (:func:`reduced`): exactly the same run, at a fraction of the cost.
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..core.data import Dataset, unchecked_dataset
from ..core.layers import Layer
from ..core.twin import TwinScales, twin_weights, unchecked_slope_factor
from ..dynamics import run as engine
from ..dynamics.train_config import GDConfig
from . import regime as rg
from .hessian_eig import extreme_eigenvalue
from .verdict import UNDECIDED, Judgement, evidence, judgement

LANCZOS_TOL = 5e-2
"""Relative tolerance of the Lanczos estimate of λ_max (a Ritz value, at most λ_max): 5%, far
inside the factor 4 that :data:`STEP_FRACTION` keeps in reserve; :func:`certify` re-measures at
the end. On the 784→256→10 bench net it takes 7 Hessian–vector products and reads 90.2 where
the converged value is 93.5."""
LANCZOS_VECTORS = 6
"""Lanczos vectors kept (ARPACK's ``ncv``; its default 20 takes 20 products before the first
test)."""
DENSE_BELOW = 64
"""Nets with at most this many weights get their whole Hessian (that many products) instead."""
SAMPLE_ROWS = 2048
"""Rows the sharpness is measured on (:func:`sample`): the Hessian of the loss on a sample is
an unbiased estimate of the full one, and λ_max is convex, so the sample's λ_max is at least the
full data's on average; one sample can read lower (93.5 and 129.6 on two samples of the bench's
10,000 rows, whose full λ_max is 113.8), which the factor 4 of :data:`STEP_FRACTION` absorbs.
2,048 rows cost a fifth of a gradient at 10,000."""
STEP_FRACTION = 0.25
"""The step as a fraction of the stability limit 2/λ̂: a quarter, as ``default_lr``'s (§6.3),
which leaves room for the sharpness to grow fourfold before GD is unstable. Not more: net and
twin take the same GD steps, but the answer stands for training in time t = ηk (the horizon is the
flow's), and the measured gap moves with η at first order. On the bench's "alone" net
(``benchmarks/alone_step.py --fractions``) the gap's maximum, reached at t ≈ 0.015 in the init's
fast transient, is 0.2136%, 0.2163%, 0.2216%, 0.2348% and 0.2375% of L_ref at 1/64, 1/32, 1/16,
1/8 and 1/4 of the limit: first order in η only below 1/16 (there the differences halve), toward
the flow's 0.2108%, which an adaptive Runge–Kutta–Chebyshev integration of the flow gives at
rtol 1e-4 and 1e-6 alike (session 11). So a quarter of the limit adds 0.027% of L_ref (13% of the
gap) here, not the 0.003% a Richardson step from 1/8 and 1/4 had suggested; the answer names GD
and its step, the run whose gap it is. At half the limit the maximum is 0.2904%, and both losses
end 39% above the finer runs' (25.2 against 18.15 at t = 0.6: GD no longer follows the flow), and
at three quarters GD diverges at step 16, the sharpness having grown past 1.3 λ̂ on the way."""


@partial(jax.jit, static_argnames=("mirrored",))
def _hvp(params, X, Y, alpha, v, mirrored: bool):
    """``∇²L(θ) v`` (forward over reverse)."""
    loss = engine.loss_fn(mirrored)
    return jax.jvp(jax.grad(lambda p: loss(p, X, Y, alpha, "mse")), (params,), (v,))[1]


def sample(data: Dataset, rows: int = SAMPLE_ROWS, seed: int = 0) -> Dataset:
    """At most ``rows`` rows of ``data`` drawn without replacement (whole mirror pairs for
    inputs ``[X₊; −X₊]``, which stay mirrored), or ``data`` itself when it has no more."""
    X, Y = engine.arrays(data)[:2]
    X, Y = np.asarray(X), np.asarray(Y)
    n = X.shape[0]  # X₊'s rows when mirrored
    half = rows // 2 if data.mirrored else rows
    if n <= half:
        return data
    i = np.sort(np.random.default_rng(seed).choice(n, half, replace=False))
    if data.mirrored:
        return unchecked_dataset(np.concatenate([X[i], -X[i]]), np.concatenate([Y[i], Y[n + i]]))
    return unchecked_dataset(X[i], Y[i])


def sharpness(params, data: Dataset, alpha: float, tol: float = LANCZOS_TOL) -> float:
    """λ_max(∇²L(θ)) of the MSE of ``params`` (slope ``alpha``) on ``data``: the largest
    eigenvalue of the Hessian–vector product by Lanczos (``scipy.sparse.linalg.eigsh``, relative
    tolerance ``tol``, from a fixed random start; module doc), the whole Hessian up to
    :data:`DENSE_BELOW` weights (:func:`~biasfree.analysis.hessian_eig.extreme_eigenvalue`)."""
    leaves, tree = jax.tree_util.tree_flatten(params)
    shapes = [np.shape(a) for a in leaves]
    cuts = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    X, Y = engine.arrays(data)[:2]
    a, mirrored = float(alpha), bool(data.mirrored)
    dtype = jnp.asarray(leaves[0]).dtype

    def matvec(v):
        parts = [jnp.asarray(c.reshape(s), dtype=dtype) for c, s in zip(np.split(np.ravel(v), cuts), shapes,
                                                                          strict=True)]
        h = _hvp(params, X, Y, a, jax.tree_util.tree_unflatten(tree, parts), mirrored)
        return np.concatenate([np.ravel(np.asarray(x, dtype=float)) for x in jax.tree_util.tree_leaves(h)])

    n = int(sum(np.prod(s) for s in shapes))
    v0 = np.random.default_rng(0).normal(size=n)  # a fixed start: the same λ̂ at every call
    return extreme_eigenvalue(matvec, n, "LA", dense_up_to=DENSE_BELOW, tol=tol, v0=v0, ncv=LANCZOS_VECTORS)


MIN_STEPS = 1000
"""Steps the horizon takes at least: the step's stability is not GD's accuracy. From a small init
the sharpness is the saddle's, and a quarter of its limit escapes the saddle at 1 + ησ = 1.5 a step
where the flow grows e^{ησ} = 1.65: a conv net (tests/analysis/test_truth.py) crossed its horizon
in 9 steps, its gap 0.17% of L_ref where GD at lr 0.5, 300 steps, measures 3.5%."""
RERUN_ABOVE = 1.0
"""η λ̂ at the run's end above which :func:`settle` runs again at a smaller step: the sharpness
more than doubled from the quarter of the limit the step was set at (small inits do: from the
saddle to the solution it grows about fourfold)."""
RERUNS = 2
"""Reruns :func:`settle` makes at most."""


def pair_sharpness(params, twin, X, Y, alpha: float) -> float:
    """``λ̂ = max(λ_max(∇²L(θ)), k_t λ_max(∇²L̃(θ̃)))`` on :func:`sample`'s rows of ``(X, Y)``:
    the sharpness that limits the net's step and its twin's (the twin ``twin``, slope 1, steps
    η k_t, k_t the time scale of §2.4 for the net's slope ``alpha`` and depth)."""
    keep = reduced(params, X)  # the Hessian is 0 on the columns that see no input: the same λ_max
    if keep is not None:
        params, twin, X = narrow(params, keep), narrow(twin, keep), np.asarray(X)[:, keep]
    data = sample(unchecked_dataset(X, Y))
    ks = TwinScales.unchecked(alpha, len(params)).time
    # at slope 1 a bias-free dense twin of σ_α layers is linear (a z² layer is not)
    linear = all(isinstance(la, Layer) and la.b is None and la.activation == "leaky" for la in twin)
    twin_data = moment_rows(data) if linear else data
    return max(sharpness(params, data, alpha), ks * sharpness(twin, twin_data, 1.0))


def moment_rows(data: Dataset) -> Dataset:
    """Data with the same Σ_xx = XᵀX/R and Σ_yx = YᵀX/R as ``data``'s R rows, in d rows (d its
    input columns; ``data`` itself where R ≤ d): ``X̃ = √(d/R) R_X``, ``Ỹ = √(d/R) QᵀY`` from
    ``X = Q R_X`` (QR). A bias-free linear net's loss ½<||y − Mx||²> = ½ tr(M Σ_xx Mᵀ) − tr(M Σ_xy)
    + ½<||y||²> reads the data through those two moments only, and its Hessian does not see the
    last term, so λ_max(∇²L̃) on these rows is ``data``'s, for d/R of each product's cost (the
    twin's sharpness: 400 rows for 2,048 on bench_analyse large)."""
    X, Y = np.asarray(data.X, float), np.asarray(data.Y, float)
    R, d = X.shape
    if R <= d:
        return data
    Q, RX = np.linalg.qr(X)
    s = np.sqrt(d / R)
    return unchecked_dataset(s * RX, s * (Q.T @ Y), mirror=False)


def schedule(params, X, Y, alpha: float, modes, a0: float, max_steps: int | None = None
             ) -> tuple[float, int, int]:
    """``analyse``'s default GD schedule ``(η, steps, needed)``: η a quarter of the stability
    limit of :func:`pair_sharpness` at ``params``, or T/:data:`MIN_STEPS` where less, and
    ``needed = ⌈T/η⌉`` steps to the horizon T, run for ``steps = min(needed, max_steps)``
    (None: ``needed``). At two layers the origin is a saddle of curvature ±c s (the modes'
    strengths), within a few times the solution's, and :func:`settle` reruns where it grew past
    half the limit. Deeper, the Hessian vanishes at the origin (its cross terms are of order
    ‖θ‖^(L−2)), so an init whose gain ``a0`` is below the strongest mode's strength, its weights
    still to grow, also takes at most :func:`~biasfree.analysis.regime.default_lr`'s quarter of
    the limit of the curvature bound at the balanced solution (docs/theory.md §6.3): measured at
    such an init alone, a step of 56.8 diverged at step 300 (verdict-calibration, tiny, seed 2,
    its depth-3 nets of std 1e-4). The one
    rule for ``analyse(train=True)``, the default measurement, the predicted growth term
    (:mod:`~biasfree.analysis.predicted`) and ``verdict-calibration``'s truth runs."""
    L = len(params)
    ks = TwinScales.unchecked(alpha, L).time  # α and the net checked by analyse
    T, _ = rg.default_t_max(modes, a0, ks, depth=L)
    lr = min(step(pair_sharpness(params, twin_weights(params, alpha, L), X, Y, alpha)), T / MIN_STEPS)
    if L > 2 and modes.s.size and a0 < modes.s[0]:  # deep, its weights still to grow: the Hessian
        lr = min(lr, rg.default_lr(params, modes, unchecked_slope_factor(alpha)))  # ≈ 0 at the saddle
    need = int(max(1, np.ceil(T / lr)))
    return lr, need if max_steps is None else min(need, max_steps), need


def step(lam: float) -> float:
    """η = :data:`STEP_FRACTION` · 2/λ̂ (λ̂ > 0; a flat loss, λ̂ ≤ 0, has no limit: η = 1)."""
    return float(STEP_FRACTION * 2.0 / lam) if lam > 0 else 1.0


def settle(go, cfg: GDConfig, budget: float | None, spent: float = 0.0):
    """Run GD at the measured step, ``go(cfg, budget, spent) -> (training, regime, λ̂_end)``, and
    where the sharpness grew so that the end is past half the stability limit (η λ̂_end >
    :data:`RERUN_ABOVE`: GD strays from the flow it stands for, or leaves stability), run again
    from the start at :func:`step` of λ̂_end to the same horizon, at most :data:`RERUNS` times,
    while a quarter of ``budget`` is left; ``(training, regime, λ̂_end, the config run last)``."""
    t0 = time.perf_counter()
    tr, reg, lam = go(cfg, budget, spent)
    for _ in range(RERUNS):
        left = None if budget is None else budget - (time.perf_counter() - t0)
        if cfg.lr * lam <= RERUN_ABOVE or (left is not None and left < 0.25 * budget):
            break
        lr = step(lam)
        cfg = replace(cfg, lr=lr, steps=int(np.ceil(cfg.steps * cfg.lr / lr)))
        tr, reg, lam = go(cfg, left)
    return tr, reg, lam, cfg


def budget_left(budget: float | None, spent: float) -> float | None:
    """The training loop's share of a default measurement's ``budget``: what is left after the
    ``spent`` seconds of measuring the sharpness, twice (the run's end measures it again), and at
    least a quarter of the budget, so that the loop still runs where the sharpness took it all
    (the answer states the loop's seconds; None: no limit)."""
    return None if budget is None else max(budget - 2.0 * spent, 0.25 * budget)


def certify(answer: Judgement, cfg: GDConfig, lam_end: float, steps_run: int) -> Judgement:
    """``answer`` of a run of GD at the measured step (:func:`schedule`), with the step's
    stability at the run's end in its evidence, ``η λ̂_end ≤ 2``, λ̂_end the sharpness at the last
    weights. Where that fails the run was not stable GD, so neither its gap nor its end bound is
    evidence: the answer is :data:`~biasfree.analysis.verdict.UNDECIDED`, naming the step that
    would be (a quarter of the limit at λ̂_end) and the call that measures with it."""
    lr = cfg.lr
    check = evidence("step × sharpness at the run's end, η λ_max(∇²L)", lr * lam_end, 2.0,
                     f"GD stays stable (η λ ≤ 2), so the run is GD's; the step η = {lr:.3g} is at most a "
                     f"quarter of the limit at the sharpness measured (Lanczos on the Hessian, §6.3); at the "
                     f"end λ̂ = {lam_end:.4g}")
    ev = answer.evidence + (check,)
    if check.passed or answer.level == UNDECIDED:
        return replace(answer, evidence=ev)
    safe = step(lam_end)
    return judgement(answer.kind, UNDECIDED, [
        f"the step η = {lr:.3g} was past GD's stability limit at the run's end (η λ̂ = "
        f"{lr * lam_end:.3g} > 2, λ̂ = {lam_end:.4g} after {steps_run} steps), "
        "so the run is no evidence; "
        f"measure with a quarter of that limit: analyse(model, data, train=GDConfig(lr={safe:.3g}, "
        f"steps={cfg.steps}))"], ev, answer.notes)


def reduced(params, X) -> np.ndarray | None:
    """The input columns a dense bias-free first layer sees move, or None where dropping none
    would gain: with every input's coordinate j at 0 (a zero border of pixels), ∂L/∂W₁[:, j] =
    <δ x_j> = 0, so plain GD never moves that column and f never reads it; running on
    ``X[:, keep]`` and ``W₁[:, keep]`` is the same run exactly, its first-layer products
    ``len(keep)/d`` of the cost (784 → 400 pixels here)."""
    first = params[0]
    if not isinstance(first, Layer) or first.b is not None:
        return None
    keep = np.flatnonzero(np.any(np.asarray(X) != 0, axis=0))
    return keep if 0 < keep.size < np.shape(X)[1] else None


def narrow(params, keep: np.ndarray):
    """``params`` with the first layer's columns ``keep`` only (:func:`reduced`)."""
    first = params[0]
    return (replace(first, W=np.asarray(first.W)[:, keep]),) + tuple(params[1:])


def widen(start, end, keep: np.ndarray):
    """The weights of a run on :func:`narrow`'s columns put back: ``end``'s first-layer columns at
    ``keep``, ``start``'s (which that run never moves) elsewhere."""
    W = np.array(start[0].W, dtype=float)
    W[:, keep] = np.asarray(end[0].W, dtype=float)
    return (replace(end[0], W=W),) + tuple(end[1:])
