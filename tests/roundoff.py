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
