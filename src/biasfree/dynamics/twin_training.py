"""A net and its linear twin trained side by side by GD, the gap measured at every step.

Both run the same number K of full-batch GD steps (docs/theory.md §0, §2.4):
``θ_{k+1} = θ_k − η ∇J(θ_k)`` for the net (slope α) and
``θ̃_{k+1} = θ̃_k − η k_t ∇J̃(θ̃_k)`` for its twin (α = 1, weights × the twin scale,
step × k_t, weight decay λ/k_t, §2.7), so twin step k sits at the net's time t = ηk.
The gradient returns each loss for free, so the gap

    D = max_{k = 0..K} |L(θ_k) − L̃(θ̃_k)| / L(θ_0)

and the step where it occurs are carried through the compiled loop: D does not depend
on how often the curves are recorded (``n_records`` only sets the stored curves). The
run goes in ``n_records − 1`` compiled chunks; between chunks ``progress(k, K)`` is
called and the ``time_budget`` (seconds) is checked, so a run stops within one chunk
of its budget and says how many steps it ran.

Inputs whose rows are exactly ``[X₊; -X₊]`` (:func:`~biasfree.core.data.mirrored_half`) take
:func:`~biasfree.dynamics.losses.objective_mirrored`'s path, the same numbers to round-off.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core.data import mirrored_half
from ..core.layers import Params
from ..core.nets import _even_part, _forward
from ..core.precision import precise
from .losses import _loss_value
from .run import grad_fn


@dataclass(frozen=True)
class PairedRun:
    """``steps`` run (≤ asked), ``k`` (R,) record steps, ``loss``/``twin_loss``/``even_energy``
    (R,) at them; ``gap_max`` max over every step of |L − L̃| (loss units, not divided by
    L(0)) at step ``gap_step``; ``params``/``twin`` the final weights."""

    steps: int
    k: np.ndarray
    loss: np.ndarray
    twin_loss: np.ndarray
    even_energy: np.ndarray
    gap_max: float
    gap_step: int
    params: Params
    twin: Params


def _step(st, k, X, Y, alpha, lr, twin_lr, decay, twin_decay, loss, mirrored, last=None):
    """One GD step of net and twin from step k, the gap at step k kept if it is the largest;
    with ``last`` (a step count) the gap counts for k ≤ last and the weights move for k < last."""
    grad = grad_fn(mirrored)
    p, q, gmax, kmax = st
    gp, Lp = grad(p, X, Y, alpha, decay, loss)
    gq, Lq = grad(q, X, Y, 1.0, twin_decay, loss)
    gap = jnp.abs(Lp - Lq)
    worse = gap > gmax if last is None else (gap > gmax) & (k <= last)
    move = 1.0 if last is None else jnp.where(k < last, 1.0, 0.0)
    p = jax.tree_util.tree_map(lambda a, g: a - move * lr * g, p, gp)
    q = jax.tree_util.tree_map(lambda a, g: a - move * twin_lr * g, q, gq)
    return p, q, jnp.where(worse, gap, gmax), jnp.where(worse, k, kmax)


@partial(jax.jit, static_argnames=("loss", "mirrored"))
def _chunk(state, k0, n, X, Y, Xg, alpha, lr, twin_lr, decay, twin_decay, loss, mirrored):
    state = jax.lax.fori_loop(k0, k0 + n, lambda k, st: _step(st, k, Xg, Y, alpha, lr, twin_lr, decay,
                                                              twin_decay, loss, mirrored), state)
    p, q = state[:2]
    return state, _observe(p, q, X, Y, alpha, loss)


@partial(jax.jit, static_argnames=("loss",))
def _observe(p, q, X, Y, alpha, loss):
    """(L(θ), L̃(θ̃), <||f_even||²>) at one record."""
    return (_loss_value(_forward(p, X, alpha), Y, loss), _loss_value(_forward(q, X, 1.0), Y, loss),
            jnp.mean(jnp.sum(_even_part(p, X, alpha) ** 2, axis=1)))


@precise
def train_with_twin(params: Params, twin: Params, X, Y, *, alpha: float, lr: float, time_scale: float,
                    steps: int, n_records: int = 201, loss: str = "mse", weight_decay: float = 0.0,
                    time_budget: float | None = None,
                    progress: Callable[[int, int], None] | None = None) -> PairedRun:
    """Train ``params`` (slope ``alpha``, step ``lr``) and ``twin`` (α = 1, step
    ``lr · time_scale``, decay ``weight_decay / time_scale``) for ``steps`` GD steps on
    (``X``, ``Y``), recording ``n_records`` curve points (module doc)."""
    half = mirrored_half(X)
    X, Y = jnp.asarray(X), jnp.asarray(Y)
    Xg = X if half is None else jnp.asarray(half)
    bounds = np.unique(np.linspace(0, steps, max(2, min(n_records, steps + 1))).round().astype(int))
    state = (params, twin, jnp.asarray(-1.0), jnp.asarray(0))
    rec = [tuple(float(v) for v in _observe(params, twin, X, Y, float(alpha), loss))]
    args = (X, Y, Xg, float(alpha), float(lr), float(lr * time_scale), float(weight_decay),
            float(weight_decay / time_scale))
    start = time.monotonic()
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        state, obs = _chunk(state, int(a), int(b - a), *args, loss=loss, mirrored=half is not None)
        rec.append(tuple(float(v) for v in obs))
        if progress is not None:
            progress(int(b), steps)
        if time_budget is not None and time.monotonic() - start > time_budget:
            break
    p, q, gmax, kmax = state
    ks, (Lp, Lq, E) = [int(k) for k in bounds[:len(rec)]], map(np.asarray, zip(*rec, strict=True))
    if not (np.all(np.isfinite(Lp)) and np.all(np.isfinite(Lq))):
        bad = int(np.argmax(~(np.isfinite(Lp) & np.isfinite(Lq))))
        raise FloatingPointError(f"gradient descent diverged by step {ks[bad]} with lr={lr:g}: the step is "
                                 f"too large (GD is stable only for lr < 2/λ_max(Hessian)); "
                                 f"try lr={lr / 4:g}")
    # the loop measured steps 0..K-1 before each update; step K is the last record
    gap, step = max((float(gmax), int(kmax)), (float(abs(Lp[-1] - Lq[-1])), ks[-1]), key=lambda g: g[0])
    return PairedRun(ks[-1], np.asarray(ks), Lp, Lq, E, gap, step, p, q)


@partial(jax.jit, static_argnames=("mirrored",))
def _batched_chunk(state, k0, n, Xg, Y, last, lr, twin_lr, decay, twin_decay, alpha, mirrored):
    def one(st, Xg, Y, last, lr, twin_lr, decay, twin_decay):
        return jax.lax.fori_loop(k0, k0 + n, lambda k, s: _step(s, k, Xg, Y, alpha, lr, twin_lr, decay,
                                                                twin_decay, "mse", mirrored, last), st)
    return jax.vmap(one)(state, Xg, Y, last, lr, twin_lr, decay, twin_decay)


@precise
def gaps_batched(params: Params, twin: Params, X, Y, *, alpha: float, lr, time_scale: float, steps,
                 weight_decay: float = 0.0, chunk: int = 1000, compact: bool | None = None,
                 progress: Callable[[int, int], None] | None = None):
    """:func:`train_with_twin`'s gap for B pairs at once (MSE): ``params``/``twin`` with every
    array stacked on a leading axis B, ``X`` (B, N, d), ``Y`` (B, N, p), ``lr`` (B,) steps,
    ``steps`` (B,) step counts, ``weight_decay`` λ (one, or (B,); the twin's is λ/``time_scale``,
    §2.7). Member b measures the gap at steps
    0..steps[b] and stops moving at steps[b], so it runs the same GD as alone; the loop
    runs max(steps) + 1 steps in chunks of ``chunk`` (``progress(k, K)`` between them).
    ``compact`` (default: on a CPU backend) drops finished members between chunks, the
    batch kept at a power of two (few compiled sizes): on a CPU the cost is per member-step,
    on a GPU a batch costs about the same at any size. Returns ``(gap_max (B,), gap_step
    (B,), loss0 (B,))`` in loss units; gradients take the mirrored path when every member's
    inputs are ``[X₊; -X₊]``."""
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    decay = np.broadcast_to(np.asarray(validate.nonnegative(
        "weight_decay", weight_decay, why="λ is the coefficient of (λ/2)||θ||², one or one per member; "
        "pass 0 for none"), float), X.shape[:1])
    halves = [mirrored_half(x) for x in X]
    mirrored = all(h is not None for h in halves)
    Xg = np.stack(halves) if mirrored else X
    last, lr = np.asarray(steps, int), np.asarray(lr, float)
    K, B = int(np.max(last)), X.shape[0]
    compact = jax.default_backend() == "cpu" if compact is None else compact
    loss0 = jax.vmap(lambda p, x, y: _loss_value(_forward(p, x, alpha), y, "mse"))(params, X, Y)
    state = jax.tree_util.tree_map(np.array, (params, twin, np.full(B, -1.0), np.zeros(B, int)))  # copies
    for k0 in range(0, K + 1, chunk):
        live = np.nonzero(last >= k0)[0] if compact else np.arange(B)
        size = min(B, 1 << int(np.ceil(np.log2(live.size))))  # pad with finished members: they stay put
        idx = np.concatenate([live, np.setdiff1d(np.arange(B), live)[:size - live.size]])
        sub = _batched_chunk(jax.tree_util.tree_map(lambda a, i=idx: a[i], state), k0, min(chunk, K + 1 - k0),
                             Xg[idx], Y[idx], last[idx], lr[idx], lr[idx] * time_scale, decay[idx],
                             decay[idx] / time_scale, float(alpha), mirrored=mirrored)
        for full, part in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(sub), strict=True):
            full[idx] = np.asarray(part)
        if progress is not None:
            progress(min(k0 + chunk, K + 1), K + 1)
    gmax, kmax = state[2:]
    ok = np.isfinite(gmax)  # a NaN loss never beats the running maximum: look at the weights too
    for leaf in jax.tree_util.tree_leaves(state[:2]):
        ok &= np.all(np.isfinite(leaf.reshape(B, -1)), axis=1)
    if not np.all(ok):
        bad = np.nonzero(~ok)[0]
        raise FloatingPointError(f"gradient descent diverged for batch members {bad.tolist()} (lr "
                                 f"{lr[bad].tolist()}): the step is too large")
    return gmax, kmax, np.asarray(loss0)


def relative_movement(before: Params, after: Params) -> tuple[float, ...]:
    """Per layer ``‖A_l(T) − A_l(0)‖_F / ‖A_l(0)‖_F``, A_l the layer's matrix (∞ for a layer that
    started at 0)."""
    def one(a, b):
        A = np.asarray(a.matrix)
        n0 = float(np.linalg.norm(A))
        return float(np.linalg.norm(np.asarray(b.matrix) - A)) / n0 if n0 > 0 else float("inf")
    return tuple(one(a, b) for a, b in zip(before, after, strict=True))


def row_alignment(W1, directions) -> float:
    """Share of the first layer's energy in the span of ``directions`` (d, r),
    orthonormal columns: ``‖W₁ D‖_F² / ‖W₁‖_F²`` (r/d on average for random rows, 1 when
    every row lies in the span)."""
    W1 = np.asarray(W1, float)
    tot = float(np.sum(W1**2))
    return float(np.sum((W1 @ directions) ** 2) / tot) if tot > 0 else 0.0
