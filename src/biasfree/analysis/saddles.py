"""Embedded fixed points (Zhang, Saxe & Latham 2025, Theorem 1; docs/theory.md §11.4).

A bias-free two-layer dense net ``f(x) = W_2 σ_α(W_1 x)`` of width H − 1 (unit h: input
weights ``w_h`` = row h of W_1, output weights ``a_h`` = column h of W_2) at a fixed point of
``L = (1/2N) Σ_n ||f(x_n) − y_n||²`` embeds as a fixed point of the width-H net with the same
function, by one of the paper's constructions (each checked by the chain rule in §11.4):

- ``"split"`` (any σ): unit j's copy ``w_H = w_j``, outputs ``a_j → ρ a_j``, ``a_H = (1 − ρ) a_j``;
- ``"zero"`` (σ(0) = 0): a new unit ``w_H = 0``, ``a_H = 0``;
- ``"rescale"`` (1-homogeneous σ, every leaky ReLU): ``w_H = c w_j`` (c > 0),
  ``a_j → a_j − c a_H`` with ``a_H = ρ a_j / c``;
- ``"linear"`` (α = 1): ``w_H = Σ_h c_h w_h``, ``a_H = Σ_h d_h a_h``, every ``a_h → a_h − c_h a_H``.

:func:`fixed_point` (any depth: ``f = W_L σ(⋯σ(W_1 x))``, Theorem 1's nets at L = 2, docs/theory.md
§11.7.10 for L ≥ 3; one code path for every L) says whether a net is one: its relative gradient
‖∇L‖·‖θ‖/(½<||y||²>) against the round-off bound of :mod:`biasfree.analysis.stationary`, and the
Hessian's lowest eigenvalue λ_min (``jax.hessian`` of the flattened weights up to
:data:`DENSE_HESSIAN` weights, Lanczos on Hessian-vector products above,
``_lowest_eigenvalue``) against its round-off λ_tol. With h the bound on ‖H‖₂ of that module
(``h = S² ms‖x‖ + R̂ rms‖r‖ rms‖x‖``), each entry of H is a sum of K products, off by at most
``γ_K h``, so ‖δH‖₂ ≤ ‖δH‖_F ≤ γ_K h √n_θ, and by Weyl ``|δλ| ≤ ‖δH‖₂``: λ_tol = (γ_K + u) h √n_θ
(u the unit round-off), and Lanczos adds ``12 u h`` (``_lowest_eigenvalue``).
λ_min < −λ_tol is a saddle, left
along its eigenvector at rate ``|λ_min|``: from a distance ε the escape takes
``t ≈ ln(1/ε)/|λ_min|`` (gradient-flow time t = η k). :func:`embed` refuses a point that is not
a fixed point, and reports the wide net's function change, gradient and Hessian.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as v
from ..core.layers import Layer, Params
from ..core.nets import _leaky_relu, is_leaky
from ..core.precision import precise
from .hessian_eig import extreme_eigenvalue
from .stationary import EPS, accumulations, gamma, gradient_tolerance, hessian_bound, layer_norms

CONSTRUCTIONS = ("split", "zero", "rescale", "linear")
"""Theorem 1's embeddings (module doc)."""
DENSE_HESSIAN = 600
"""Up to this many weights the Hessian is formed whole; above, Lanczos on Hessian-vector products."""
LANCZOS_SEED = 0
"""Seed of Lanczos's start vector: the same call gives the same bits (ARPACK's own start is random,
drawn from the OS's entropy by scipy, so λ_min moved in its last bits and its eigenvector flipped
sign between two identical calls)."""


def _dense(params, name: str = "params", *, two: bool = False) -> list[np.ndarray]:
    """The matrices W_1, …, W_L of a bias-free dense net ``params`` of depth L ≥ 2 (L = 2 with
    ``two``: Theorem 1's constructions), each W_l's inputs W_{l−1}'s outputs."""
    if (not isinstance(params, tuple | list) or (len(params) != 2 if two else len(params) < 2)
            or any(type(la) is not Layer or la.bias is not None for la in params)):
        what = ("two-layer dense net (two biasfree.nets Layers with b=None): Theorem 1's constructions are "
                "built here for that family only" if two else
                "two-layer dense net or a deeper one (biasfree.nets Layers with b=None)")
        raise ValueError(f"{name} must be a bias-free {what}")
    if not is_leaky(params):  # σ(z) = z² read as σ_α would answer another net's questions
        raise ValueError(f"{name}: a hidden layer has activation='quadratic'; the fixed points, "
                         "Hessians and Theorem 1's constructions here are built for (leaky) ReLU and linear "
                         "nets (σ_α) only; a quadratic net's effective units are "
                         "bf.analyse(net, data).stage.units and its init-induced plateau times "
                         "biasfree.theory.plateau_times (docs/theory.md §11.2)")
    Ws = [np.asarray(la.W, float) for la in params]
    for i in range(1, len(Ws)):
        if Ws[i].shape[1] != Ws[i - 1].shape[0]:
            raise ValueError(f"{name}: W_{i + 1} has {Ws[i].shape[1]} inputs but W_{i} has "
                             f"{Ws[i - 1].shape[0]} outputs")
    return Ws


def _lowest_eigenvalue(hvp, hessian, n: int, h: float) -> tuple[float, np.ndarray, float]:
    """``(λ_min, v, δ)``: the lowest eigenvalue of a Hessian H (n × n), its unit eigenvector and the
    bound δ on what the eigensolver adds to H's own round-off. Up to :data:`DENSE_HESSIAN` weights
    ``hessian()`` whole, LAPACK's eigh (δ = 0, as before: its backward error, a modest multiple of
    u‖H‖₂ ≤ u h, is of the size of λ_tol's u h √n term).
    Above, Lanczos (:func:`~.hessian_eig.extreme_eigenvalue`, from a seeded start,
    :data:`LANCZOS_SEED`) on the products ``hvp(v) + c v`` with ``c = 2h``, h a bound on ‖H‖₂, then
    ``− c``, and ``δ = 12 u h``:

    - *why shift.* ARPACK stops at a Ritz residual ``‖Av − θv‖ ≤ tol·|θ|``, relative: unshifted, a
      λ_min at 0 (a minimum's flat directions, a deep net's saddle, many times degenerate) never got
      there (a 20-30-3 linear net at its minimum: ArpackNoConvergence after 6901 iterations). With
      ‖H‖₂ ≤ h, A = H + 2hI has its spectrum in [h, 3h]: θ ≥ h whatever λ_min ∈ [−h, h], so the
      relative stop is an absolute one and a λ_min at 0 or at −h converges as any other (c = h, as
      the deep path had, lets θ → 0 when the bound is tight). Lanczos' Krylov space does not depend
      on the shift, so neither does its speed.
    - *δ, to first order in u.* Forming ``Hv + c v`` adds at most ``u (‖Av‖ + c‖v‖) ≤ 5 u h`` to
      each product (a perturbation of A of that 2-norm; Weyl); ARPACK's stop at tol 0 is machine ε
      = 2u of θ ≤ 3h, and ``|θ − λ(A)| ≤ ‖Av − θv‖`` for a symmetric A: ``6 u h``; ``θ − c`` is
      rounded by ``u |λ| ≤ u h``. Sum 12 u h, below 1 % of λ_tol's (γ_K + u) h √n (K ≥ 50 and
      √n > 24 above 600 weights).

    ARPACK's own start, drawn from the OS's entropy, moved λ_min in its last bits and flipped the
    eigenvector between two identical calls; the seeded start gives the same bits."""
    if n <= DENSE_HESSIAN:
        lam, vec = extreme_eigenvalue(hvp, n, "SA", dense_up_to=DENSE_HESSIAN, matrix=hessian, vector=True)
        return lam, vec, 0.0
    c = 2 * max(h, 1e-300)  # h = 0 (a deep net at θ = 0): H = 0, any c > 0 will do
    lam, vec = extreme_eigenvalue(lambda x: np.asarray(hvp(jnp.asarray(x))) + c * x, n, "SA",
                                  dense_up_to=DENSE_HESSIAN, vector=True,
                                  v0=np.random.default_rng(LANCZOS_SEED).standard_normal(n))
    return lam - c, vec, 12 * EPS * h


@dataclass(frozen=True)
class FixedPoint:
    """Where a dense net stands (module doc): ``loss``; ``grad`` its relative gradient
    ‖∇L‖·‖θ‖/(½<||y||²>) and ``grad_tol`` its round-off bound; ``lambda_min`` the Hessian's lowest
    eigenvalue (loss per weight²), ``lambda_tol`` its round-off, ``direction`` its eigenvector
    (flattened W_1 then W_2)."""

    loss: float
    grad: float
    grad_tol: float
    lambda_min: float
    lambda_tol: float
    direction: np.ndarray

    @property
    def stationary(self) -> bool:
        """The gradient is zero to round-off."""
        return self.grad <= self.grad_tol

    @property
    def saddle(self) -> bool:
        """A fixed point with a descent direction beyond round-off (λ_min < −λ_tol)."""
        return self.stationary and self.lambda_min < -self.lambda_tol

    def escape_time(self, distance: float) -> float:
        """``ln(1/ε)/|λ_min|``: gradient-flow time to leave the saddle from a distance ε along
        its unstable direction (inf if not a saddle)."""
        eps = v.positive("distance", distance, scalar=True)
        return math.log(1.0 / eps) / abs(self.lambda_min) if self.saddle else math.inf


@precise
def fixed_point(params: Params, X, Y, alpha: float) -> FixedPoint:
    """:class:`FixedPoint` of a bias-free dense net ``params`` (slope ``alpha``) on inputs X (N, d),
    targets Y (N, p): two layers (Theorem 1's nets), or deeper, ``f = W_L σ(⋯σ(W_1 x))``, with the
    same bounds for L layers (S² = Σ_l Π_{j≠l}‖W_j‖², R̂² = Σ_{l≠k} Π_{j≠l,k}‖W_j‖²). At depth L ≥ 3
    λ_min decides one way only: λ_min < −λ_tol is a saddle, but a saddle left at order ε^L (a deep
    linear net's rank-k point, docs/theory.md §11.7.10) has λ_min = 0 to round-off
    (:mod:`biasfree.analysis.deep_stage` tests it by its next mode)."""
    Ws = _dense(params)
    X, Y = v.data(X, Y)
    alpha = float(v.slope(alpha))
    return _fixed_point(Ws, X, Y, alpha)


def _outputs(Ws, X, alpha, cast=jnp.asarray):
    """f(X) = W_L σ_α(⋯σ_α(W_1 x)) for the weight matrices ``Ws``, rows of X; each hidden layer's
    output through ``cast`` (``np.asarray``: the products in NumPy, for NumPy weights and data)."""
    h = X
    for j, W in enumerate(Ws):
        h = h @ W.T if j == len(Ws) - 1 else cast(_leaky_relu(h @ W.T, alpha))
    return h


def _flat(Ws) -> tuple[np.ndarray, tuple]:
    """``(θ, shapes)``: the weights flattened W_1, …, W_L, each row-major, and each W_l's shape
    (``_loss``'s order)."""
    return np.concatenate([W.ravel() for W in Ws]), tuple(W.shape for W in Ws)


def _loss(flat, X, Y, alpha, shapes):
    """L of the flattened weights of a depth-L net (each W_l (n_l, n_{l−1}) row-major, in order)."""
    i, Ws = 0, []
    for o, n in shapes:
        Ws, i = Ws + [flat[i:i + o * n].reshape(o, n)], i + o * n
    return 0.5 * jnp.sum((_outputs(Ws, X, alpha) - Y) ** 2) / X.shape[0]


_value_and_grad = jax.jit(jax.value_and_grad(_loss), static_argnames="shapes")
_hessian = jax.jit(jax.hessian(_loss), static_argnames="shapes")
_hvp = jax.jit(lambda flat, vec, X, Y, alpha, shapes: jax.jvp(
    lambda th: jax.grad(_loss)(th, X, Y, alpha, shapes), (flat,), (vec,))[1], static_argnames="shapes")


@precise
def hessian_eigh(params: Params, X, Y, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Every eigenvalue (ascending) and eigenvector of the Hessian of L at a bias-free dense net of
    any depth (weights flattened W_1, …, W_L, each row-major), for at most :data:`DENSE_HESSIAN`
    weights."""
    flat, shapes = _flat(_dense(params))
    if flat.size > DENSE_HESSIAN:
        raise ValueError(f"the net has {flat.size} weights, above DENSE_HESSIAN = {DENSE_HESSIAN}: "
                         "fixed_point gives its lowest eigenvalue (Lanczos)")
    H = _hessian(jnp.asarray(flat), jnp.asarray(X), jnp.asarray(Y), float(alpha), shapes)
    return np.linalg.eigh(np.asarray(H))


def _fixed_point(Ws, X, Y, alpha) -> FixedPoint:
    """:class:`FixedPoint` of the weight matrices ``Ws`` (any depth L ≥ 2; checked data)."""
    params, (flat, shapes) = tuple(Layer(W) for W in Ws), _flat(Ws)
    flat, Xj, Yj, n = jnp.asarray(flat), jnp.asarray(X), jnp.asarray(Y), flat.size
    loss, grad = _value_and_grad(flat, Xj, Yj, alpha, shapes)
    ref = 0.5 * float(np.mean(np.sum(Y**2, axis=1)))
    R = _outputs(Ws, X, alpha, np.asarray) - Y
    # ||H|| ≤ S² ms‖x‖ + R̂ rms‖r‖ rms‖x‖ (stationary's bound, L layers; two layers: S² = Σ_l ||W_l||², R̂ = √2)
    h_norm = hessian_bound(params, X, R)
    lam, vec, solver = _lowest_eigenvalue(lambda v: _hvp(flat, v, Xj, Yj, alpha, shapes),
                                          lambda: _hessian(flat, Xj, Yj, alpha, shapes), n, h_norm)
    lam_tol = (gamma(accumulations(params, X.shape[0])) + EPS) * h_norm * math.sqrt(n) + solver
    theta = float(np.linalg.norm(np.asarray(flat)))
    return FixedPoint(float(loss), float(np.linalg.norm(np.asarray(grad))) * theta / ref,
                      gradient_tolerance(params, X, R, ref), lam, lam_tol, vec)


def embedded_params(params: Params, construction: str, *, unit: int = 0, ratio: float = 0.5,
                    scale: float = 1.0, c=None, d=None) -> Params:
    """The width-H net of Theorem 1's ``construction`` (module doc) from a width-(H−1) one:
    unit ``unit`` = j, split ratio ``ratio`` = ρ, copy scale ``scale`` = c (``"rescale"``);
    for ``"linear"`` the coefficients ``c``, ``d`` (H−1,) (default: unit j's, e_j). The
    construction alone, unchecked: :func:`embed` checks it."""
    W1, W2 = _dense(params, two=True)
    construction = v.choice("construction", construction, CONSTRUCTIONS)
    j = v.integer("unit", unit, 0, W1.shape[0] - 1)
    rho = v.real("ratio", ratio, scalar=True)
    cs = v.real("scale", scale, scalar=True)
    W1n, W2n = embedded_weights(W1, W2, construction, j, rho, cs, c, d)
    return Layer(jnp.asarray(W1n)), Layer(jnp.asarray(W2n))


def checked_construction(construction: str, alpha: float, scale) -> tuple[str, float]:
    """``(construction, scale)`` checked for a net of slope ``alpha`` (checked): one of
    :data:`CONSTRUCTIONS`, ``"linear"`` only at α = 1, ``"rescale"`` only with ``scale`` > 0."""
    construction = v.choice("construction", construction, CONSTRUCTIONS)
    if construction == "linear" and alpha != 1.0:
        raise ValueError(f"construction='linear' needs a linear net (alpha=1), got alpha={alpha}: use "
                         "'split', 'zero' or 'rescale'")
    scale = v.real("scale", scale, scalar=True)
    if construction == "rescale" and not scale > 0:
        raise ValueError(f"scale={scale} must be > 0: σ_α(c z) = c σ_α(z) holds for c > 0 only")
    return construction, scale


def embedded_weights(W1, W2, construction: str, j: int, rho: float, scale: float, c=None, d=None,
                     degree: int = 1):
    """``(W₁', W₂')`` of ``construction`` (module doc) on the rows of ``W1`` (H−1, d) and the columns
    of ``W2`` (p, H−1), unchecked: unit ``j``, ratio ``rho``, copy scale ``scale``, ``"linear"``'s
    coefficients ``c``, ``d``; the new unit is the last. Any units whose incoming weights are rows
    and outgoing weights columns (hidden units, conv kernels: :mod:`~biasfree.analysis.unit_embed`);
    ``degree`` k of a k-homogeneous σ for ``"rescale"`` (σ(cz) = c^k σ(z): the copy's outputs are
    divided by c^k; 2 for z²)."""
    H1 = W1.shape[0]
    W2 = W2.copy()
    if construction == "split":
        w_new, a_new = W1[j], (1 - rho) * W2[:, j]
        W2[:, j] = rho * W2[:, j]
    elif construction == "zero":
        w_new, a_new = np.zeros(W1.shape[1]), np.zeros(W2.shape[0])
    elif construction == "rescale":
        w_new, a_new = scale * W1[j], rho * W2[:, j] / scale**degree
        W2[:, j] = W2[:, j] - scale**degree * a_new
    else:
        c = np.eye(H1)[j] if c is None else v.finite_array("c", c, shape=(H1,))
        d = np.eye(H1)[j] if d is None else v.finite_array("d", d, shape=(H1,))
        w_new, a_new = c @ W1, W2 @ d
        W2 = W2 - np.outer(a_new, c)
    return np.vstack([W1, w_new[None]]), np.hstack([W2, a_new[:, None]])


@dataclass(frozen=True)
class Embedding:
    """An embedded fixed point: the wide net ``params``, its ``construction``, the ``narrow``
    and ``wide`` :class:`FixedPoint`, and ``function_gap`` max_n ||f_wide(x_n) − f_narrow(x_n)||
    with its round-off bound ``function_tol`` (2 γ_K P max‖x‖, P = Π_l ||W_l||_F, K = d + H)."""

    params: Params
    construction: str
    narrow: FixedPoint
    wide: FixedPoint
    function_gap: float
    function_tol: float

    @property
    def holds(self) -> bool:
        """Theorem 1's identities: the same function and a zero gradient, each to round-off."""
        return self.function_gap <= self.function_tol and self.wide.stationary


@precise
def embed(params: Params, X, Y, alpha: float, construction: str, *, unit: int = 0, ratio: float = 0.5,
          scale: float = 1.0, c=None, d=None) -> Embedding:
    """Embed the fixed point ``params`` (width H − 1, slope ``alpha``, data X, Y) into width H by
    ``construction`` (:func:`embedded_params`) and check it (:class:`Embedding`). A point whose
    gradient is above round-off is refused, with its gradient."""
    W1, W2 = _dense(params, two=True)
    X, Y = v.data(X, Y)
    alpha = float(v.slope(alpha))
    construction, scale = checked_construction(construction, alpha, scale)
    narrow = _fixed_point([W1, W2], X, Y, alpha)
    if not narrow.stationary:
        raise ValueError(f"params is not a fixed point: its relative gradient ‖∇L‖·‖θ‖/(½<||y||²>) is "
                         f"{narrow.grad:.3g}, above the round-off bound {narrow.grad_tol:.3g}; train it to "
                         "a stationary point first")
    wide = embedded_params(params, construction, unit=unit, ratio=ratio, scale=scale, c=c, d=d)
    return check_embedding(params, wide, X, Y, alpha, construction, narrow=narrow)


def check_embedding(narrow_params: Params, wide_params: Params, X, Y, alpha: float,
                    construction: str = "given", *, narrow: FixedPoint | None = None) -> Embedding:
    """:class:`Embedding` of any wide net ``wide_params`` against the narrow ``narrow_params``:
    the checks of :func:`embed`, for an embedding built by hand (e.g. a wrong one)."""
    W1, W2 = _dense(narrow_params, "narrow_params", two=True)
    V1, V2 = _dense(wide_params, "wide_params", two=True)
    X, Y = v.data(X, Y)
    alpha = float(v.slope(alpha))
    narrow = _fixed_point([W1, W2], X, Y, alpha) if narrow is None else narrow
    f_n, f_w = (_outputs(Ws, X, alpha, np.asarray) for Ws in ((W1, W2), (V1, V2)))
    P = max(float(np.prod(layer_norms(narrow_params))), float(np.prod(layer_norms(wide_params))))
    tol = 2 * gamma(X.shape[1] + V1.shape[0]) * P * float(np.max(np.linalg.norm(X, axis=1)))
    return Embedding(tuple(wide_params), construction, narrow, _fixed_point([V1, V2], X, Y, alpha),
                     float(np.max(np.linalg.norm(f_w - f_n, axis=1))), tol)
