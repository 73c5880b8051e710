"""Local linear analysis of a net at given inputs (docs/theory.md §8; Mohan et al., ICLR 2020).

A bias-free (leaky) ReLU net of any depth, dense or convolutional, is positively
homogeneous, ``f(λx) = λ f(x)`` for λ > 0, and piecewise linear, so Euler's theorem gives
``f(x) = J(x) x`` exactly, with ``J(x)`` (p, d) the Jacobian at x: the rows of J are the
filters the net applies at x. With biases, ``f(x) = J(x) x + b(x)``: ``b(x)`` is the
*bias term*. :func:`local_linear` measures all of it on the rows of ``X`` through the layer
protocol (:class:`~biasfree.core.layers.AbstractLayer`: ``matrix``, ``bias``, ``apply``)
and :func:`~biasfree.core.nets.forward` only, so any layer type that implements the
protocol is covered unchanged.

**Round-off bounds** (Higham, *Accuracy and Stability*, §3.1–3.5; u = the dtype's machine
epsilon, 2.2e-16 in float64, twice the unit round-off as in ``tests/roundoff.py``;
``γ_k = k u/(1 − k u)``, :func:`~biasfree.core.precision.gamma`). Write
``z_l = A_l h_{l−1} + b_l``, ``h_l = σ_α(z_l)``. A computed
sum of k products errs by at most ``γ_k |A||h|`` whatever its order (direct sums: dense
products and direct convolutions; an FFT convolution is not covered); ``σ_α`` is
1-Lipschitz elementwise and costs one rounding (α z); adding b costs one. By induction
the computed output errs by at most ``γ_K G(x)``, elementwise, where

    ``G(x) = |A_L| (… |A_2| (|A_1| |x| + |b_1|) + |b_2| …) + |b_L|``      (the absolute forward pass)
    K = Σ_l (n_{l−1} + n_l + 2)

(``n_{l−1}`` terms per forward product, ``n_l`` per reverse-mode product, + 2 for α z and
+ b; ``γ_a + γ_b ≤ γ_{a+b}``). ``|A_l|`` is ``abs(layer.matrix)``. Then, elementwise:

- **homogeneity**: ``f̂(fl(λx)) − fl(λ f̂(x))``: two forward passes (γ_K each), the
  rounding of λx (≤ u G(λx), σ_α being 1-Lipschitz), of λ f̂ and of the difference:
  ``|gap| ≤ γ_{K+3} (G(λx) + λ G(x))`` (``= 2λ γ_{K+3} G(x)`` without biases);
- **Euler**: ``f̂(x) − fl(Ĵ x)``: the forward pass (γ_K G); the Jacobian, computed with
  the same products (``|Ĵ − J| |x| ≤ γ_K |A_L|…|A_1||x| ≤ γ_K G``); its slopes read off the
  computed signs, which may differ from the true ones only where ``|z| ≤`` its error
  (another γ_K G downstream); the product Ĵx (``γ_d |Ĵ||x|``) and the difference (u):
  ``|f̂ − fl(Ĵx) − b(x)| ≤ γ_{3K+d+2} G(x)``, with ``b ≡ 0`` without biases.

Both are first-order worst cases; measured ratios are far below 1 (docs/theory.md §8).
The bound itself is computed in the same precision (relative error ≤ γ_K, negligible).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core.layers import Params
from ..core.nets import _even_part, _odd_part, check_apply, effective_rank, forward_unchecked, has_bias
from ..core.precision import gamma, precise
from .decomposition import energy

DEFAULT_LAMBDAS = (0.1, 3.0, 7.0)
"""Default scales λ: no power of two, for which fl(λx) is exact and the check could pass bitwise."""
MAX_ENTRIES = 2**24
"""Default cap on the Jacobians' size N·p·d (float64: 128 MiB)."""


@dataclass(frozen=True)
class Identities:
    """The identities of a bias-free net, each against its round-off bound (module doc):
    what :class:`LocalLinear` and ``analyse``'s report share.

    Amplitudes are relative to the largest output ``|f_i(x_n)|``. ``homogeneity_gap``: max
    over n, λ, i of ``|f_i(λx_n) − λ f_i(x_n)| / λ``; ``homogeneity_bound`` the same
    normalisation of its round-off bound; ``homogeneity_ratio``: max elementwise
    ``|gap| / bound`` (≤ 1: homogeneous to round-off, ``homogeneous``). ``euler_residual``,
    ``euler_bound``, ``euler_ratio``, ``euler_holds``: the same for f(x) − J(x)x.
    ``bias_fraction`` <||f − Jx||²>/<||f||²> (round-off without biases, ``has_bias``
    False). ``odd_fraction``, ``even_fraction``: <||f_odd||²>/<||f||²> and
    <||f_even||²>/<||f||²> (they sum to 1 when X is mirror-symmetric)."""

    has_bias: bool
    homogeneity_gap: float
    homogeneity_bound: float
    homogeneity_ratio: float
    euler_residual: float
    euler_bound: float
    euler_ratio: float
    bias_fraction: float
    odd_fraction: float
    even_fraction: float

    @property
    def homogeneous(self) -> bool:
        """f(λx) = λ f(x) at every input and λ, to its round-off bound."""
        return bool(self.homogeneity_ratio <= 1.0)

    @property
    def euler_holds(self) -> bool:
        """f(x) = J(x) x at every input, to its round-off bound."""
        return bool(self.euler_ratio <= 1.0)

    def lines(self) -> list[str]:
        """The identities as text lines, each beside its round-off bound; the bias term
        only for a net with biases."""
        out = [f"homogeneity gap = {self.homogeneity_gap:.3g} (round-off bound {self.homogeneity_bound:.3g})",
               f"Euler residual f - J·x = {self.euler_residual:.3g} (round-off bound {self.euler_bound:.3g})"]
        return out + ([f"bias term f - J·x = {self.bias_fraction:.3g} of <f²>"] if self.has_bias else [])


def dimension_line(median: float, max_dimension: int) -> str:
    """The Jacobian's effective dimension as one text line (median participation ratio)."""
    return f"Jacobian effective dimension = {median:.3g} of {max_dimension} (median participation ratio)"


@dataclass(frozen=True)
class LocalLinear(Identities):
    """What :func:`local_linear` measured on the rows of X (N inputs, p outputs, d inputs):
    the :class:`Identities` (relative to ``scale`` = ``max |f_i(x_n)|``), and ``n_inputs`` N,
    ``lambdas`` the scales used, ``bias_term`` (N, p) f(x) − J(x)x, ``jacobians``
    (N, p, d), ``singular_values`` (N, min(p, d)) descending; effective dimensions per
    input (N,): ``effective_rank`` (entropy of σ/Σσ, Roy & Vetterli 2007),
    ``participation_ratio`` (Σσ²)²/Σσ⁴, ``frobenius_dimension`` Σσ² (the BF-CNN measure,
    Mohan et al. 2020: the rank of J when J is an orthogonal projection)."""

    n_inputs: int
    lambdas: np.ndarray
    scale: float
    bias_term: np.ndarray
    jacobians: np.ndarray
    singular_values: np.ndarray
    effective_rank: np.ndarray
    participation_ratio: np.ndarray
    frobenius_dimension: np.ndarray

    def summary(self) -> str:
        """One line: the identities against their bounds, the bias term and the dimensions."""
        dim = dimension_line(float(np.median(self.participation_ratio)), self.singular_values.shape[1])
        return f"at {self.n_inputs} inputs: " + "; ".join(self.lines() + [dim])


def participation_ratio(sv) -> np.ndarray:
    """``(Σ_i σ_i²)² / Σ_i σ_i⁴`` of the singular values ``sv`` on the last axis: k for k
    equal non-zero values, 1 for a rank-one matrix, between 1 and the rank otherwise,
    unchanged by scaling; 0 for the zero matrix."""
    sv = validate.nonnegative("sv", sv, why="singular values are >= 0")
    if sv.ndim == 0 or sv.shape[-1] == 0:
        raise ValueError(f"sv must hold singular values on its last axis, got shape {sv.shape}")
    s2 = sv**2
    num, den = np.sum(s2, axis=-1) ** 2, np.sum(s2**2, axis=-1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def _abs_forward(params: Params, X) -> jax.Array:
    """``G(x)`` on the rows of X (N, p): the forward pass with |A_l|, |b_l|, |x| and no σ."""
    G = jnp.abs(X)
    for layer in params:
        G = G @ jnp.abs(layer.matrix).T
        if layer.bias is not None:
            G = G + jnp.abs(layer.bias)
    return G


def _ratio(err, bound) -> float:
    """max |err| / bound elementwise; 0/0 counts 0, x/0 (x > 0) counts inf."""
    err, bound = np.abs(np.asarray(err)), np.asarray(bound)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(bound > 0, err / np.where(bound > 0, bound, 1.0), np.where(err > 0, np.inf, 0.0))
    return float(np.max(r)) if r.size else 0.0


def jacobians(params: Params, X, alpha) -> jax.Array:
    """``J(x_n)`` (N, p, d) of ``forward(params, ·, alpha)`` at the rows of X: forward mode
    when d ≤ p, reverse mode otherwise (the cheaper), vmapped over the inputs."""
    def f(x):
        return forward_unchecked(params, x[None, :], alpha)[0]
    d, p = X.shape[1], params[-1].n_out
    return jax.vmap(jax.jacfwd(f) if d <= p else jax.jacrev(f))(X)


@jax.jit
def _measure(params: Params, X, alpha, lam):
    """The arrays :func:`local_linear` needs, in one compiled program (layers are pytrees,
    docs/theory.md §0), the scaled inputs stacked [x; λ_1x; …] in one forward pass:
    f(λX) and G(λX) (1 + #λ, N, p) (slice 0: λ = 1), J, f − Jx, f_odd, f_even."""
    N = X.shape[0]
    XL = (jnp.concatenate([jnp.ones(1, X.dtype), lam])[:, None, None] * X[None]).reshape(-1, X.shape[1])
    FL = forward_unchecked(params, XL, alpha).reshape(lam.size + 1, N, -1)
    GL = _abs_forward(params, XL).reshape(lam.size + 1, N, -1)
    J = jacobians(params, X, alpha)
    return (FL, GL, J, FL[0] - jnp.einsum("npd,nd->np", J, X), _odd_part(params, X, alpha),
            _even_part(params, X, alpha))


@precise
def local_linear(params: Params, X, alpha, *, lambdas=DEFAULT_LAMBDAS,
                 max_entries: int = MAX_ENTRIES) -> LocalLinear:
    """Local linear analysis of the net ``params`` (any depth, any layer type of the
    protocol, with or without biases) at the rows of ``X`` (N, d), slope ``alpha``.

    Measures ``f(λx) − λ f(x)`` for λ in ``lambdas`` (> 0), ``f(x) − J(x) x`` with
    ``J`` from ``jax.jacfwd``/``jacrev`` (vmapped), each against its round-off bound (module
    doc); the bias term; J's singular values and effective dimensions; the odd/even split
    (:class:`LocalLinear`). The Jacobians hold N·p·d numbers and are
    returned: more than ``max_entries`` is refused (pass fewer inputs, or raise the cap).
    One compiled program per net structure and input shape.
    """
    check_apply(params, X, alpha)
    lam = validate.positive("lambdas", lambdas, why="positive homogeneity is about f(λx), λ > 0")
    if lam.ndim != 1 or lam.size == 0:
        raise ValueError(f"lambdas={lambdas!r} must be a non-empty list of positive numbers")
    max_entries = validate.integer("max_entries", max_entries, 1)
    (N, d), p = np.shape(X), params[-1].n_out
    if N * p * d > max_entries:
        raise ValueError(f"the Jacobians at {N} inputs hold N·p·d = {N}·{p}·{d} = {N * p * d} numbers, "
                         f"over max_entries = {max_entries}: pass at most {max(max_entries // (p * d), 0)} "
                         "inputs (e.g. X[:k]) or raise max_entries")
    return _local_linear(params, X, alpha, lam)


def _local_linear(params: Params, X, alpha, lambdas=DEFAULT_LAMBDAS) -> LocalLinear:
    """:func:`local_linear` unchecked: the caller checked the net, ``X`` (N, d), the slope and
    ``lambdas`` (> 0, 1-D), and that the Jacobians fit its cap."""
    X = jnp.asarray(X)
    X = X if jnp.issubdtype(X.dtype, jnp.floating) else X.astype(float)  # float: the precision's
    lam = np.asarray(lambdas, float).astype(X.dtype)  # the λ the compiled program multiplies by
    N, d = X.shape
    FL, GL, J, bias_term, odd, even = (np.asarray(a) for a in _measure(
        tuple(params), X, jnp.asarray(alpha, X.dtype), jnp.asarray(lam)))
    (F, FL), (G, GL) = (FL[0], FL[1:]), (GL[0], GL[1:])
    sv = np.linalg.svd(J, compute_uv=False)  # NumPy's LAPACK: nothing to compile
    u = float(np.finfo(F.dtype).eps)
    K = sum(layer.n_in + layer.n_out + 2 for layer in params)
    scale = float(np.max(np.abs(F)))
    lam_ = lam[:, None, None]
    gap = FL - lam_ * F  # (λ, N, p)
    hom_bound = gamma(K + 3, u) * (GL + lam_ * G)
    euler_bound = gamma(3 * K + d + 2, u) * G
    power = energy(F)

    def rel(x):  # an amplitude relative to the output's scale
        return x / scale if scale > 0 else (0.0 if x == 0 else float("inf"))

    def frac(A):  # an energy relative to <||f||²>
        e = energy(A)
        return e / power if power > 0 else (0.0 if e == 0 else float("inf"))

    return LocalLinear(
        n_inputs=N, lambdas=lam, has_bias=has_bias(params), scale=scale,
        homogeneity_gap=rel(float(np.max(np.abs(gap) / lam_))),
        homogeneity_bound=rel(float(np.max(hom_bound / lam_))), homogeneity_ratio=_ratio(gap, hom_bound),
        euler_residual=rel(float(np.max(np.abs(bias_term)))), euler_bound=rel(float(np.max(euler_bound))),
        euler_ratio=_ratio(bias_term, euler_bound), bias_term=bias_term, bias_fraction=frac(bias_term),
        jacobians=J, singular_values=sv, effective_rank=effective_rank(sv),
        participation_ratio=participation_ratio(sv), frobenius_dimension=np.sum(sv**2, axis=-1),
        odd_fraction=frac(odd), even_fraction=frac(even))
