"""Linear attention on in-context linear regression: merged key–query attention is exactly a
two-layer linear net on the cubic feature z, and separate key and query learn principal
component by principal component (docs/theory.md §10; Zhang, Singh, Latham & Saxe, ICML 2025).

**Merged part.** White inputs (Λ = I), ``n_seq`` sequences and their label mirrors, merged
attention of ``heads`` heads from a small Gaussian init on the twin's blocks (std ``scale``),
and its twin ``(W₁, W₂)`` by the map of :mod:`biasfree.core.attention_twin`, trained side by
side by :func:`~biasfree.dynamics.trainer.train` (every step recorded):

- *Lockstep, GD and Adam.* ``|L_att − L_twin| / L_twin`` at every step within the run's
  round-off bound, ``2 (K · 2γ_k (|ΔL_init| + |ΔL_data|) / 1e-13 + 2γ_k L) / L`` (K steps, γ_k
  the round-off of a chain of k = N + D² + H sums, ΔL the run's measured response to a 1e-13
  relative perturbation of its init and of its data; the method of the optimisers claim,
  docs/theory.md §10.2: Adam's converged phase amplifies round-off ~1e6-fold, GD's does not).
  Adam runs with the off-twin blocks masked (:func:`~biasfree.core.attention_twin.twin_mask`);
  plain Adam is *measured*: it leaves the manifold (§10.2), as does GD without the mirror.
- *The fast path.* Wall time of the attention run and of its twin on z (both compiled per call,
  same steps and records): the ratio is reported.
- *One drop at the closed-form time.* The GD sigmoid of §10.3 (``u_{k+1} = u_k (1 + η(s − a u_k))²``,
  ``u₀ = ¼‖W₁r + W₂ᵀ‖²``) predicts when the loss crosses the midpoint of its fixed points
  ``L₀ = D/2``, ``L* = D(D+1)/(2(N+D+1))``. Tolerance: the finite-sample error, 3 standard errors
  of the training set's ``ŝ = ⟨(rᵀz) y_q⟩`` and ``â = ⟨(rᵀz)²⟩`` carried through the map. Losses
  before and after: within 3 population standard errors of a sample mean of S sequences' losses,
  ``3 sd/√S``, the population standard deviation of one sequence's loss (½y_q² before, exact;
  ½r² at the population minimum after, its fourth moment exact given the context's second
  moment and averaged over that by Monte Carlo: :func:`.run.loss_spread`), not the training
  sample's own (heavy tails: it is smallest where the mean deviates most, and missed seed 1);
  after, plus the in-sample optimism of the converged least-squares fit on this sample, exact.

**Separate part.** Λ = diag(``eigs``) (distinct), rank-one heads, one per component, from the
balanced aligned init ``γ = κ = ρ = sep_scale`` (the init for which the scalar equations of §10.4
are exact in the population). The loss steps down once per component; the k-th drop's time (the
crossing of the midpoint between plateaus ``L_{k−1}`` and ``L_k``) matches the scalar maps within
3 propagated standard errors of ``ŝ_k``, ``â_k``; on the plateau after drop k (the geometric mean
of the predicted k-th and (k+1)-th drop times; the end after the last) the in-context map
``B = Σ_h γ_h K_hᵀQ_h`` is within ``‖B − B_k‖_F/‖B_k‖_F`` ≤ (the maps' own distance at that time +
3 standard errors of the sample's plateau map, the learned heads' first-order response to the
sample gradient, sandwich ``⟨r² z zᵀ⟩/S`` with r the PCR residual, through the population
Hessian in their parameters, §10.4) of principal component regression on the top k
components, ``B_k`` (:func:`~biasfree.theory.attention.pcr_map`).
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Gt, MinLen, Predicate

from ..base import Experiment, Positive, config, decreasing

CLAIM = ("Merged linear attention trained on label-mirrored in-context regression is exactly a "
         "two-layer linear net on the cubic feature z (loss curves equal to round-off under GD and "
         "masked Adam) with one abrupt drop at the sigmoid's time; separate rank-one key and query "
         "learn one principal component per drop and implement principal component regression.")
PAPER_CLAIM = ("Claim of the follow-up paper, beyond ReLU (Zhang, Singh, Latham & Saxe, ICML 2025, "
               "arXiv 2501.16265): merged key–query attention is a "
               "two-layer linear net on cubic features; separate key and query give saddle-to-saddle "
               "dynamics through principal component regression.")


@config
class Config:
    """Merged part: ``d`` = D inputs, ``n_ctx`` = N tokens, ``heads``, ``n_seq`` sequences (and
    their mirrors), init std ``scale``, GD step ``lr``, ``steps`` (each recorded), Adam's step
    ``adam_lr`` for ``adam_steps``. Separate part: eigenvalues ``eigs`` of Λ (D = len(eigs),
    decreasing), ``sep_n_seq`` sequences, aligned init ``sep_scale``, GD step ``sep_lr``,
    ``sep_steps``, ``sep_records`` log-spaced records."""

    d: Annotated[int, Ge(1)] = 4
    n_ctx: Annotated[int, Ge(1)] = 16
    heads: Annotated[int, Ge(1)] = 4
    n_seq: Annotated[int, Ge(2)] = 8000
    scale: Positive = 1e-3
    lr: Positive = 0.02
    steps: Annotated[int, Ge(2)] = 600
    adam_lr: Positive = 3e-3
    adam_steps: Annotated[int, Ge(2)] = 600
    eigs: Annotated[tuple[Annotated[float, Gt(0)], ...], MinLen(2), Predicate(decreasing)] = (1.0, 0.5, 0.25)
    sep_n_seq: Annotated[int, Ge(2)] = 8000
    sep_scale: Positive = 0.05
    sep_lr: Positive = 0.1
    sep_steps: Annotated[int, Ge(2)] = 4500
    sep_records: Annotated[int, Ge(10)] = 300


PRESETS = {
    "tiny": Config(d=3, n_ctx=8, heads=2, n_seq=2000, scale=1e-2, steps=300, adam_steps=300,
                   eigs=(1.0, 0.4), sep_n_seq=4000, sep_scale=0.1, sep_lr=0.2, sep_steps=1000,
                   sep_records=150),
    "paper": Config(),
}

EXPERIMENT = Experiment("linear-attention", CLAIM, Config, PRESETS, PAPER_CLAIM)
"""The run of :mod:`biasfree.claims.linear_attention`: merged attention beside its twin (lockstep
under GD and Adam, the fast path, the sigmoid) and the separate model's staircase through PCR."""
