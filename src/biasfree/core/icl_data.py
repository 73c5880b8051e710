"""In-context linear regression (docs/theory.md §10.1): sequences of N labelled tokens and a
query, a fresh task per sequence, and their label-mirrored copies.

Sequence s draws a task ``w_s ~ N(0, I_D)``, N context inputs and a query ``x ~ N(0, Λ)``
(``cov`` = Λ, identity by default), labels ``y_n = w_sᵀ x_n`` and target ``y_q = w_sᵀ x_q``.
Stored flat as :mod:`biasfree.core.attention` reads it: one row ``(x_1, y_1, …, x_N, y_N, x_q, 0)`` of
(N + 1)(D + 1) numbers, the target in ``Y`` (S, 1).

*Mirror* (``mirror=True``): every sequence is followed, in a second half, by its copy with
every label negated (the task −w_s), target −y_q. Labels enter the attention's prediction in
odd and even powers; on mirrored data the terms of even power average out of every gradient
of the twin's blocks, which keeps the merged model on its linear twin (§10.2).
"""

from __future__ import annotations

import jax
import numpy as np

from .. import _validate as validate
from .data import Dataset, check_covariance
from .draws import normal
from .precision import precise


@precise
def in_context_regression(key, n_seq: int, n_ctx: int, d: int, cov=None, *, mirror: bool = True) -> Dataset:
    """``n_seq`` sequences (module doc) of ``n_ctx`` = N tokens in ``d`` = D dimensions, inputs
    ``N(0, cov)``; with ``mirror`` their label-mirrored copies follow (2 n_seq rows). Returns a
    :class:`~biasfree.core.data.Dataset` with ``X`` (S, (N+1)(D+1)) and ``Y`` (S, 1)."""
    validate.key(key)
    n_seq, n_ctx, d = (validate.integer(k, v, 1) for k, v in (("n_seq", n_seq), ("n_ctx", n_ctx), ("d", d)))
    validate.flag("mirror", mirror)
    kw, kx = jax.random.split(key)
    w = np.asarray(normal(kw, (n_seq, d)))  # the shared draws (biasfree.core.draws): no program per shape
    x = np.asarray(normal(kx, (n_seq, n_ctx + 1, d)))
    if cov is not None:
        x = x @ np.linalg.cholesky(np.asarray(check_covariance(cov, d), dtype=x.dtype)).T
    y = np.einsum("snd,sd->sn", x, w)
    labels = y.copy()
    labels[:, -1] = 0.0
    X = np.concatenate([x, labels[..., None]], axis=-1).reshape(n_seq, -1)
    Y = y[:, -1:]
    if mirror:
        X = np.concatenate([X, negate_labels(X, n_ctx)])
        Y = np.concatenate([Y, -Y])
    return Dataset(X, Y, mirror=False)


def negate_labels(X, n_ctx: int) -> np.ndarray:
    """The sequences with every label slot negated (exactly: a sign flip)."""
    E = np.array(X).reshape(X.shape[0], n_ctx + 1, -1)
    E[..., -1] *= -1.0
    return E.reshape(X.shape)


@precise
def cubic_features(X, n_ctx: int):
    """The merged model's feature of each flat sequence (S, (N+1)(D+1)) (docs/theory.md §10.2):
    ``z = vec((1/N) Σ_n y_n x_n x_qᵀ)``, shape (S, D²), entry ``i·D + j`` = ``(1/N) Σ_n y_n
    x_{n,i} x_{q,j}``. Computed once per sequence, it is all the twin reads."""
    n_ctx = validate.integer("n_ctx", n_ctx, 1)
    X = validate.finite_array("X", X, ndim=2)
    if np.shape(X)[1] % (n_ctx + 1):
        raise ValueError(f"X has {np.shape(X)[1]} columns, not a multiple of n_ctx + 1 = {n_ctx + 1} tokens")
    return _cubic_features(X, n_ctx)


def _cubic_features(X, n_ctx: int, per_token: float | None = None) -> np.ndarray:
    """:func:`cubic_features` unchecked, in NumPy on the host (no program per shape: it runs
    once per data set); ``per_token`` replaces 1/N (a test's wrong feature)."""
    X = np.asarray(X)
    E = X.reshape(X.shape[0], n_ctx + 1, -1)
    C, xq = E[:, :-1], E[:, -1, :-1]
    m = np.einsum("sn,sni->si", C[..., -1], C[..., :-1])
    m = m * (1.0 / n_ctx if per_token is None else per_token)
    return (m[:, :, None] * xq[:, None, :]).reshape(X.shape[0], -1)
