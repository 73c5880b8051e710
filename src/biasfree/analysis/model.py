"""A model read from elsewhere: the :class:`Model` every adapter returns, and its refusals.

A :class:`Model` holds the parameters in this package's convention (a tuple of layers of
the net family: :class:`~biasfree.core.layers.Layer` ``W_l`` (n_l, n_{l-1}) as in
PyTorch's ``Linear.weight``, :class:`~biasfree.core.conv.Conv`,
:class:`~biasfree.core.conv.PooledDense`) and the leaky slope α read from the model:

    f(x) = A_L σ_α(A_{L-1} σ_α( ... σ_α(A_1 x))),   σ_α(z) = max(z, α z),

A_l each layer's linear map. Anything outside this family is refused with an
:class:`UnsupportedModelError` naming the layer (:func:`refuse`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import _validate as validate
from ..core.layers import Params, check_net
from ..core.nets import forward
from ..core.precision import precise

SUPPORTED = ("bias-free linear layers (Linear; Conv1d/Conv2d, stride 1) with ReLU, LeakyReLU(negative_slope "
             "in [0, 1]) or no activation between them, one slope for the whole net")
"""What the adapters read, as every refusal states it."""


class UnsupportedModelError(ValueError):
    """The model lies outside the bias-free (leaky) ReLU family this package analyses."""


@dataclass(frozen=True)
class Model:
    """A bias-free (leaky) ReLU network: ``params`` (tuple of layers), slope ``alpha``
    (None when the source did not say), ``source`` where it came from, ``names`` the
    original name of each weight, and ``origin`` the live module it was read from (torch or
    equinox; None for a file, a state dict or params), which ``analyse`` runs on the data to
    verify the reading (:mod:`~biasfree.analysis.verify`). ``model(X)`` is
    ``forward(params, X, alpha)`` (X flat, (N, n_in); a conv net's inputs channel-major,
    torch's ``Flatten`` order)."""

    params: Params
    alpha: float | None
    source: str = ""
    names: tuple[str, ...] = ()
    origin: object = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        check_net(self.params)
        if self.alpha is not None:
            validate.slope(self.alpha)

    @precise
    def __call__(self, X):
        if self.alpha is None:
            raise ValueError(f"the slope α of {self.source or 'this model'} is unknown: "
                             "use dataclasses.replace(model, alpha=...)")
        return forward(self.params, np.asarray(X, dtype=float), self.alpha)


def refuse(where: str, what: str, fix: str = "") -> UnsupportedModelError:
    """The error for ``where`` (the layer) being ``what``, with the family and ``fix``."""
    msg = f"{where}: {what}. Supported: {SUPPORTED}."
    return UnsupportedModelError(msg + (f" {fix}" if fix else ""))


def one_slope(slopes: list[tuple[str, float]], source: str) -> float:
    """The one slope α of ``slopes`` ((where, α) per hidden layer; none: α = 1), refusing
    mixed slopes and α outside [0, 1]."""
    values = sorted({a for _, a in slopes})
    if len(values) > 1:
        listing = ", ".join(f"{w} -> α = {a:g}" for w, a in slopes)
        raise refuse(source, f"mixed slopes ({listing})",
                     "Every hidden layer must use the same slope α.")
    alpha = values[0] if values else 1.0
    if not 0.0 <= alpha <= 1.0:
        raise refuse(source, f"slope α = {alpha:g} is outside [0, 1]")
    return float(alpha)
