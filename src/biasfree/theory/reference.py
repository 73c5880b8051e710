"""Reference learning curves for any inputs: exact where possible, integrated otherwise (§3.5).

A :class:`Curve` records what was predicted and *which reference* produced it:

- ``"riccati"`` — exact closed form (:mod:`.riccati`): two layers, whitened inputs
  (``XᵀX/N = I``), balanced init (aligned or not). Covers the logistic modes of §3.1.
- ``"ode"`` — the small equivalent linear network integrated numerically by
  ``scipy.integrate.solve_ivp`` (DOP853) from the data's second moments alone:
  any depth, any input covariance, any init, weight decay.

Both work on the *linear twin*: a two-layer leaky net (slope α, c = (1 + α)/2) is
replaced by ``√c (W_1, W_2)`` run to time ``c t`` with decay ``λ/c`` (THEORY.md §2.4,
§2.7). That step is exact only while the leaky net's even part is zero on the data
(pair or rank-one zero-even init, symmetric data); :func:`reference_curve` measures
the even part at init and says so in ``Curve.note``.

The linear net's gradient flow uses only ``Σ_xx = XᵀX/N``, ``Σ_yx = YᵀX/N`` and
``tr Σ_yy``: with ``P = W_L ⋯ W_1`` and ``G = P Σ_xx - Σ_yx``,

    L(P) = ½ tr Σ_yy - tr(P Σ_xy) + ½ tr(P Σ_xx Pᵀ),
    dW_l/dt = -(W_L ⋯ W_{l+1})ᵀ G (W_{l-1} ⋯ W_1)ᵀ - λ W_l.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

from ..nets import Params, even_part, has_bias
from .inits import imbalance
from .leaky import leaky_decay_to_linear, leaky_time_to_linear, leaky_to_linear
from .modes import _check_decay, is_whitened
from .riccati import unaligned_product

REFERENCES = ("riccati", "ode")


@dataclass(frozen=True)
class Curve:
    """A predicted learning curve on the gradient-flow time axis of the simulated net.

    ``t`` (T,) times, ``loss`` (T,) training loss, ``beta`` (T, d, p) the effective
    linear map ``β_eff(t)`` (``f(x) = β_effᵀ x``), ``reference`` which reference made it
    (one of :data:`REFERENCES`), ``alpha`` the slope of the predicted net, ``note`` the
    assumptions it rests on, in words.
    """

    t: np.ndarray
    loss: np.ndarray
    beta: np.ndarray
    reference: str
    alpha: float = 1.0
    note: str = ""

    def __post_init__(self):
        if self.reference not in REFERENCES:
            raise ValueError(f"reference={self.reference!r}: choose one of {', '.join(REFERENCES)}")


def moment_loss(P, Sxx, Syx, y_power: float):
    """``L = ½ y_power - tr(P Σ_xy) + ½ tr(P Σ_xx Pᵀ)`` for products ``P`` (..., p, d),
    ``Sxx`` = Σ_xx (d, d), ``Syx`` = Σ_yx (p, d), ``y_power`` = tr Σ_yy: the mean half
    squared error of the linear map P on the data these moments came from."""
    P = np.asarray(P, dtype=float)
    fit = np.einsum("...pd,de,...pe->...", P, Sxx, P)
    return 0.5 * float(y_power) - np.einsum("...pd,pd->...", P, Syx) + 0.5 * fit


def _product(Ws):
    P = Ws[0]
    for W in Ws[1:]:
        P = W @ P
    return P


def linear_net_ode(params: Params, Sxx, Syx, t, *, weight_decay: float = 0.0,
                   rtol: float = 1e-11, atol: float = 1e-14) -> np.ndarray:
    """Products ``P(t) = W_L(t) ⋯ W_1(t)`` (T, p, d) of a bias-free *linear* net under
    gradient flow ``dW_l/dt = -(W_L⋯W_{l+1})ᵀ (P Σ_xx - Σ_yx) (W_{l-1}⋯W_1)ᵀ - λ W_l``.

    ``params`` the initial net (any depth), ``Sxx`` = Σ_xx (d, d), ``Syx`` = Σ_yx (p, d),
    ``t`` times (T,) ≥ 0, ``weight_decay`` λ, ``rtol``/``atol`` of
    ``scipy.integrate.solve_ivp`` (DOP853).
    """
    if has_bias(params):
        raise ValueError("linear_net_ode integrates bias-free nets; drop the biases")
    lam = _check_decay(weight_decay)
    Sxx, Syx = np.asarray(Sxx, dtype=float), np.asarray(Syx, dtype=float)
    shapes = [np.shape(layer.W) for layer in params]
    sizes = [int(np.prod(s)) for s in shapes]
    splits = np.cumsum(sizes)[:-1]

    def unpack(theta):
        return [c.reshape(s) for c, s in zip(np.split(theta, splits), shapes, strict=True)]

    def field(_, theta):
        Ws = unpack(theta)
        G = _product(Ws) @ Sxx - Syx
        grads = []
        for l in range(len(Ws)):
            A = _product(Ws[l + 1:]) if l + 1 < len(Ws) else np.eye(G.shape[0])
            B = _product(Ws[:l]) if l else np.eye(G.shape[1])
            grads.append((-(A.T @ G @ B.T) - lam * Ws[l]).ravel())
        return np.concatenate(grads)

    t = np.atleast_1d(np.asarray(t, dtype=float))
    if np.any(t < 0) or not np.all(np.isfinite(t)):
        raise ValueError("times t must be finite and >= 0")
    ts, inverse = np.unique(t, return_inverse=True)
    theta0 = np.concatenate([np.asarray(layer.W, float).ravel() for layer in params])
    if ts[-1] == 0.0:
        Ps = _product(unpack(theta0))[None]
    else:
        sol = solve_ivp(field, (0.0, ts[-1]), theta0, method="DOP853", t_eval=ts, rtol=rtol,
                        atol=atol)
        if not sol.success:
            raise RuntimeError(f"solve_ivp failed: {sol.message}; loosen rtol/atol")
        Ps = np.stack([_product(unpack(sol.y[:, j])) for j in range(ts.size)])
    return Ps[inverse.ravel()]


def reference_curve(params: Params, X, Y, t, *, alpha=1.0, weight_decay: float = 0.0,
                    method: str = "auto") -> Curve:
    """Predicted gradient-flow curve of ``params`` (slope ``alpha``) on data ``X`` (N, d),
    ``Y`` (N, p) at times ``t`` (T,), weight decay λ = ``weight_decay``.

    ``method``: ``"riccati"`` (exact; needs two layers, whitened X, balanced init),
    ``"ode"`` (numerical, always applicable) or ``"auto"`` (riccati when it applies, else
    ode). Leaky nets (α < 1, two layers) are mapped to their linear twin
    ``√c (W_1, W_2)``, time ``c t``, decay ``λ/c`` first (exact iff ``f_even ≡ 0``).
    The returned :class:`Curve` says which reference was used and on what assumptions.
    """
    if method not in ("auto",) + REFERENCES:
        raise ValueError(f"method={method!r}: choose auto, {', '.join(REFERENCES)}")
    X, Y = np.asarray(X, dtype=float), np.asarray(Y, dtype=float)
    t = np.atleast_1d(np.asarray(t, dtype=float))
    notes = []
    lin, t_lin, lam = params, t, _check_decay(weight_decay)
    if float(alpha) != 1.0:
        lin = leaky_to_linear(params, alpha)
        t_lin = leaky_time_to_linear(t, alpha)
        lam = float(leaky_decay_to_linear(weight_decay, alpha))
        e0 = float(np.mean(np.sum(np.asarray(even_part(params, X, alpha)) ** 2, axis=1)))
        notes.append(f"leaky net mapped to its linear twin (c = {(1 + float(alpha)) / 2:g}); "
                     + ("exact: even part zero at init" if e0 <= 1e-24 else
                        f"APPROXIMATE: even-part energy {e0:.3g} at init (THEORY.md §2.6)"))
    N = X.shape[0]
    Sxx, Syx, y_power = X.T @ X / N, Y.T @ X / N, float(np.sum(Y**2) / N)
    riccati_ok = len(lin) == 2 and is_whitened(X) and imbalance(lin) <= 1e-10
    if method == "riccati" and not riccati_ok:
        raise ValueError("the Riccati reference needs two layers, whitened inputs (XᵀX/N = I) and "
                         "a balanced init; use method='ode' (or whiten X, see biasfree.whiten)")
    if method == "riccati" or (method == "auto" and riccati_ok):
        P = unaligned_product(t_lin, lin, Syx, weight_decay=lam)
        ref = "riccati"
        notes.append("exact closed form: whitened inputs, balanced two-layer init")
    else:
        P = linear_net_ode(lin, Sxx, Syx, t_lin, weight_decay=lam)
        ref = "ode"
        notes.append("numerical: linear-network gradient flow integrated by solve_ivp (DOP853)")
    loss = moment_loss(P, Sxx, Syx, y_power)
    return Curve(t=t, loss=np.asarray(loss), beta=np.transpose(P, (0, 2, 1)), reference=ref,
                 alpha=float(alpha), note="; ".join(notes))
