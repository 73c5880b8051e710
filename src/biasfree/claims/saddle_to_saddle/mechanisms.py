"""Width or spectrum: the trainings :func:`~biasfree.theory.mechanisms.plateau_count_experiment`
counts plateaus on, for the saddle-to-saddle architectures beyond the dense nets (docs/theory.md
§11.5.4). Each factory returns ``run(width, spectrum) -> (t, loss)``: one net trained by
:func:`~biasfree.dynamics.trainer.train` (GD, log-spaced records) on the claim's own task for
that architecture, the data drawn from ``data_seed`` (the same for every width and spectrum: only
the factor varied changes), the init from ``seed`` and the width.

- :func:`linear_conv_run`: ``width`` channels of a kernel of size k = len(spectrum), average
  pooling, on :func:`~.run.linear_conv_task` (whitened mean patch, target singular values
  ``spectrum``); Gaussian init, every weight of std ``init``.
- :func:`relu_conv_run`: the same net at α = 0 on :func:`~.run.relu_conv_task`, ``spectrum`` =
  (c₊, c₋) the slopes on positive and negative spikes.
- :func:`attention_run`: linear attention on in-context regression with Λ = diag(``spectrum``)
  (:func:`~biasfree.core.icl_data.in_context_regression`), ``width`` heads. ``kind="merged"`` and
  ``kind="separate"`` start from :func:`~biasfree.core.attention.init_attention` (std ``init``,
  the twin's blocks; separate: rank one); ``kind="aligned"`` from the claim's aligned heads
  (:func:`~biasfree.claims.linear_attention.run.aligned_heads`), head h on component h with
  ``γ = κ = ρ = init·ratio^h`` (``ratio = 1``: the claim's equal inits), so ``width`` ≤ D.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from ...core.attention import init_attention
from ...core.data import Dataset
from ...core.icl_data import in_context_regression
from ...dynamics.trainer import train
from ..linear_attention.run import aligned_heads
from .run import conv_net, linear_conv_task, relu_conv_task

Run = Callable[[int, tuple], tuple[np.ndarray, np.ndarray]]


def _curve(net, data: Dataset, alpha: float | None, lr: float, steps: int, records: int):
    r = train(net, data, None, alpha=alpha, lr=lr, steps=steps, n_records=records, spacing="log",
              observables="loss")
    return np.asarray(r.t), np.asarray(r.loss)


def _conv_init(seed: int, width: int, k: int, out: int, init: float):
    rng = np.random.default_rng((seed, width))
    return init * rng.normal(size=(width, k)), init * rng.normal(size=(out, width))


def linear_conv_run(seed: int, *, n: int = 5, n_points: int = 120, init: float = 1e-2, lr: float = 0.1,
                    steps: int = 600, records: int = 150, data_seed: int = 0) -> Run:
    """Linear conv nets (α = 1) of ``width`` channels on inputs of length ``n`` (module doc)."""

    def run(width: int, spectrum) -> tuple[np.ndarray, np.ndarray]:
        s = np.asarray(spectrum, float)
        X, Y, _, _, _ = linear_conv_task(np.random.default_rng(data_seed), n_points, n, s)
        K, V = _conv_init(seed, width, s.size, s.size, init)
        return _curve(conv_net(K, V, n), Dataset(X, Y, mirror=False), 1.0, lr, steps, records)

    return run


def relu_conv_run(seed: int, *, k: int = 2, n: int = 5, n_points: int = 120, init: float = 1e-2,
                  lr: float = 0.1, steps: int = 1500, records: int = 150, data_seed: int = 0) -> Run:
    """ReLU conv nets (α = 0) of ``width`` channels, kernel ``k``, on spikes (module doc)."""

    def run(width: int, spectrum) -> tuple[np.ndarray, np.ndarray]:
        X, Y, _ = relu_conv_task(np.random.default_rng(data_seed), n_points, n, k, spectrum)
        K, V = _conv_init(seed, width, k, 1, init)
        return _curve(conv_net(K, V, n), Dataset(X, Y, mirror=False), 0.0, lr, steps, records)

    return run


def attention_run(kind: str, seed: int = 0, *, init: float = 0.05, ratio: float = 1.0, n_ctx: int = 8,
                  n_seq: int = 2000, lr: float = 0.1, steps: int = 3000, records: int = 300,
                  data_seed: int = 0) -> Run:
    """Linear attention of ``width`` heads, ``kind`` "merged", "separate" or "aligned" (module doc)."""
    if kind not in ("merged", "separate", "aligned"):
        raise ValueError(f"kind={kind!r} is not an attention kind here: choose 'merged', 'separate' or "
                         "'aligned'")

    def run(width: int, spectrum) -> tuple[np.ndarray, np.ndarray]:
        lam = np.asarray(spectrum, float)
        D = lam.size
        if kind == "aligned" and width > D:
            raise ValueError(f"width={width}: aligned heads sit one per component, so at most D = {D} "
                             "(the spectrum's length); give fewer heads or a longer spectrum")
        data = in_context_regression(jax.random.PRNGKey(data_seed), n_seq, n_ctx, D, np.diag(lam))
        if kind == "aligned":
            h = aligned_heads(1.0, D, n_ctx)
            w0 = init * ratio ** np.arange(width)
            scaled = (jax.device_put(np.asarray(a)[:width] * w0[:, None, None]) for a in (h.V, h.K, h.Q))
            net = type(h)(*scaled, n_ctx=n_ctx)
        else:
            net = init_attention(jax.random.PRNGKey(seed * 1000 + width), D, width, n_ctx, init,
                                 rank=None if kind == "merged" else 1)
        return _curve((net,), data, None, lr, steps, records)

    return run


def spread(counts) -> str:
    """``counts`` over seeds (rows) as 'min–max' per entry, for the docs' tables."""
    c = np.asarray(counts)
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in zip(c.min(0), c.max(0), strict=True))


__all__ = ["attention_run", "linear_conv_run", "relu_conv_run", "spread"]
