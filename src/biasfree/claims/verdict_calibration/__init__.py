"""How far can `analyse`'s verdict be trusted? Its prediction of training, from the init
alone, against the truth measured by training, over a grid of nets and data.

docs/theory.md §6. At each point of a grid (init scale σ from 1e-4 to PyTorch's default,
width m, data asymmetry, depth 2 and 3, biases on and off) :func:`biasfree.analyse` is
called *without* training, and its training answer (``verdict.training``: the twin
theory's assumptions and the predicted gap with its interval, §6.4) is read as "linear"
when it is *exactly* or *effectively linear*, "undecided" when the interval straddles 0.3%,
else "not linear". The truth is measured: the net and its linear twin (the bias-free weights
× the twin scale, step × k_t: what a user would predict from the twin) trained by the same
GD, with the gap

    ``D = max over every step k of |L(θ_k) − L_twin(θ̃_k)| / L₀,   L₀ = max(L(θ₀), ½⟨‖y‖²⟩)``

(:func:`~biasfree.dynamics.trainer.train` with ``twin``; L₀ is L(0) for an init, the zero
function's loss for a trained net); "linear" when D ≤ 0.3% (the paper's level). The step is
analyse's default (a quarter of the estimated stability limit), the run analyse's default
horizon, at most ``max_steps`` steps. The truth runs of one net shape (depth, biases, width;
conv layers) go as one ensemble through the trainer's one loop, each member with its own step
count: on a CPU each member runs only its own steps ("map" layout), on a GPU a batch of 10 costs
about one run.

Data: the paper's (Gaussian inputs and their negatives, whitened; odd target
``wᵀx + sin(4wᵀx)``). Asymmetry a ∈ [0, 1]: that fraction of the mirror half is replaced
by fresh independent draws (a = 1: no point has its mirror). The PyTorch column is
nn.Linear's default init, U(±1/√fan_in) for weights and biases.

Checks (counts, not tuned rates): no false "linear" (measured gap > 0.3%), no structural
"not" (biases, an even target: §6.4) measured on its twin (asymmetric inputs, depth > 2 and an
init that is not small leave the prediction undecided), and the measured gap at most the
interval's high end wherever the prediction rests on the theory.
The agreement (over the decided points) and the confusion table (rows linear, undecided, not)
are metrics; the notes list the disagreements and every undecided point's interval.

Families beyond the grid (:mod:`.families`: nets given already trained, antisymmetric pairs
at large init, 1-D and 2-D conv nets, depth-3 nets, nets trained with weight decay), each
with its own confusion table and checks (:mod:`.summary`).
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Gt, Interval, MinLen, MultipleOf, Predicate, doc

from ..base import Experiment, config, increasing

CLAIM = ("analyse's prediction of training (from the init alone) against the gap to the linear twin "
         "measured by training, over init scale × width × asymmetry × depth × biases.")
PAPER_CLAIM = ("Claim 2's accuracy (\"errors below 0.3%\" of L(0) from small init) as a test of analyse:"
               " its verdict from the init alone against the gap measured by training.")

STRUCTURAL = ("nonzero biases", "asymmetric inputs", "the target's even part", "measured at t = 0", "depth",
              "init not small", "a convolutional")
"""Reasons of the training prediction that do not rest on the predicted interval (§6): proven
departures and the exact t = 0 gap ("not"), failed assumptions ("undecided")."""


FAMILIES = ("trained", "pairs-large-init", "conv1d", "conv2d", "depth3", "weight-decay")
"""The families beyond the grid, each with its own confusion table (:mod:`.families`)."""


def known_families(names) -> bool:
    """Names of :data:`FAMILIES`, each once: a ``Predicate`` for the ``families`` field."""
    return all(n in FAMILIES for n in names) and len(set(names)) == len(names)


@config
class Config:
    """``d`` inputs, ``n`` Gaussian draws (2n points once symmetrised), ``scales`` init stds
    σ (increasing; per weight, biases alike), ``torch_default`` adds PyTorch's default init
    as a last column, ``widths`` hidden widths (increasing), ``asymmetries`` fractions of
    the mirror half replaced by fresh draws, ``depths`` from {2, 3}, ``biases`` from
    {False, True}, ``max_steps`` cap on each truth run's GD steps; ``share_compiles`` pads
    every net to the widest with zero units (``_pad``, exact) so that one batch and one
    compiled loop serve every width of a (depth, biases) pair: fewer compilations, dearer
    steps for the small nets (on a CPU; on a GPU a step costs about the same to width 512).

    Families (:mod:`.families`; ``families`` the ones to run): dense ones on the symmetric
    data at widths ``family_widths`` (even: pairs split them); ``trained`` from stds
    ``trained_scales`` for ``trained_fractions`` of the default horizon; ``pair_scales``;
    ``depth3_scales``; ``decays`` λ from std ``decay_scale``; conv nets of ``conv_channels``
    channels (kernel ``conv_kernel``) from stds ``conv_scales`` on ``conv_n`` signals of
    length ``conv_length`` (1-D) or ``conv_image`` × ``conv_image`` images (2-D)."""

    d: Annotated[int, Ge(1)] = 8
    n: Annotated[int, Ge(1)] = 100
    scales: Annotated[tuple[Annotated[float, Gt(0)], ...], Predicate(increasing)] = (1e-4, 1e-3, 1e-2, 1e-1)
    torch_default: bool = True
    widths: Annotated[tuple[Annotated[int, Ge(1)], ...], MinLen(2), Predicate(increasing)] = (8, 32, 128, 512)
    asymmetries: Annotated[tuple[Annotated[float, Interval(ge=0, le=1)], ...], MinLen(1)] = (0.0, 1.0)
    depths: Annotated[tuple[Annotated[int, Interval(ge=2, le=3)], ...], MinLen(1)] = (2, 3)
    biases: Annotated[tuple[bool, ...], MinLen(1)] = (False, True)
    max_steps: Annotated[int, Ge(1)] = 20_000
    share_compiles: bool = False
    families: Annotated[tuple[str, ...], Predicate(known_families), doc("names from FAMILIES")] = FAMILIES
    family_widths: Annotated[tuple[Annotated[int, Ge(2), MultipleOf(2)], ...], MinLen(1)] = (8, 32, 128)
    trained_scales: Annotated[tuple[Annotated[float, Gt(0)], ...], MinLen(1)] = (1e-3, 1e-2)
    trained_fractions: Annotated[tuple[Annotated[float, Interval(gt=0, le=1)], ...], MinLen(1)] = (0.3, 1.0)
    pair_scales: Annotated[tuple[Annotated[float, Gt(0)], ...], MinLen(1)] = (0.3, 1.0)
    depth3_scales: Annotated[tuple[Annotated[float, Gt(0)], ...], MinLen(1)] = (0.03, 0.1, 0.3)
    decay_scale: Annotated[float, Gt(0)] = 1e-3
    decays: Annotated[tuple[Annotated[float, Gt(0)], ...], MinLen(1)] = (1e-3, 1e-2, 1e-1)
    conv_scales: Annotated[tuple[Annotated[float, Gt(0)], ...], MinLen(1)] = (1e-3, 1e-2, 1e-1)
    conv_channels: Annotated[tuple[Annotated[int, Ge(1)], ...], MinLen(1)] = (4, 16)
    conv_length: Annotated[int, Ge(2)] = 16
    conv_image: Annotated[int, Ge(2)] = 8
    conv_kernel: Annotated[int, Ge(1)] = 3
    conv_n: Annotated[int, Ge(1)] = 100

    def __post_init__(self):
        if len(self.scales) + self.torch_default < 2:
            raise ValueError(f"scales={self.scales} with torch_default={self.torch_default} give fewer "
                             "than 2 columns; the contour needs them")
        if any(not isinstance(b, bool) for b in self.biases):
            raise ValueError(f"biases={self.biases} must be taken from (False, True)")
        if self.conv_kernel > min(self.conv_length, self.conv_image):
            raise ValueError(f"conv_kernel={self.conv_kernel} must be <= conv_length and conv_image: the "
                             "kernel must fit the signals")


PRESETS = {
    "tiny": Config(d=4, n=20, scales=(1e-4,), widths=(8, 64), max_steps=1000, share_compiles=True,
                   family_widths=(8, 32), trained_scales=(1e-2,), depth3_scales=(0.1, 0.3), decay_scale=1e-2,
                   decays=(1e-3, 1e-2), conv_scales=(0.05, 0.2), conv_channels=(4,), conv_length=8,
                   conv_image=4, conv_n=20),
    "paper": Config(),
}

EXPERIMENT = Experiment("verdict-calibration", CLAIM, Config, PRESETS, PAPER_CLAIM)
