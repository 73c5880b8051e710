"""Attention's default measurement (docs/verdict.md "Attention models"): where the theory is
silent (a separate key–query model, off-twin blocks that are not zero, sequences that are not
label-mirrored), ``analyse`` trains the model and its twin from the given weights, as it does a
dense net (:mod:`~biasfree.analysis.measured`), by GD on the one schedule rule of
:mod:`~biasfree.analysis.measure_step`:

- the step: :data:`~.measure_step.STEP_FRACTION` of the stability limit, ``η = ¼ · 2/λ̂``, with
  ``λ̂ = max(λ_max(∇²L(θ)), λ_max(∇²L̃(θ̃)))`` measured by Lanczos at the given weights for the
  model on its sequences and for its twin on z (:func:`sharpness`; the twin's time scale is 1:
  same step, §10.2), and at most T/:data:`~.measure_step.MIN_STEPS`;
- the horizon T: three times the slowest mode's half time of the twin's data (the modes of
  ``Σ_yz Σ_zz^{-1/2}``, :func:`~biasfree.analysis.regime.default_t_max`) from the gain
  ``a₀ = ‖W₂W₁‖ = ‖B‖_F`` of the in-context map; a separate model trains as a depth-3 net on z
  (§10.4), so its horizon is the depth-3 one where that is longer. A separate model still to
  grow (a₀ below the strongest mode) has a Hessian ≈ 0 at its saddle, as a deep dense net, so its
  step also takes :func:`~biasfree.analysis.regime.default_lr`'s quarter of the limit of the
  depth-3 curvature bound ``λ_max(Σ_zz) Σ_l Π_{j≠l} ‖W_j‖²`` at the balanced solution
  (factors γ, K, Q);
- its stability checked at the run's end (:func:`~.measure_step.settle`,
  :func:`~.measure_step.certify`), within :data:`~biasfree.analysis.plan.MEASURE_BUDGET`
  seconds or ``time_budget`` if less;
- the early stop :class:`~biasfree.analysis.measured.Decided`: the gap past 0.3% of L_ref says
  "not"; or the run's losses within the bound no later descent can leave (:func:`ends`):
  both losses stay in ``[L*, max(L, L̃)]``, so ``|L_k − L̃_k| ≤ max(|L − L̃|, max(L, L̃) − L*)``.
  L* must bound *both* losses from below, so it is not the twin's floor on z (the attention's
  u, b read more than z) but the least squares on the full cubic feature every linear-attention
  prediction is linear in (:func:`cubic_floor`):

      ``ŷ = Σ_h v_hᵀ [(1/c) Σ_n e_n e_nᵀ] W_h e_q = <T, Φ>``,   ``Φ = (1/c) Σ_n e_n ⊗ e_n ⊗ x_q``,

  (``T = Σ_h v_h ⊗ W_h[:, :D]``; the query's own token in the sum with ``include_query``): no
  attention weights, merged or separate, and no twin (z is Φ's label–x block) fit the data better
  than the best linear map of Φ. Its (D+1)(D+2)/2 · D features (e_n e_nᵀ is symmetric) are
  solved up to :data:`FLOOR_FEATURES`; beyond, no floor, and the bound is the converged one,
  max(L, L̃).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..core.attention import SeparateAttention, norm_divisor
from ..core.attention_twin import in_context_map, merged_to_twin
from ..core.data import Dataset
from ..core.layers import Layer
from ..core.nets import forward
from ..theory.modes import data_modes
from . import measure_step
from . import regime as rg
from .stationary import Stationarity, gamma

FLOOR_FEATURES = 1000
"""Features of Φ up to which :func:`cubic_floor` is solved (D ≤ 11): a least-squares fit of S
sequences costs S F² flops."""


def cubic_features(X, layer) -> np.ndarray:
    """``Φ = (1/c) Σ_n sym(e_n e_nᵀ) ⊗ x_q`` (S, (D+1)(D+2)/2 · D) of flat sequences ``X`` for
    ``layer`` (its N, c and ``include_query``; module doc), the upper triangle of e_n e_nᵀ."""
    N, D = layer.n_ctx, layer.d
    E = np.asarray(X, float).reshape(len(X), N + 1, D + 1)
    C = E if layer.include_query else E[:, :-1]
    iu = np.triu_indices(D + 1)
    pairs = np.einsum("sni,snj->sij", C, C)[:, iu[0], iu[1]] / norm_divisor(layer.norm, N)
    return (pairs[:, :, None] * E[:, -1, None, :D]).reshape(len(X), -1)


def cubic_floor(X, Y, layer) -> tuple[float, float]:
    """``(L*, its round-off)``: the least loss any attention weights (or the twin) reach on the
    sequences, ½<(y − Φβ)²> at the least-squares β of :func:`cubic_features` (module doc), and
    the bound ``γ_k (L* + √(2L*)(rms Φβ + rms y))`` on its computed value (a least-squares
    residual is a minimum, first-order insensitive to β's error; backward stable, data
    perturbed by γ_k relative, k = S + F; as :func:`~biasfree.analysis.stationary.floor_tolerance`;
    LAPACK's complete orthogonal factorisation, ``gelsy``); NaN for both beyond
    :data:`FLOOR_FEATURES`."""
    F = (layer.d + 1) * (layer.d + 2) // 2 * layer.d
    if F > FLOOR_FEATURES:
        return float("nan"), float("nan")
    P, Y = cubic_features(X, layer), np.asarray(Y, float)
    fit = P @ scipy.linalg.lstsq(P, Y, lapack_driver="gelsy", check_finite=False)[0]  # pivoted QR: 5x gelsd
    floor = 0.5 * float(np.mean(np.sum((Y - fit) ** 2, axis=1)))
    rms_fit, rms_y = (float(np.sqrt(np.mean(np.sum(A**2, axis=1)))) for A in (fit, Y))
    return floor, gamma(len(X) + F) * (floor + np.sqrt(2 * floor) * (rms_fit + rms_y))


def _loss(F, Y) -> float:
    return 0.5 * float(np.mean(np.sum((np.asarray(Y) - np.asarray(F)) ** 2, axis=1)))


def ends(X, Y, Z, floor: float, floor_tol: float, ref: float, n_terms: int):
    """``(p, q) -> Stationarity`` of a run's model ``p`` (a one-layer tuple) and twin ``q`` on the
    sequences ``X`` and their features ``Z``, with the floor L* of :func:`cubic_floor` (module
    doc; ``floor_tol`` its round-off, loss units) and ``ref`` = ½<y_q²>. No gradient test here
    (stationary is never claimed): the bound is the floor's, ``max(|L − L̃|, max(L, L̃) − L*)``
    plus the round-off of the two losses and of L* (each loss a mean of S squares of predictions
    summed over ``n_terms`` products: γ_{S + n_terms} L), or the converged max(L, L̃) without a
    floor."""
    def at(p, q) -> Stationarity:
        L, Lt = _loss(forward(tuple(p), X, 0.0), Y), _loss(forward(tuple(q), Z, 1.0), Y)
        tol = (floor_tol + gamma(len(X) + n_terms) * (L + Lt)) / ref
        return Stationarity(float("inf"), 0.0, float("inf"), 0.0, (L - floor) / ref, tol, L, Lt, floor, ref)
    return at


def sharpness(layer, twin, ds: Dataset, zd: Dataset) -> float:
    """``λ̂ = max(λ_max(∇²L(θ)), λ_max(∇²L̃(θ̃)))``: the model ``layer`` on its sequences ``ds`` and
    its twin ``twin`` (slope 1, the same step, §10.2) on z ``zd``, each by
    :func:`~.measure_step.sharpness` on :func:`~.measure_step.sample`'s rows."""
    return max(measure_step.sharpness((layer,), measure_step.sample(ds), 0.0),
               measure_step.sharpness(tuple(twin), measure_step.sample(zd), 1.0))


def schedule(layer, ds: Dataset, zd: Dataset, max_steps: int | None = None) -> tuple[float, int, float, str]:
    """The default GD schedule from ``layer`` (module doc): ``(η, K, T, why)``, K = ⌈T/η⌉ steps
    to the horizon T (at most ``max_steps``; None: the budget ends the run), ``why`` the
    horizon's reason in words."""
    Z, Y = np.asarray(zd.X, float), np.asarray(zd.Y, float)
    modes = data_modes(Z, Y, 0.0, whiten=True)
    a0 = float(np.linalg.norm(in_context_map(layer)))
    T, _ = rg.default_t_max(modes, a0, 1.0)
    why = "3 half times of the twin's slowest mode on z (§3.1)"
    separate = isinstance(layer, SeparateAttention)
    if separate:
        T3, _ = rg.default_t_max(modes, a0, 1.0, depth=3)
        if T3 > T:
            T, why = T3, "3 half times of the slowest mode of a depth-3 net on z (a separate model, §10.4)"
    lr = min(measure_step.step(sharpness(layer, merged_to_twin(layer), ds, zd)), T / measure_step.MIN_STEPS)
    if separate and modes.s.size and a0 < modes.s[0]:  # its weights still to grow: the Hessian ≈ 0 at
        lr = min(lr, rg.default_lr(_factors(layer), modes, 1.0))  # the saddle, as a deep dense net's
    need = int(max(1, np.ceil(T / lr)))
    return lr, need if max_steps is None else min(need, max_steps), T, why


def _factors(layer: SeparateAttention) -> tuple[Layer, Layer, Layer]:
    """The separate model's three factors on z as dense layers (Q's x-columns, K's, the values'
    label weights γ), for :func:`~biasfree.analysis.regime.default_lr`'s depth-3 curvature bound."""
    D = layer.d
    Q = np.asarray(layer.Q, float)[..., :D].reshape(-1, D)
    K = np.asarray(layer.K, float)[..., :D].reshape(-1, D)
    g = np.asarray(layer.V, float)[:, D, D][None, :]
    return Layer(Q), Layer(K.T), Layer(g)
