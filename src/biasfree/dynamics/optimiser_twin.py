"""The linear twin's optimiser: the map of docs/theory.md §9 from an optax optimiser
training a bias-free net to the one that trains its linear twin in lockstep.

A pair net θ on symmetric data and its twin θ' = a·θ (every layer scaled by
``a = c^{(L−1)/L}``, c = (1 + α)/2; ``a = √c`` for depth L = 2, which is
:func:`~biasfree.core.twin.linear_twin`) have gradients ``g' = ρ·g`` with ``ρ = 1/a`` (§9.1).
If the optimiser is homogeneous of degree κ under that rescaling,

    h_ρ(ρ g_1, …, ρ g_k; θ_k/ρ) = ρ^κ · h_1(g_1, …, g_k; θ_k),

then ``u' = a·u`` (θ'_k = a·θ_k at every step) for the twin optimiser

    twin = optax.chain(h_ρ, optax.scale(a^{1+κ}))      (L = 2: scale c^{(1+κ)/2}).

Here ``h_ρ`` is ``opt`` itself, or ``opt(ρ)`` when ``opt`` is a *factory*: a function of ρ
that builds the optimiser for gradients ×ρ and weights ×1/ρ, its constants rescaled as §9.2
says (ε ×ρ, eps_root ×ρ², a decoupled decay ×ρ^{1+κ}), e.g.
``lambda rho: optax.adamw(η, eps=1e-8 * rho, weight_decay=1e-4 * rho)``; a plain
GradientTransformation's constants are closed over, so only a factory makes such an
optimiser's twin exact. ``degree=None`` measures κ (:func:`measure_degree`; §9.2 "Measuring
κ") and refuses an update that is not ρ^κ-homogeneous within :data:`HOMOGENEITY_RTOL`.

:data:`NAMED` holds the optimisers by name as such factories (exact twins); :func:`with_degree`
sets a run's κ (measured, given, or read from unit-size gradients for a plain optimiser whose
constants break the homogeneity, the twin then approximate) and builds its twin's optimiser.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import jax
import numpy as np
import optax

from .. import _validate as validate
from ..core.inits import from_arrays
from ..core.twin import TwinScales, twin_scales
from .train_config import TrainConfig, optimiser_name

HOMOGENEITY_RTOL = 1e-9
"""Largest relative deviation ``max|u_ρ − ρ^κ u_1| / max|ρ^κ u_1|`` (per leaf) accepted as
round-off. An update's round-off is a few hundred ε at most (Muon's five Newton–Schulz
iterations: measured below 1e-13); an additive constant that breaks homogeneity gives
O(1) deviations where the probe's entries match its size (Adam's ε = 1e-8 unscaled: 0.4)."""

PROBE_STEPS = 3
PROBE_RHOS = (3.0, 1.0 / 7.0)
"""The gradient scales ρ at which :func:`measure_degree` checks ``u_ρ = ρ^κ u_1`` (besides the
twin's own ρ): one above 1 and one below, neither a power of the other."""
PROBE_SCALES = (1e-12, 1e-8, 1e-4, 1.0, 1e4)
"""Leaf-level magnitudes of the probe (times entries spread over 1e-6…1): a constant that
acts on a whole matrix (Muon's ε next to ‖M‖_F, a clipping threshold) shows at one of them."""


class NotHomogeneousError(ValueError):
    """:func:`measure_degree`'s refusal: no one κ fits within :data:`HOMOGENEITY_RTOL`.
    ``kappas`` holds the κ measured per (probe scale, ρ), from the norms of the updates
    (``log(‖u_ρ‖/‖u_1‖)/log ρ``), for a caller that accepts an approximate twin."""

    def __init__(self, message: str, kappas: dict):
        super().__init__(message)
        self.kappas = kappas


def twin_scale(alpha, depth: int = 2) -> float:
    """``a = c^{(L−1)/L}``: the twin's weights are ``a·θ`` (§4.1's odd-part twin; √c at L = 2)."""
    return twin_scales(validate.slope(alpha, "alpha"), depth).weight


def probe_rhos(alpha, depth: int = 2) -> tuple:
    """The ρ at which :func:`measure_degree` checks κ for the twin of a net of slope ``alpha``
    and depth L: :data:`PROBE_RHOS` and the twin's own ``ρ = 1/a`` (:func:`twin_scale`; none
    more when ρ = 1)."""
    return _probe_rhos(1.0 / twin_scale(alpha, depth))


def _probe_rhos(rho: float) -> tuple:
    """:data:`PROBE_RHOS` and the twin's own ρ (none more when ρ = 1)."""
    return PROBE_RHOS + ((rho,) if rho != 1.0 else ())


def _probe(rng, params, scale):
    """``PROBE_STEPS`` gradients and weights shaped like ``params``: ``scale`` times
    log-uniform magnitudes 1e-6…1, random signs."""
    def draw(shape):
        return scale * rng.choice([-1.0, 1.0], size=shape) * 10.0 ** rng.uniform(-6, 0, size=shape)

    return [tuple(jax.tree_util.tree_map(lambda x: draw(np.shape(x)), params) for _ in range(2))
            for _ in range(PROBE_STEPS)]


def _updates(opt, steps, rho):
    """The updates of ``opt`` from a fresh state on gradients ×ρ and weights ×1/ρ."""
    state = opt.init(jax.tree_util.tree_map(lambda t: t / rho, steps[0][1]))
    out = []
    for g, theta in steps:
        u, state = opt.update(jax.tree_util.tree_map(lambda x: rho * x, g), state,
                              jax.tree_util.tree_map(lambda t: t / rho, theta))
        out.append([np.asarray(x, dtype=float) for x in jax.tree_util.tree_leaves(u)])
    return out


def _compiled_by_rho(make: Callable, probe) -> Callable:
    """``rho -> GradientTransformation``: ``make(ρ)``'s ``init`` and ``update``, compiled. One
    program for every ρ, ρ an argument of the trace, when ``make`` builds its optimiser from a
    traced ρ (``lambda rho: optax.adam(η, eps=1e-8 * rho)`` does); for a factory that reads
    ρ's value (``float(rho)``, ``if rho > 1``), one program per ρ, ``make(ρ)`` built once."""
    try:
        jax.eval_shape(lambda r: make(r).init(probe), 1.0)
    except jax.errors.ConcretizationTypeError:  # the factory needs ρ's value

        @functools.cache
        def by_value(rho):
            opt = make(rho)
            return optax.GradientTransformation(jax.jit(opt.init), jax.jit(opt.update))
        return by_value
    init = jax.jit(lambda rho, p: make(rho).init(p))
    update = jax.jit(lambda rho, g, s, p: make(rho).update(g, s, p))
    return lambda rho: optax.GradientTransformation(lambda p: init(rho, p),
                                                    lambda g, s, p=None: update(rho, g, s, p))


def measure_degree(make: Callable, rhos, probe=None, name: str = "optimiser") -> float:
    """κ with ``make(ρ)`` fed (ρ g, θ/ρ) = ``ρ^κ ×`` ``make(1)`` fed (g, θ) (module doc),
    at every ρ in ``rhos`` and every probe scale; ``ValueError`` (naming ``name`` and the
    measured κ and deviations; :class:`NotHomogeneousError`, carrying κ per (scale, ρ)) when
    no one κ fits within :data:`HOMOGENEITY_RTOL`.
    ``probe`` a params tree of the shapes to test on. ``init`` and ``update`` are compiled
    (``_compiled_by_rho``) and reused across the probe scales (Muon's Newton–Schulz
    dispatched op by op would cost seconds)."""
    if probe is None:  # a two-layer bias-free net's shapes: Muon's matrices, Adam's leaves
        r = np.random.default_rng(0)
        probe = from_arrays([r.normal(size=(6, 3)), r.normal(size=(2, 6))])
    rng = np.random.default_rng(1)
    kappas, devs = {}, {}

    compiled = _compiled_by_rho(make, probe)

    with jax.enable_x64(True):
        for scale in PROBE_SCALES:
            steps = _probe(rng, probe, scale)
            base = _updates(compiled(1.0), steps, 1.0)
            flat = np.concatenate([x.ravel() for step in base for x in step])
            if not np.all(np.isfinite(flat)) or np.max(np.abs(flat)) == 0:
                what = "zero" if np.all(np.isfinite(flat)) else "non-finite"
                raise ValueError(f"optimiser_twin: {name} gives {what} updates on probe gradients of size "
                                 f"{scale:g}; pass degree=κ if you know it")
            for rho in rhos:
                got = _updates(compiled(rho), steps, rho)
                num = math.sqrt(sum(float(np.sum(x**2)) for step in got for x in step))
                k = math.log(num / float(np.sqrt(np.sum(flat**2)))) / math.log(rho)
                k = float(round(k)) if abs(k - round(k)) * abs(math.log(rho)) < HOMOGENEITY_RTOL else k
                kappas[scale, rho] = k
                devs[scale, rho] = max(
                    float(np.max(np.abs(x - rho**k * y)) / max(float(np.max(np.abs(rho**k * y))), 1e-300))
                    for sg, sb in zip(got, base, strict=True) for x, y in zip(sg, sb, strict=True))
    ks = np.array(list(kappas.values()))
    if max(devs.values()) > HOMOGENEITY_RTOL or np.ptp(ks) > HOMOGENEITY_RTOL:
        worst = sorted(devs, key=devs.get, reverse=True)[:3]
        ratios = "; ".join(f"gradients ~{s:g}, ρ={r:.4g}: u_ρ/u_1 ≈ ρ^{kappas[s, r]:.6g}, deviation "
                           f"{devs[s, r]:.2g}" for s, r in worst)
        raise NotHomogeneousError(
            f"optimiser_twin: {name} is not homogeneous in the gradients within round-off (tolerance "
            f"{HOMOGENEITY_RTOL:g}; measured κ from {ks.min():.6g} to {ks.max():.6g}; worst: {ratios}), so "
            "no rescaled copy of it trains the twin exactly. A constant such as Adam's ε or a decoupled "
            "weight decay breaks it: pass a factory lambda rho: optax.adam(lr, eps=1e-8 * rho) (ε ×ρ, "
            "eps_root ×ρ², decoupled decay ×ρ^(1+κ)), or pass degree=κ to accept an approximate twin",
            kappas)
    return float(np.mean(ks))


def optimiser_twin(opt, alpha, depth: int = 2, degree: float | None = None, *, probe=None):
    """The optimiser that trains the linear twin ``a·θ`` (``a`` = :func:`twin_scale`) in
    lockstep with ``opt`` training θ (module doc): ``optax.chain(h_ρ, optax.scale(a^{1+κ}))``
    with ``ρ = 1/a``; at depth 2, ``a = √c`` and the scale is ``c^{(1+κ)/2}`` (GD: step η·c;
    Adam, sign descent, Lion, Muon: η·√c).

    Arguments:

    - ``opt``: an ``optax.GradientTransformation``, or a factory ``rho -> GradientTransformation``
      (the optimiser for gradients ×ρ and weights ×1/ρ: ε ×ρ, eps_root ×ρ², decoupled weight
      decay ×ρ^{1+κ}), which makes the twin exact for optimisers with such constants.
    - ``alpha``: the net's slope α; ``depth``: its depth L.
    - ``degree``: κ, or None to measure it (refused when the update is not homogeneous within
      round-off, :data:`HOMOGENEITY_RTOL`).
    - ``probe``: a params tree of the shapes the optimiser will see (default: a small
      two-layer net).

    Returns the twin's ``optax.GradientTransformation``. ``bf.train(..., twin=True)`` builds
    it itself; call this to run the twin on its own.

    Example::

        import optax, biasfree as bf
        adam = lambda rho: optax.adam(1e-3, eps=1e-8 * rho)   # ε scales with the gradients
        twin_opt = bf.optimiser_twin(adam, alpha=0.0)          # Adam, updates × √c (κ = 0)

    Exact for a two-layer pair net on symmetric data with full or mirrored batches
    (docs/theory.md §9); for L ≥ 3 this is the odd-part twin of §4.1, an approximation. A
    given ``degree`` is trusted: with an unscaled ε the twin is approximate (§9 measures by
    how much).
    """
    validate.optimiser("opt", opt)
    alpha = validate.slope(alpha, "alpha")
    depth = validate.integer("depth", depth, 2)
    if degree is not None:
        degree = validate.real("degree", degree, scalar=True)
    return _optimiser_twin(opt, alpha, depth, degree, probe)


def _optimiser_twin(opt, alpha: float, depth: int, degree: float | None, probe=None, name: str | None = None):
    """:func:`optimiser_twin` once its arguments are checked (what the trainer calls, with the
    config's ``name``; None: :func:`~biasfree.dynamics.train_config.optimiser_name`)."""
    factory = not (hasattr(opt, "init") and hasattr(opt, "update"))
    make = opt if factory else (lambda rho: opt)
    a = TwinScales.unchecked(alpha, depth).weight
    rho = 1.0 / a
    if degree is None:
        degree = measure_degree(make, _probe_rhos(rho), probe, name or optimiser_name(opt))
    inner = make(rho)
    if not (hasattr(inner, "init") and hasattr(inner, "update")):
        raise TypeError(f"opt: the factory returned {type(inner).__name__}; it must return an "
                        "optax.GradientTransformation, e.g. lambda rho: optax.adam(1e-3, eps=1e-8 * rho)")
    return optax.chain(inner, optax.scale(a ** (1.0 + degree)))


NAMED: dict[str, Callable[..., Callable]] = {
    "sgd": lambda lr: lambda rho: optax.sgd(lr),
    "momentum": lambda lr: lambda rho: optax.sgd(lr, momentum=0.9),
    "nesterov": lambda lr: lambda rho: optax.sgd(lr, momentum=0.9, nesterov=True),
    "adam": lambda lr: lambda rho: optax.adam(lr, eps=1e-8 * rho),
    "rmsprop": lambda lr: lambda rho: optax.rmsprop(lr, eps=1e-8 * rho**2),
    "sign_sgd": lambda lr: lambda rho: optax.sign_sgd(lr),
    "lion": lambda lr, weight_decay=1e-3: lambda rho: optax.lion(lr, weight_decay=weight_decay * rho),
    "adamw": lambda lr, weight_decay=1e-4: lambda rho: optax.adamw(lr, eps=1e-8 * rho,
                                                                   weight_decay=weight_decay * rho),
    "muon": lambda lr: lambda rho: optax.contrib.muon(lr, eps=1e-8 * rho),
}
"""The optimisers by name (the CLI's ``--optimiser``, the optimisers claim's table): each a
factory of the step η (Lion and AdamW also of ``weight_decay``, default optax's) returning a
factory of ρ whose constants with gradient units are rescaled so that the twin is exact
(docs/theory.md §9.2): ε ×ρ (Adam, AdamW, Muon), RMSProp's ε inside the square root ×ρ²,
the decoupled decay ×ρ^{1+κ} = ×ρ (κ = 0); optax defaults otherwise (momentum 0.9, Adam's
β = (0.9, 0.999))."""


class ApproximateTwinWarning(UserWarning):
    """``bf.train(..., twin=True)`` under a plain optimiser that is not homogeneous: the twin runs
    with :func:`with_degree`'s approximate κ (``analyse(train=...)`` puts the same text in its notes)."""


def with_degree(cfg: TrainConfig, alpha: float, depth: int) -> tuple[TrainConfig, object, str]:
    """``(cfg with κ set, its twin's optimiser at slope α and depth L, a note on how κ was
    found)``: the one κ policy of ``bf.train(..., twin=True)`` and ``analyse(train=...)``
    (docs/theory.md §9.2). κ as given; at α = 1 (c = 1: the twin's updates are scaled by
    1^(1+κ) = 1, whatever κ) 0, nothing measured; else measured (:func:`measure_degree`): the twin
    is exact. A plain optimiser that is not homogeneous (Adam with its ε = 1e-8 fixed) gets the κ
    of its updates on unit-size gradients, where ε is negligible (the refusal's κ at probe scale 1
    and the first of :data:`PROBE_RHOS`), rounded to an integer, and the note says the twin is then
    APPROXIMATE; a factory that is not homogeneous is refused (its ρ-scaling is wrong), as is a κ
    that is not finite. The twin's optimiser :func:`optimiser_twin`'s, built once for every run of
    ``cfg`` on such a net (the trainer takes it as it is: ``trainer.run_checked``'s
    ``twin_optimiser``; ``bf.train(..., twin=True)`` without one calls this)."""
    if cfg.degree is not None:
        note = f"κ = {cfg.degree:g} as given"
    elif alpha == 1.0:
        note = "κ = 0: at α = 1 the twin's updates are the net's, whatever κ"
        cfg = dataclasses.replace(cfg, degree=0.0)
    else:
        opt = cfg.optimiser
        try:
            kappa = measure_degree(opt if cfg.factory else (lambda rho: opt), probe_rhos(alpha, depth),
                                   name=cfg.label)
            note = f"κ = {kappa:g} measured: the twin optimiser is exact (docs/theory.md §9)"
        except NotHomogeneousError as refused:
            kappa = refused.kappas[1.0, PROBE_RHOS[0]]  # unit-size gradients (ε negligible), ρ = 3
            if cfg.factory or not math.isfinite(kappa):
                raise
            kappa = float(round(kappa))
            note = (f"APPROXIMATE twin: {cfg.label} is not homogeneous in the gradients within round-off "
                    f"(tolerance {HOMOGENEITY_RTOL:g}), κ = {kappa:g} from unit-size gradients; the measured "
                    "gap includes the constant's effect (pass a factory, e.g. lambda rho: optax.adam(lr, "
                    "eps=1e-8 * rho), for an exact twin)")
        cfg = dataclasses.replace(cfg, degree=kappa)
    return cfg, _optimiser_twin(cfg.optimiser, alpha, depth, cfg.degree, name=cfg.label), note
