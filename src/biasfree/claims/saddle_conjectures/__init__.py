"""The two open conjectures of Zhang, Saxe & Latham (2025), measured (docs/theory.md §11.8).

1. **ReLU separates between directions** (their Appendix C): two-layer bias-free ReLU nets from a
   small init learn as linear nets do, one plateau per distinct singular value of the data,
   whatever the width. Whitened inputs (``n`` points, d = ``len(top)``), targets ``y = U diag(s) Vᵀx``
   for random rotations U, V (``mirrored``: n/2 points and their negatives); spectrum j has
   ``distinct[j]`` distinct values (the largest ``top[0]`` repeated d − k + 1 times, then
   ``top[1:k]``). At every width of ``widths`` and every spectrum,
   ``n_inits`` ReLU nets and ``n_inits`` linear nets from Gaussian inits of std ``init_scale`` are
   one compiled ensemble, with effective units recorded at every log-spaced record
   (``observables="units"``). Each net's plateaus are counted by
   :func:`~biasfree.theory.staircase.find_plateaus`; the count *follows* the width when it differs
   between widths at some spectrum, the spectrum when it differs between spectra at some width
   (:func:`~.run.follows`), and *matches* the spectrum where it equals 1 + the number of distinct values.
2. **The deep-layer rule** (their §7): whether a layer depends linearly or quadratically on its
   unit weights predicts its separation type. Nets of depth ``depths`` (width ``deep_width``,
   ReLU and linear, init std set so the end-to-end init strength is ``deep_strength`` at every
   depth) on the linear task with spectrum ``top``, and two nets whose first hidden layer is
   quadratic (σ(z) = z², depth 2, and depth 3 with a ReLU layer after it) on ``y = Σ_k s_k x_k²``.
   Per hidden layer: :func:`~biasfree.theory.layer_structure.layer_structure`, the directions and
   units its weight change uses (low rank: spread ≫ 1; sparse: ≈ 1).

Both are **measured, not proved**: the counts, their spread over inits and seeds, and the layer
ratios are metrics. The one check is derived: a *control* linear net per (width, spectrum), from
a balanced init aligned with the data modes (each mode at strength a₀ = m σ²/2, what a Gaussian
init of std σ gives on average), follows each mode's exact GD map
``a_{k+1} = a_k(1 + η(s − a_k))²`` (docs/theory.md §11.5.1), so its plateau count must equal the
count of that exact curve at the same records. Where the exact curve itself shows 1 + k plateaus
(:func:`~.run.resolvable`: the drops are far enough apart for the plateau rule), the plateau count
can tell the two mechanisms apart, and the ReLU and linear counts are compared there only; a larger
init (earlier, closer drops) or coarser records leave fewer such cells (``resolvable_cells``).
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Gt, MinLen, Predicate

from ..base import Experiment, Positive, config, decreasing, increasing

CLAIM = ("Measured, not proved: whether two-layer ReLU nets from small init count one plateau per "
         "distinct singular value of the data (as linear nets do) or per unit (width and init), and "
         "whether a deep net's layers that are linear or quadratic in their unit weights learn "
         "low-rank or sparse weights; a linear control follows its exact GD staircase.")
PAPER_CLAIM = ("Claim of the unifying paper left open, its two conjectures (Zhang, Saxe & Latham, ICLR 2026, "
               "arXiv 2512.20607): ReLU nets "
               "trained from small initialisation separate timescales between directions, as linear nets "
               "do (Appendix C); in a deep net, whether a layer depends linearly or quadratically on its "
               "unit weights predicts which separation it shows (§7).")

_Ints = Annotated[tuple[Annotated[int, Ge(1)], ...], MinLen(2), Predicate(increasing)]
"""At least two whole numbers, each at least 1, strictly increasing (an axis: widths, depths)."""


@config
class Config:
    """``top`` the singular values (decreasing; d = its length), ``distinct`` each spectrum's number
    of distinct values (1..d, increasing), ``widths`` the ReLU/linear widths (increasing), ``n``
    whitened points, ``init_scale`` the Gaussian init std, ``n_inits`` inits per net kind and cell,
    ``lr`` GD step, ``horizon`` the run's length t = ηk, ``records`` log-spaced records; the deep
    rule: ``depths``, ``deep_width``, ``deep_strength`` (the end-to-end init strength a₀ that sets each
    depth's std), ``quad_scale`` (the quadratic nets' init std), ``quad_lr`` and ``quad_steps``;
    ``mirrored``: every data set's inputs are n/2 points and their negatives (symmetric data, where
    a bias-free ReLU net's odd part is its linear twin)."""

    top: Annotated[tuple[Annotated[float, Gt(0)], ...], MinLen(2), Predicate(decreasing)] = (4.0, 2.0, 1.0)
    distinct: _Ints = (1, 2, 3)
    widths: _Ints = (3, 6, 12)
    n: Annotated[int, Ge(4)] = 64
    init_scale: Positive = 1e-3
    n_inits: Annotated[int, Ge(1)] = 4
    lr: Positive = 0.02
    horizon: Positive = 60.0
    records: Annotated[int, Ge(20)] = 240
    depths: _Ints = (2, 3, 4)
    deep_width: Annotated[int, Ge(2)] = 12
    deep_strength: Positive = 1e-3
    quad_scale: Positive = 0.05
    quad_lr: Positive = 0.005
    quad_steps: Annotated[int, Ge(10)] = 4000
    mirrored: bool = False

    def __post_init__(self):
        d = len(self.top)
        if self.distinct[-1] > d:
            raise ValueError(f"distinct={self.distinct}: a spectrum of d = len(top) = {d} values has at "
                             f"most {d} distinct ones")
        if self.mirrored and self.n % 2:
            raise ValueError(f"n={self.n} must be even with mirrored=True: n/2 points and their "
                             "negatives")
        if self.n < d * (2 if self.mirrored else 1):
            raise ValueError(f"n={self.n} must be at least d = len(top) = {d} (2d mirrored) to whiten "
                             "the inputs")
        if self.widths[0] < d:
            raise ValueError(f"widths={self.widths}: the linear control needs width >= d = len(top) = {d} "
                             "to hold every mode")
        if self.depths[0] < 2:
            raise ValueError(f"depths={self.depths}: a net has at least 2 layers")


PRESETS = {
    "tiny": Config(top=(4.0, 1.0), distinct=(1, 2), widths=(2, 6), n=16, n_inits=2, horizon=40.0,
                   records=120, depths=(2, 3), deep_width=6),
    "paper": Config(),
}

EXPERIMENT = Experiment("saddle-conjectures", CLAIM, Config, PRESETS, PAPER_CLAIM)
"""The run of :mod:`biasfree.claims.saddle_conjectures`: the two conjectures' measurements and the
linear control's derived check."""
