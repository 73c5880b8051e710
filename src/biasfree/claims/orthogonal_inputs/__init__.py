"""Two-layer ReLU on orthogonal inputs and their negatives, with odd *and* even targets.

The setting of Boursier et al. (2022), made symmetric: n orthonormal directions q_i
(columns of a random orthogonal Q, d ≥ n), inputs ``±ρ q_i`` with ``ρ = √n`` (so
``<x xᵀ> = Q Qᵀ``, whitened on the data span), targets y_i at ``+ρ q_i`` and y'_i at
``-ρ q_i``, odd part ``o_i = (y_i - y'_i)/2``, even part ``e_i = (y_i + y'_i)/2``, both
non-zero. N = 2n points, loss ``(1/2N) Σ (y - f)²``, ReLU (α = 0) throughout.

**What the maths gives here [derived].** Each unit k (w_k, v_k) sees pair i only
through ``w_ki = q_iᵀ w_k``: it is active on exactly one of ``±ρ q_i`` (the side of
``sign w_ki``), and gradient flow reads

    dw_ki/dt = v_k (ρ/N) y_i      (w_ki > 0),      dw_ki/dt = -v_k (ρ/N) y'_i   (w_ki < 0),
    dv_k/dt  = (ρ/N) Σ_i (y_i [w_ki]_+ + y'_i [w_ki]_-)                 (targets → residuals).

1. *Early alignment* (f ≈ 0, balanced init ``|v_k| = ||w_k||`` so sign v_k is fixed): in
   ``τ = ∫|v_k| dt`` every coordinate moves at a constant velocity that depends only on
   its side, so w_k(τ) is piecewise linear and its direction tends to a computable
   ``D_k`` (:func:`alignment_directions`): a coordinate grows on its starting side if
   that side's target has the sign of v_k, else crosses to the other side if that
   target has the sign of v_k, else it is stuck at 0. With a pure odd target
   (e = 0) every D_k is ``± β*`` (β* ∝ o, the linear-net picture: rank one); with an
   even part D_k depends on the target signs and on the unit's initial signs.
2. *Independent half-nets.* If every pair has targets of opposite signs (|o_i| > |e_i|),
   all units with v_k > 0 align with the positive-target points ``p_i = s_i ρ q_i``
   (s_i = sign o_i, targets ``t⁺_i = |o_i| + e_i > 0``) and all with v_k < 0 with
   the negative-target points ``-p_i`` (``t⁻_i = e_i - |o_i| < 0``). Active sets are
   then disjoint and fixed, and the ReLU net is *exactly* two independent two-layer
   linear nets, one per half, each with ``Σ_xx = σ² I``, ``σ² = ρ²/N``, ``s± = ρ||t±||/N``:
   the balanced aligned strength obeys ``d(σ²a)/dt = 2 σ²a (s± - σ²a)`` (logistic, rate
   2s±) and GD the exact map ``a ← a (1 + η (ρ/N)(||t±|| - ρ a))²``.
   So the learning is *not* "odd part and even part as independent linear nets": the
   linear twin on the odd target has rate ``2 c s_odd = 2ρ||o||/N`` while the halves
   have ``2ρ||t±||/N``; ``||t⁺||² - ||t⁻||² = 4 Σ_i |o_i| e_i``.
3. *An empty half-net.* A random init whose output weights all share one sign (chance
   2^(1-m) for width m) has no unit for one half: every v_k > 0, say, so
   ``f(x) = Σ_k v_k [w_kᵀx]_+ >= 0`` everywhere and the negative targets t⁻ < 0 can never
   be approached. That half is a linear net with no units, i.e. zero init: ``a = 0`` is a
   fixed point of the logistic (``d(σ²a)/dt = 2σ²a(s - σ²a)`` vanishes there) and of the
   GD map, so its predicted curve is ``ã⁻(t) = 0``: f stays 0 on the points ``-p_i`` and
   the loss keeps ``||t⁻||²/(2N)``. Exactly, ``ã⁻ = (σ²/ρ) Σ_i f(-p_i) t⁻_i/||t⁻|| <= 0`` at
   every step (same-signed terms). The run predicts the zero curve (no rate is fitted for
   that half), checks ``ã <= 0`` for it, records ``units_plus``/``units_minus`` and
   ``empty_halves``, and never raises.

Runs (named members of one :func:`~biasfree.gd_members` call per data set, parameters
kept at every record): ``full`` target from small random balanced init (``random``) and
from the aligned half-net init (``aligned``); ``odd`` target alone from the same random
init, with its library-built linear twin (``√c·init``, step ηc, c = 1/2); ``mixed`` target
(some pairs with same-sign targets) from two random inits (``random``, ``random_b``), for
the general alignment rule. Data, inits and theory: :func:`biasfree.core.data.orthogonal_data`,
:func:`biasfree.core.nets.balanced_units`, :mod:`biasfree.theory.orthogonal`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..base import Experiment

ALIGN = {"full": "full", "odd": "odd", "mixed": "mixed", "mixed_b": "mixed"}
"""The runs of :func:`_runs` whose units' alignment is checked, with their data sets."""


@dataclass(frozen=True)
class Config:
    """``n`` orthogonal directions (2n points), ``d`` ≥ n input size, ``width`` units,
    ``scale`` std of the random init's input weights (output ``|v_k| = ||w_k||``),
    ``even_ratio`` κ < 1: ``e_i = κ |o_i| u_i`` with u_i from -1/2 to 1 in the rank
    order of |o_i| (so |e_i| < |o_i|, the half-net directions differ from β*, and by
    Chebyshev's sum inequality ``Σ|o_i|e_i ≥ κ/4 Σ o_i² > 0``: the positive half is faster),
    ``lr`` GD step η, ``t_max`` run length (gradient-flow time), ``n_records`` records
    (GD runs in that many segments), ``early`` the early phase: records where
    ``max |f| <= early · min |y|``."""

    n: int = 12
    d: int = 16
    width: int = 200
    scale: float = 1e-4
    even_ratio: float = 0.6
    lr: float = 0.02
    t_max: float = 60.0
    n_records: int = 241
    early: float = 0.1

    def __post_init__(self):
        if self.n < 2 or self.d < self.n:
            raise ValueError(f"need n >= 2 orthogonal directions in d >= n dimensions, got "
                             f"n={self.n}, d={self.d}")
        if self.width < 2:
            raise ValueError(f"width={self.width} must be >= 2")
        if not 0 < self.even_ratio < 1:
            raise ValueError(f"even_ratio={self.even_ratio} must lie in (0, 1) so that both "
                             "parts are non-zero and each pair's targets have opposite signs")
        if not (self.scale > 0 and self.lr > 0 and self.t_max > 0 and 0 < self.early < 1):
            raise ValueError("scale, lr, t_max must be > 0 and early in (0, 1)")
        if self.n_records < 3:
            raise ValueError("n_records must be >= 3")


PRESETS = {
    "tiny": Config(n=6, d=8, width=40, t_max=40.0, n_records=121),
    "paper": Config(),
}

from . import run as _run  # noqa: E402  (run.py reads Config and the names above)

EXPERIMENT = Experiment(
    name="orthogonal-inputs",
    claim="On orthogonal inputs and their negatives with odd and even targets, ReLU units "
          "align to derived directions and the net learns as two independent linear half-nets, "
          "not as linear nets for the odd and even parts.",
    run=_run.run, config=Config, presets=PRESETS,
    paper_claim=("Claim 4 (consequences): known ReLU behaviour on orthogonal inputs (early alignment, "
                 "Boursier et al. 2022) is explained by independent linear half-nets."))
