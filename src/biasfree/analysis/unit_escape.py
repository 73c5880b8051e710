"""The one-sided rate at which a new unit leaves a two-layer (leaky) ReLU net of units (dense hidden
units or conv kernels, docs/theory.md §11.4.4, §11.7.6). A zero unit sits on the kink, where the
Hessian is not defined. Along a direction ŵ, a small unit ``(b ŵ, c ĝ)`` obeys ``ḃ = ‖g(ŵ)‖c``,
``ċ = ‖g(ŵ)‖b`` with ``g(ŵ) = −∂L/∂v = ⟨r σ(ŵ·x)⟩`` (Euler: σ'(z)z = σ(z)), so it grows at rate
``λ* = max_ŵ ‖g(ŵ)‖`` (α = 1: σ₁(G) = ``|λ_min|``). λ* is found by the ascent
``ŵ ← ∇_ŵ(ĝ·g(ŵ))/‖·‖`` (power iteration when α = 1) from several starts, all in one compiled
program: a lower bound on the max.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..core.nets import forward_unchecked

ASCENT_STEPS = 200
"""Steps of the escape-direction ascent from each start."""
STARTS = 8
"""Random starts of the ascent (besides the learned units' directions, ±)."""


def _new_unit_loss(w, v, R, X, rebuild, alpha):
    """The loss with a new unit (w, v) added to a net of residuals R = f − Y (units add)."""
    return 0.5 * jnp.sum((R + forward_unchecked(rebuild(w[None], v[None]), X, alpha)) ** 2) / X.shape[0]


@partial(jax.jit, static_argnames=("rebuild", "alpha", "b"))
def _pull(w, R, X, rebuild, alpha, b):
    """g(w) = −∂L/∂v of a new unit (w, 0), v of ``b`` outgoing weights."""
    return -jax.grad(_new_unit_loss, argnums=1)(w, jnp.zeros(b), R, X, rebuild, alpha)


@partial(jax.jit, static_argnames=("rebuild", "alpha", "steps", "b"))
def _ascend(W0, R, X, *, rebuild, alpha, steps, b):
    """The ascent ``ŵ ← ∇_ŵ(ĝ·g(ŵ))/‖·‖`` from each row of W0, ``steps`` times (module doc), at a
    net of residuals R = f − Y held, new units of ``b`` outputs; of the ends, the first with the largest
    ‖g(ŵ)‖: ``(λ*, ŵ*, ĝ, m)``, m = ``ĝᵀ(∂²L/∂v²)ĝ`` of the new unit (ŵ*, 0)."""

    def step(_, w):
        gw = _pull(w, R, X, rebuild, alpha, b)
        gh = gw / jnp.maximum(jnp.linalg.norm(gw), 1e-300)
        w2 = jax.grad(lambda u: gh @ _pull(u, R, X, rebuild, alpha, b))(w)
        return w2 / jnp.maximum(jnp.linalg.norm(w2), 1e-300)

    def ascend(w):
        w = jax.lax.fori_loop(0, steps, step, w)
        return w, jnp.linalg.norm(_pull(w, R, X, rebuild, alpha, b))
    ends, rates = jax.vmap(ascend)(W0)
    i = jnp.argmax(rates)  # the first of the largest, in the starts' order
    w = ends[i]
    gw = _pull(w, R, X, rebuild, alpha, b)
    gh = gw / jnp.maximum(jnp.linalg.norm(gw), 1e-300)
    hv = jax.jvp(lambda v: jax.grad(_new_unit_loss, argnums=1)(w, v, R, X, rebuild, alpha),
                 (jnp.zeros(b),), (gh,))[1]
    return rates[i], w, gh, gh @ hv


def ascent_rate(rebuild, U, R, X, alpha, b: int, seed: int = 0):
    """λ* = max_ŵ ‖g(ŵ)‖, g(ŵ) = −∂L/∂v of a new unit (ŵ, 0) of ``b`` outputs beside a net of units
    U (n, a) with residuals R = f − Y (module doc), by ascent; ``rebuild`` a
    :class:`~biasfree.analysis.unit_stage.Rebuild` (its units add: the new unit's term adds to R).
    ``(λ*, ŵ*, ĝ, m)``; m = ĝᵀ ∂²L/∂v² ĝ, how fast the new unit's own output closes its residual
    (dense: ⟨σ(ŵ*·x)²⟩)."""
    rng = np.random.default_rng(seed)
    starts = list(rng.standard_normal((STARTS, U.shape[1])))
    starts += [s * u for u in U if np.linalg.norm(u) > 0 for s in (1, -1)]
    W0 = np.stack([w / np.linalg.norm(w) for w in starts])
    rate, w, gh, m = _ascend(*(jnp.asarray(A) for A in (W0, R, X)), rebuild=rebuild, alpha=alpha,
                             steps=ASCENT_STEPS, b=b)
    return float(rate), np.asarray(w), np.asarray(gh), float(m)
