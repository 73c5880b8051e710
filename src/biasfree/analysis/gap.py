"""One gap between a model and its linear twin, for every model kind (dense, conv, attention),
measured or predicted, and its normaliser named wherever it is shown (docs/verdict.md,
docs/theory.md §6.3):

    ``D = max_k |L_k − L̃_k| / L_ref``,      L_ref = max(L(θ₀), ½<‖y‖²>),

θ₀ the weights training starts from (the given net, or ``init=``), ``L_k``/``L̃_k`` the net's and
its twin's loss (half mean squared error) at step k of a measured run (every step, whatever is
recorded); the exact t = 0 term ``|L(θ₀) − L̃(θ₀)|/L_ref`` and the predicted growth term use the
same L_ref. ½<‖y‖²> is the zero function's loss: L(0) of a small init, which has learned nothing
yet, and the scale of a trained net, whose own loss may be at round-off (dividing by that would
turn round-off into a gap of order 1).
"""

from __future__ import annotations

import numpy as np

from ..expressivity.decomposition import energy

NAME = "max(L(θ₀), ½<‖y‖²>)"
"""The normaliser's name, as every evidence line writes it."""


def reference(loss0: float, zero_loss: float) -> float:
    """``L_ref = max(L(θ₀), ½<‖y‖²>)`` from ``loss0`` = L(θ₀), the loss of the weights training starts
    from, and ``zero_loss`` = ½<‖y‖²> (:func:`zero_loss`), the zero function's (module doc)."""
    return max(float(loss0), float(zero_loss), 1e-300)


def zero_loss(Y) -> float:
    """½<‖y‖²>: the loss of the zero function on targets ``Y`` (N, p)."""
    return 0.5 * energy(np.asarray(Y, float))


def relative(loss, twin_loss, ref: float) -> tuple[float, int]:
    """``(max_k |L_k − L̃_k| / ref, the index k of the maximum)`` over the given losses (R,)."""
    d = np.abs(np.asarray(loss, float) - np.asarray(twin_loss, float))
    k = int(np.argmax(d))
    return float(d[k]) / ref, k


def of(ref: float) -> str:
    """The normaliser named with its value, for an evidence line: ``"of max(L(θ₀), ½<‖y‖²>) = 0.58"``."""
    return f"of {NAME} = {ref:.3g}"
