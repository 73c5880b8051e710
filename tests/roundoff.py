"""Round-off bounds for the tests' float64 comparisons, so that a bound holds on any
x86-64 CPU and BLAS (the kernels differ in blocking, FMA use and summation order).

The standard forward error of a computed dot product of length k (Higham, *Accuracy and
Stability of Numerical Algorithms*, §3.1) is ``|fl(xᵀy) - xᵀy| <= γ_k |x|ᵀ|y|`` with
``γ_k = k ε / (1 - k ε)``, whatever the order of the sum: two computations of the same
product by different kernels differ by at most twice that.
"""

import numpy as np

EPS = float(np.finfo(np.float64).eps)


def gamma(k: int) -> float:
    """``γ_k = k ε / (1 - k ε)``: the relative error bound of a sum of k products."""
    return k * EPS / (1 - k * EPS)


def matmul_gap(A, B) -> np.ndarray:
    """Entrywise bound on the difference between two computations of ``A @ B`` by any two
    kernels: ``2 γ_k |A| |B|`` (k = the inner dimension)."""
    A, B = np.abs(np.asarray(A, dtype=float)), np.abs(np.asarray(B, dtype=float))
    return 2 * gamma(A.shape[-1]) * (A @ B)


def forward_gap(Ws, X, bs=None) -> np.ndarray:
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
        e = e @ A.T + 2 * gamma(k) * mag
        if i < len(Ws) - 1:
            e, h = e + EPS * mag, mag
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
