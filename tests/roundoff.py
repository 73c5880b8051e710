"""Round-off bounds for the tests' float64 comparisons, so that a bound holds on any
x86-64 CPU and BLAS (the kernels differ in blocking, FMA use and summation order).

The standard forward error of a computed dot product of length k (Higham, *Accuracy and
Stability of Numerical Algorithms*, §3.1) is ``|fl(xᵀy) - xᵀy| <= γ_k |x|ᵀ|y|`` with
``γ_k = k ε / (1 - k ε)``, whatever the order of the sum: two computations of the same
product by different kernels differ by at most twice that. ``gamma`` and ``chain_length``
live in :mod:`biasfree.core.precision` (the package's own round-off bounds use them too).
"""

import numpy as np

from biasfree.core.precision import chain_length, gamma  # the tests import both from here

EPS = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)  # for the bounds of float32 runs (``eps=EPS32``)


def matmul_gap(A, B) -> np.ndarray:
    """Entrywise bound on the difference between two computations of ``A @ B`` by any two
    kernels: ``2 γ_k |A| |B|`` (k = the inner dimension)."""
    A, B = np.abs(np.asarray(A, dtype=float)), np.abs(np.asarray(B, dtype=float))
    return 2 * gamma(A.shape[-1]) * (A @ B)


def whiten_gap(X, r=None) -> float:
    """Bound on ``max|MᵀΣ̂M − I_r|`` for a whitening map M computed from ``Σ = XᵀX/N`` by
    an eigendecomposition, r the kept directions (all by default). The errors that M
    turns into relative ones are all of size ``ε · m`` with ``m = || |X|ᵀ|X|/N ||₂ >= λ_1``:
    forming Σ (``γ_N m``), the eigensolver's backward error (``d ε m``, LAPACK's
    ``p(d) ε ||Σ||``), and checking ``(XM)ᵀ(XM)/N`` (``γ_N`` of its magnitudes, ``<= m/λ_r``);
    whitening divides each by λ_r: ``4 γ_{N+d} m / λ_r``, the condition number
    ``m/λ_r ≈ κ`` of the kept block times the longest sum. A wrong map is off by O(1)."""
    X = np.asarray(X, dtype=float)
    N, d = X.shape
    lam = np.linalg.eigvalsh(X.T @ X / N)[::-1]
    m = np.linalg.norm(np.abs(X).T @ np.abs(X) / N, 2)
    return 4 * gamma(N + d) * m / lam[(d if r is None else r) - 1]


def lstsq_residual_gap(X, F) -> float:
    """How far the computed least-squares residual ``F − Xβ̂`` (``np.linalg.lstsq``) can be
    from the exact one, in Frobenius norm: lstsq is backward stable (Higham §20: the exact
    fit of X + ΔX, F + ΔF with ||ΔX|| <= γ_{Nd}||X||), so ``4γ_{Nd}(||X||₂||β̂|| + ||F||)``.
    An exact fit (F = XB) leaves at most this; a target the fit misses leaves O(||F||)."""
    N, d = X.shape
    F = np.asarray(F, dtype=float).reshape(N, -1)
    beta = np.linalg.lstsq(X, F, rcond=None)[0]
    return 4 * gamma(N * d) * (np.linalg.norm(X, 2) * np.linalg.norm(beta) + np.linalg.norm(F))


def forward_gap(Ws, X, bs=None, eps: float = EPS) -> np.ndarray:
    """Entrywise bound on the difference between two evaluations of the leaky-ReLU net
    ``f(x) = W_L σ(… σ(W_1 x + b_1) …) + b_L`` (slope α in [0, 1]) on the rows of ``X``
    by kernels that sum in different orders (or on ``-X`` and negated: exact).

    Layer by layer, with ``|h|`` the entrywise bound ``|h_l| <= |W_l| |h_{l-1}| + |b_l|``
    (``|σ(z)| <= |z|``) and ``e_l`` the bound on the difference of the pre-activations:
    ``e_l = |W_l| e_{l-1} + 2 γ_k |W_l| |h_{l-1}|`` (k = fan-in, + 1 with a bias), and
    σ, 1-Lipschitz, passes ``e_l`` on with one more rounding, ``ε |z|``."""
    h = np.abs(np.asarray(X, dtype=float))
    e = np.zeros_like(h)
    for i, W in enumerate(Ws):
        A = np.abs(np.asarray(W, dtype=float))
        mag = h @ A.T
        k = A.shape[1]
        if bs is not None:
            mag, k = mag + np.abs(np.asarray(bs[i], dtype=float)), k + 1
        e = e @ A.T + 2 * gamma(k, eps) * mag
        if i < len(Ws) - 1:
            e, h = e + eps * mag, mag
    return e


def flow_error_bound(traj, rtol: float, atol: float) -> float:
    """Crude bound on each parameter's global error in an adaptive gradient-flow solve
    (not round-off: the solver's own error): each of the n accepted steps commits a local
    error <= rtol·|θ| + atol per component (the controller's RMS test), and local errors
    add up at most linearly: n (rtol max|θ| + atol), max|θ| over the final parameters and,
    when kept, every record's."""
    import jax

    n = int(traj.stats["accepted"])
    trees = [traj.params] + ([traj.path] if traj.path is not None else [])
    theta = max(float(np.max(np.abs(np.asarray(x)))) for t in trees for x in jax.tree_util.tree_leaves(t))
    return n * (rtol * theta + atol)


def abs_twin(params):
    """The net with every weight and bias replaced by its absolute value."""
    import jax

    return jax.tree_util.tree_map(np.abs, params)


def _grad(objective):
    """``∇J`` as one compiled program (per shape), kept across calls, not dozens of eager
    operations compiled one by one."""
    import jax

    if objective not in _GRADS:
        _GRADS[objective] = jax.jit(jax.grad(objective))
    return _GRADS[objective]


_GRADS = {}


def grad_gap(params, X, Y, weight_decay: float = 0.0, factor: float = 1.0):
    """Leaf by leaf, a bound on the gap between two computations of ``∇J(θ)`` (mean-squared
    loss, any slope α, weight decay λ) that sum in different orders: ``2 γ_k · factor ·``
    the gradient evaluated on absolute values (Higham §3.1). That evaluation is the gradient of
    the *linear* net (α = 1: σ' → 1, |σ(z)| <= |z|) at |θ| on |X| with targets −|Y| (so the
    residual is |f| + |y|): every term of it is non-negative and dominates the matching term
    of the true gradient. ``factor`` covers a formula with larger intermediates (the
    mirrored path's ``σ(-z) = σ(z) − (1+α)z``: magnitudes up to (2+α)|z| <= 3|z|, factor 3)."""
    import jax

    from biasfree.dynamics.losses import objective

    X, Y = np.abs(np.asarray(X, dtype=float)), -np.abs(np.asarray(Y, dtype=float))
    g = _grad(objective)(abs_twin(params), X, Y, 1.0, weight_decay)
    c = 2 * gamma(chain_length(params, X.shape[0])) * factor
    return jax.tree_util.tree_map(lambda a: c * np.asarray(a), g)


def trajectory_gap(run, params, steps: int, k: int, factor: float = 1.0, rel: float = 1e-7,
                   eps: float = EPS):
    """Leaf by leaf, a first-order bound on the gap between two computations of a
    ``steps``-step run ``run(params) -> pytree of observables`` that differ only in the
    order of their sums: each step commits a relative error <= 2γ_k on θ (its update's
    sums have at most k terms; less, since the step η∇J is small against θ), and an error
    committed at any step reaches the observables amplified by at most the run's measured
    sensitivity to a relative change ``rel`` of the init (random signs, one more run):
    ``steps · 2γ_k · |run(θ₀(1 ± rel)) − run(θ₀)| / rel``, plus ``2γ_k |run(θ₀)|`` for the
    final evaluation of each observable. It uses measured sensitivity, not a worst case over
    directions: a first-order estimate, written out, with nothing in it to tune. ``factor``
    as in :func:`grad_gap` (3 for the mirrored path); ``eps`` the run's machine epsilon
    (``run`` itself may compute in float64: the sensitivity is a property of the map)."""
    import jax

    rng = np.random.default_rng(0)
    moved = jax.tree_util.tree_map(
        lambda a: np.asarray(a) * (1 + rel * rng.choice([-1.0, 1.0], size=np.shape(a))), params)
    base, pert = run(params), run(moved)
    g = 2 * gamma(k, eps) * factor
    return jax.tree_util.tree_map(
        lambda a, b: steps * g * np.abs(np.asarray(b) - np.asarray(a)) / rel + g * np.abs(np.asarray(a)),
        base, pert)


def loss_eval_gap(path, X, Y, loss, k: int, eps: float = EPS) -> np.ndarray:
    """Per record j, a bound on the gap between two evaluations of the mean-squared loss
    ``L_j = ½⟨||f(x) − y||²⟩`` at the same θ_j (``path``: parameters with a leading record
    axis, ``loss`` the L_j): the residual's error is <= γ_k (|f|_abs + |y|) entrywise
    (|f|_abs the linear net on absolute values), and ``|ΔL| <= ⟨|r||Δr|⟩ <=
    √(2L)·rms(Δr)`` (Cauchy–Schwarz): ``2γ_k √(2 L_j) rms(|f|_abs + |y|)``. Unlike a
    relative bound it stays right when the fit is near exact (r small, f and y not)."""
    import jax

    import biasfree as bf

    X, Y = np.abs(np.asarray(X, dtype=float)), np.abs(np.asarray(Y, dtype=float))
    loss = np.asarray(loss, dtype=float)
    out = np.empty_like(loss)
    for j in range(loss.shape[0]):
        theta = abs_twin(jax.tree_util.tree_map(lambda a, j=j: np.asarray(a)[j], path))
        rms = np.sqrt(np.mean(np.sum((np.asarray(bf.forward(theta, X, 1.0)) + Y) ** 2, axis=1)))
        out[j] = 2 * gamma(k, eps) * np.sqrt(2 * loss[j]) * rms
    return out
