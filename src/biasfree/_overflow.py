"""The overflow check at the boundary: a net whose forward on the data overflows its dtype is
refused before any computation, naming the arrays to rescale (issue 48). A dense net whose
entries are provably bounded (``_dense_bound_finite``) needs no forward pass; any other is run
once, compiled per shape."""

from __future__ import annotations

import numpy as np

from ._validate import traced

FAR_FROM_ONE = 1e10
"""An overflowing forward's message names every array whose largest entry is at least this
(else the one with the largest entry): weights and inputs are of order 1 in any sane net."""
_PROGRAMS: dict = {}  # finite_forward's jitted ⟨||f||²⟩: one program a shape, not one an eager operation


def _dense_bound_finite(params, X) -> bool:
    """A dense net (each layer ``W`` (out, in), ``b`` or None, σ_α or, hidden, z²) whose outputs and
    ⟨||f||²⟩ provably stay finite: ``h_l = max_i Σ_j|W_ij| h_{l−1} + max|b|`` (squared after z²)
    bounds layer l's entries from h_0 = max|x|, and p·B² ≤ 1e-6 × the dtype's largest number. Else
    (any other layer, a larger bound) False: the caller runs the forward."""
    X = np.asarray(X)
    h = max(float(np.max(X, initial=0.0)), -float(np.min(X, initial=0.0)))  # max|x|, no |X| copy
    dtype = np.result_type(X.dtype, np.float32)
    for i, la in enumerate(params):
        W, b, act = getattr(la, "W", None), getattr(la, "b", None), getattr(la, "activation", None)
        if np.ndim(W) != 2 or act not in ("leaky", "quadratic") or np.ndim(b) not in (0, 1):
            return False
        dtype = np.result_type(dtype, np.asarray(W).dtype)
        h *= float(np.max(np.abs(np.asarray(W, float)).sum(1)))
        h += 0.0 if b is None else float(np.max(np.abs(np.asarray(b, float)), initial=0.0))
        h = h * h if act == "quadratic" and i < len(params) - 1 else h
    return bool(params) and np.isfinite(h) and np.shape(W)[0] * h * h <= np.finfo(dtype).max * 1e-6


def finite_forward(params, X, alpha, forward, *, name: str = "params", x_name: str = "data.X",
                   batched: bool = False) -> None:
    """Refuse a net (finite weights, checked) whose forward on the finite inputs ``X`` overflows:
    every output ``f(x)`` and the mean square ``⟨||f(x)||²⟩ = (1/N) Σ_n ||f(x_n)||²`` must be
    finite in the arrays' own precision (the squared loss and every second moment are built of
    it; at weights near 1e100 a 3-layer net's outputs reach 1e300 and their squares inf), else
    nothing computed from it is a number. ``alpha``: the slope α, or each member's (every α
    checked for every member); ``forward(params, X, α)`` the net's unchecked forward (the core's;
    this layer imports none); ``batched``: every weight has a leading member axis. The
    message names the array with the largest entry and the fix: rescale it. Traced values pass."""
    if traced(params, X) or (not batched and _dense_bound_finite(params, X)):
        return
    import jax
    import jax.numpy as jnp

    def mean_square(p, X, a):
        F = forward(p, X, a)
        return jnp.where(jnp.all(jnp.isfinite(F)), jnp.mean(jnp.sum(F * F, axis=-1)), jnp.inf)

    jitted = jax.jit(jax.vmap(mean_square, (0, None, None)) if batched else mean_square)
    program = _PROGRAMS.setdefault((forward, batched), jitted)  # the first one made, kept
    for a in np.unique(np.ravel(np.asarray(alpha, dtype=float))):
        m = program(params, X, a)
        if np.all(np.isfinite(np.asarray(m))):
            continue
        scales = {f"{name}[{i}]": max(float(np.max(np.abs(np.asarray(leaf))))
                                      for leaf in jax.tree_util.tree_leaves(layer))
                  for i, layer in enumerate(params)}
        scales[x_name] = float(np.max(np.abs(np.asarray(X))))
        big = [k for k in scales if scales[k] >= FAR_FROM_ONE] or [max(scales, key=scales.get)]
        dtype = jnp.result_type(*jax.tree_util.tree_leaves(params), X)
        raise ValueError(f"{name}: the forward on {x_name} overflows {dtype} (outputs or their squares are "
                         f"inf at α = {a:g}): {', '.join(big)} reach{'es' if len(big) == 1 else ''} "
                         f"{', '.join(f'{scales[k]:.3g}' for k in big)}; rescale "
                         f"{'it' if len(big) == 1 else 'them'} (weights of order 1/√fan_in, inputs of "
                         "order 1) before training or analysing")
