"""``analyse`` for linear attention: is the model effectively its linear twin?

The twin (docs/theory.md §10.2, :mod:`biasfree.core.attention_twin`) is a two-layer linear net
``W₂W₁z`` on the cubic feature ``z = vec((1/N) Σ_n y_n x_n x_qᵀ)``. The same three questions
as for dense nets (docs/verdict.md "Attention models"), each with its deciding numbers:

- *function now*, decided from the structure: the twin identity needs the off-twin blocks
  (value row ``u_h = W_h^V[D, :D]``, key–query label row ``b_h = W_h[D, :D]``; a separate model:
  of ``K_hᵀQ_h``) to be zero; measured relative to their matrices against float64 round-off
  (:data:`~.verdict.ROUND_OFF`), with the distance ``<(f − f_twin)²>/<f²>`` on the data.
- *training*: a merged model with zero blocks on label-mirrored data (every sequence beside
  its copy with y → −y, measured by :func:`label_mirror_violation`) trains exactly as its
  twin under GD and gradient flow (the mirror keeps u, b at 0): predicted, nothing run. Where
  the theory is silent — a separate key–query model (a depth-3 net on z, §10.4), off-twin
  blocks that are not zero, unmirrored sequences, and with ``init=`` an optimiser or random
  batches the mirror argument does not cover (§10.2, §10.5) — ``analyse`` *measures by
  default*, as for a dense net (:mod:`~biasfree.analysis.attention_trained`,
  :mod:`~biasfree.analysis.attention_measure`): the model and its twin
  (:func:`~biasfree.core.attention_twin.merged_to_twin`; a separate model's is the merged twin
  of ``K_hᵀQ_h``) trained on from the given weights in one
  :func:`~biasfree.dynamics.trainer.train` loop (``twin=(twin, z data)``), by GD at a quarter
  of the stability limit of the measured sharpness to the twin's default horizon (or the
  optimiser named with ``train=``), within :data:`~biasfree.analysis.plan.MEASURE_BUDGET`
  seconds, ended once decided (:class:`~biasfree.analysis.measured.Decided`); ``train=``
  measures what it names, ``train=False`` predicts only. The gap is the one definition dense
  models use (docs/verdict.md),

      ``gap = max_k |L_k − L̃_k| / L_ref``,   L_ref = max(L(θ₀), ½<y_q²>)

  (θ₀ the weights training starts from, y_q the targets), weighed against the paper's 0.3%
  (:data:`~.verdict.PAPER_LEVEL`); "undecided" is left only where the budget ran out (naming
  the steps run and the call that runs longer) or a run was not stable GD. A prediction names
  the training it is for (GD and gradient flow without ``train=``; else the optimiser and
  batches given);
- *history* (``init=``): the run from the init beside its twin, measured with ``train=``, else
  predicted and, where that is undecided, measured by default and run whole, since it is
  compared with the model (``res.history``, a :class:`~.report.History` with ``match``, as for a
  dense net).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..core.attention import SeparateAttention
from ..core.attention_twin import in_context_map, merged_to_twin, twin_dataset
from ..core.data import Dataset
from ..core.nets import forward
from ..core.symmetry import max_row_norm, row_violation
from ..dynamics import TrainConfig
from ..dynamics.train_config import as_train_config
from . import gap
from . import verdict as vd
from .attention_files import SEQUENCES
from .attention_import import as_attention
from .attention_import import with_n_ctx as _with_n_ctx
from .attention_trained import (
    NORMALISER,
    answer,
    as_training,
    ends_of,
    gd_run,
    longer_call,
    measure_by_default,
    measure_call,
    mirror_evidence,
    run_beside_twin,
    training_name,
)
from .measurements import data_arrays
from .report import Analysis, DataReport, History, Prediction, Training
from .stage_answer import stage_answer
from .verdict import PAPER_LEVEL, ROUND_OFF, UNDECIDED, evidence

ADAM_CALL = "analyse(model, data, train=optax.adam(3e-3))"
"""The call that measures plain Adam (docs/theory.md §10.2: it leaves the twin where the mirror
pairs' gradient sums leave round-off, 0.39 off-twin and a 5–7% gap; it stays where they cancel)."""


@dataclass(frozen=True)
class AttentionReport:
    """The attention model on the data (the ``net`` of its :class:`~.report.Analysis`): ``kind``
    "merged" or "separate" (``rank`` r), ``heads`` H, ``d`` D, ``n_ctx`` N, ``source``;
    ``value_block`` max_h ‖u_h‖ / max_h ‖v_h‖ and ``label_block`` max_h ‖b_h‖ / max_h ‖W_h[:, :D]‖
    (the off-twin blocks, relative); ``function_gap`` <(f − f_twin)²>/<f²> on the data;
    ``loss0``, ``twin_loss0`` (half MSE); ``loss_ref`` the gap's normaliser
    max(L(θ₀), ½<y_q²>) (:func:`~biasfree.analysis.gap.reference`, the one normaliser dense
    models use); ``in_context_map`` B = Σ_h γ_h A_h (D, D);
    ``label_mirror_violation`` (also the DataReport's ``mirror_violation`` here); when trained,
    ``loss``/``twin_loss`` at every step, ``gap`` ``max_k |L_k − L̃_k| / loss_ref`` at
    ``gap_step``, ``steps_run`` and the ``trained`` layer; ``norm`` the layer's normaliser of
    the context sum (:data:`~biasfree.core.attention.NORMS`); of a run also ``record_steps`` (the
    steps of ``loss``), ``trained_twin``, ``seconds``, the ``budget`` it was given, ``decided``
    (ended once its answer could not change), ``end`` (the bound at its end,
    :func:`~biasfree.analysis.attention_measure.ends`; plain GD only) and ``by_default`` (measured because the
    theory was silent)."""

    kind: str
    heads: int
    d: int
    n_ctx: int
    rank: int | None
    source: str
    value_block: float
    label_block: float
    function_gap: float
    loss0: float
    twin_loss0: float
    in_context_map: np.ndarray
    label_mirror_violation: float
    loss_ref: float = float("nan")
    loss: np.ndarray | None = None
    twin_loss: np.ndarray | None = None
    gap: float = float("nan")
    gap_step: int = 0
    trained: object = None
    steps_run: int = 0
    norm: str = "n"
    record_steps: np.ndarray | None = None
    trained_twin: object = None
    seconds: float = float("nan")
    step_seconds: float = float("nan")
    budget: float | None = None
    decided: bool = False
    end: object = None
    by_default: bool = False

    @property
    def on_twin(self) -> bool:
        """Both off-twin blocks are zero to round-off."""
        return max(self.value_block, self.label_block) <= ROUND_OFF

    @property
    def gap0(self) -> float:
        """The gap at t = 0, ``|L(θ₀) − L̃(θ̃₀)| / loss_ref`` (exact)."""
        return abs(self.loss0 - self.twin_loss0) / self.loss_ref

    def title(self, n: int, source: str) -> str:
        r = "" if self.rank is None else f", key–query rank {self.rank}"
        r += {"n": "", "none": ", no 1/N", "n+1": ", sum over N + 1"}[self.norm]
        return (f"{self.kind} linear attention ({self.heads} heads, D = {self.d}, N = {self.n_ctx}{r}) "
                f"on {n} sequences ({source})")


def label_mirror_violation(X, Y, n_ctx: int) -> float:
    """How far the sequences are from label-mirrored, relative to the largest row of [X, Y]: the
    sequences with the same inputs (x_1..x_N, x_q) are grouped, and within a group the labels
    and target (y_1..y_N, y_q) must be a mirror-symmetric multiset
    (:func:`biasfree.core.symmetry.mirror_violation`, the one measure): 0 exactly when every
    sequence has its copy with y → −y as often as itself."""
    X, Y = np.asarray(X, float), np.asarray(Y, float).reshape(len(X), -1)
    E = X.reshape(X.shape[0], n_ctx + 1, -1)
    xs = E[..., :-1].reshape(X.shape[0], -1)
    labels = np.hstack([E[:, :-1, -1], Y])
    _, group = np.unique(xs, axis=0, return_inverse=True)
    group = group.reshape(-1)
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    worst = 0.0
    for rows in np.split(order, bounds):
        worst = max(worst, row_violation(labels[rows]))
    return worst / max(max_row_norm(X, Y), 1e-300)


def _blocks(layer) -> tuple[float, float]:
    m = layer.merged if isinstance(layer, SeparateAttention) else layer
    V, KQ, D = np.asarray(m.V), np.asarray(m.KQ), layer.d
    u = np.linalg.norm(V[:, D, :D], axis=-1).max() / max(np.linalg.norm(V[:, D, :], axis=-1).max(), 1e-300)
    b = (np.linalg.norm(KQ[:, D, :D], axis=-1).max()
         / max(np.linalg.norm(KQ[:, :, :D], axis=(-2, -1)).max(), 1e-300))
    return float(u), float(b)


def _loss(F, Y) -> float:
    return 0.5 * float(np.mean(np.sum((np.asarray(Y) - np.asarray(F)) ** 2, axis=1)))


def _report(layer, X, Y, zd: Dataset, source: str, mirror: float) -> AttentionReport:
    f = np.asarray(forward((layer,), X, 0.0))
    g = np.asarray(forward(merged_to_twin(layer), zd.X, 1.0))
    u, b = _blocks(layer)
    rank = layer.rank if isinstance(layer, SeparateAttention) else None
    L0 = _loss(f, Y)
    return AttentionReport("separate" if rank else "merged", layer.heads, layer.d, layer.n_ctx, rank, source,
                           u, b, float(np.mean((f - g) ** 2) / max(np.mean(f**2), 1e-300)), L0,
                           _loss(g, Y), in_context_map(layer), mirror, gap.reference(L0, gap.zero_loss(Y)),
                           norm=layer.norm)


def _function(rep: AttentionReport, kind: str = "function now") -> vd.Judgement:
    ev = [evidence("off-twin value row max_h ‖u_h‖ (relative to ‖v_h‖)", rep.value_block, ROUND_OFF,
                   "the values read only the label, as the twin's γ_h (§10.2), to float64 round-off"),
          evidence("off-twin key–query label row max_h ‖b_h‖ (relative to ‖W_h‖)", rep.label_block, ROUND_OFF,
                   "the scores read only x, as the twin's A_h (§10.2), to float64 round-off"),
          evidence("distance to the twin's function <(f − f_twin)²>/<f²> on the data", rep.function_gap,
                   PAPER_LEVEL, "f is its twin's W₂W₁z to the paper's 0.3%")]
    if rep.on_twin:
        return vd.judgement(kind, vd.EXACT, [], ev, (), "f = W₂W₁z exactly (the off-twin blocks are zero): "
                            "a two-layer linear net on z")
    blocks = (f"off-twin blocks u {rep.value_block:.3g}, b {rep.label_block:.3g} of their matrices "
              f"(> {ROUND_OFF:g})")
    if ev[2].passed:
        return vd.judgement(kind, vd.EFFECTIVE, [], ev, (f"{blocks}: nothing keeps the identity",),
                            f"f within {rep.function_gap:.2g} of its twin's (≤ 0.3%), but {blocks}")
    return vd.judgement(kind, vd.NOT, [f"{blocks}; {ev[2].line()}"], ev)


def _full_gd(cfg: TrainConfig | None) -> bool:
    """No config (gradient flow and GD), or full-batch GD: what the mirror argument covers."""
    return cfg is None or (cfg.gd and cfg.batch_size is None)


def _predicted(rep: AttentionReport, cfg: TrainConfig | None = None, kind: str | None = None) -> vd.Judgement:
    """Training from ``rep``'s weights predicted for ``cfg`` (None: GD and gradient flow)."""
    name = training_name(cfg)
    kind = kind or f"training by {name}, predicted (not measured)"
    call = measure_call(cfg)
    ev = mirror_evidence(rep)
    ev.append(evidence(f"loss gap to the twin at t = 0, |L − L_twin| / {NORMALISER} (exact)", rep.gap0,
                       PAPER_LEVEL, "the model's loss and its twin's agree now"))
    if not ev[-1].passed:
        return vd.judgement(kind, vd.NOT, [f"measured at t = 0: {ev[-1].line()}"], ev)
    if rep.kind == "separate":
        return vd._undecided(kind, "separate key–query weights train as a depth-3 net on z (γ, K, Q), not as "
                             "the merged twin (a staircase, §10.4)", ev, [], call)
    if not rep.on_twin:
        return vd._undecided(kind, "the off-twin blocks are not zero: nothing keeps the identity in training",
                             ev, [], call)
    if not ev[0].passed:
        return vd._undecided(kind, "the data are not label-mirrored: the gradients of u, b are O(1/√S) and "
                             "GD moves them (measured 4e-3 to 0.02, §10.2)", ev, [], call)
    if cfg is not None and cfg.batch_size is not None:
        return vd._undecided(kind, f"batches of {cfg.batch_size} sequences drawn at random hold a "
                             "sequence without its mirror, so the gradients of u, b do not cancel pair by "
                             "pair (§10.2)", ev, [], call)
    if not _full_gd(cfg):
        return vd._undecided(kind, f"{name} is not GD: the mirror zeroes the gradients of u, b, but an "
                             "optimiser that divides by their size (Adam) moves them by ~η per step where "
                             "the pair sums leave round-off (measured 0.39 off-twin, loss gap 5–7%, "
                             "§10.2, §10.5)", ev, [], call)
    return vd.judgement(kind, vd.EXACT, [], ev, (
        "plain Adam divides whatever round-off the pair sums leave by √v + ε: where they do not cancel "
        "exactly it moves u, b by ~η per step (measured 0.39 off-twin, loss gap 5–7%); where they do, it "
        "stays (§10.2, §10.5)",),
        "zero off-twin blocks on label-mirrored data: the twin identity holds at every GD step, any init "
        f"scale and step size (§10.2); plain Adam is not covered: measure it with {ADAM_CALL}")


def _config(train) -> TrainConfig | None:
    """The training named (None for True: GD on the default schedule, measured at the weights it
    starts from, :func:`gd_run`)."""
    cfg = None if train is True else as_train_config(train)
    if cfg is not None and cfg.batch_size is not None and cfg.mirrored_batches:
        raise ValueError(f"train: batch_size={cfg.batch_size} with mirrored_batches=True pairs x with −x, "
                         "not a sequence with its label mirror; pass mirrored_batches=False to keep "
                         f"batch_size={cfg.batch_size} (sequences at random, the twin on the same rows; CLI: "
                         "--random-batches), or batch_size=None for full batches")
    return cfg


def analyse_attention(model, data, *, train=None, init=None, time_budget=None, progress=None) -> Analysis:
    """:func:`biasfree.analyse` of a linear-attention model (module doc): ``model`` a
    :class:`~biasfree.core.attention.MergedAttention`/``SeparateAttention`` (or a one-layer
    tuple) or a torch module in :mod:`.attention_import`'s layout; ``data`` flat sequences
    (S, (N+1)(D+1)) with targets (S, 1), N read from the width; ``train`` None (predict, and
    where the theory is silent measure by default,
    :mod:`~biasfree.analysis.attention_measure`), False (predict only), True (GD on the default
    schedule, :func:`~biasfree.analysis.attention_trained.gd_run`), an optax optimiser or a
    TrainConfig (full batch, or ``batch_size`` with ``mirrored_batches=False``); ``init`` the
    weights training started from (history, measured with ``train``). Returns an
    :class:`~.report.Analysis` shaped as a dense one's: ``net`` the :class:`AttentionReport`,
    ``prediction`` the twin (with ``trained`` when measured), ``history`` with ``match``;
    ``regime`` and ``local`` None (no dense regime or Jacobians here)."""
    X, Y, source = data_arrays(data)
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    if X.ndim != 2 or Y.ndim != 2 or Y.shape != (X.shape[0], 1):
        raise ValueError(f"data: attention reads {SEQUENCES}; got X {X.shape} and Y {Y.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(Y))):
        raise ValueError("data: X and Y must be finite")
    layer = _with_n_ctx(as_attention(model, X), X.shape[1])  # a torch module: verified by running it on X
    if np.any(X.reshape(len(X), layer.n_ctx + 1, -1)[:, -1, -1]):
        raise ValueError("data: the query's label slot (the last column of each row) must be 0 "
                         "(docs/theory.md §10.1: the model predicts it)")
    start = None if init is None else _with_n_ctx(as_attention(init, X, like=layer, name="init"), X.shape[1])
    if start is not None and type(start) is not type(layer):
        raise ValueError(f"init is a {type(start).__name__} but the model a {type(layer).__name__}")
    ds = Dataset(X, Y, mirror=False)
    zd = twin_dataset(ds, layer.n_ctx, norm=layer.norm)
    cfg, gd = _config(train), train is True  # gd: GD on the default schedule, asked
    measure = train is not False  # measure by default where the theory is silent (False: predict only)
    mirror = label_mirror_violation(X, Y, layer.n_ctx)
    src = f"{source}; model {getattr(model, 'source', type(model).__name__)}"
    rep = _report(layer, X, Y, zd, src, mirror)
    lam = np.linalg.eigvalsh(X.T @ X / len(X))
    data_rep = DataReport(n=len(X), d=X.shape[1], p=1, asymmetry=float("nan"), symmetric=mirror <= ROUND_OFF,
                          input_rank=int(np.sum(lam > 1e-12 * lam.max())), whitened=False, source=source,
                          mirror_violation=mirror)
    function = _function(rep)
    training, run = _predicted(rep, None if start is None else cfg), cfg
    trained_fn = history = trained = None
    if start is None and gd:
        rep, training, run, _ = gd_run(rep, layer, ds, zd, time_budget, progress, "training by {}, measured",
                                        False, False)
    elif start is None and cfg is not None:
        rep = run_beside_twin(rep, layer, ds, zd, cfg, time_budget, progress,
                       ends=ends_of(layer, ds, zd)[0] if cfg.plain_gd else None)  # GD: the end's bound
        training = answer(rep, cfg, f"training by {training_name(cfg)}, measured", longer_call(cfg))
    elif measure and training.level == UNDECIDED:  # the theory is silent: measured by default
        named = None if start is None else cfg  # with init=, the training named is the one predicted
        rep, training, run = measure_by_default(rep, layer, ds, zd, named, time_budget, progress,
                                         "training by {}, measured by default", training, early=True)
    if rep.trained is not None:
        trained_fn = _function(_report(rep.trained, X, Y, zd, src, mirror), "function after training")
        trained = as_training(rep, run)
    if start is not None:
        history = _history(start, layer, ds, zd, src, mirror, cfg, time_budget, progress, measure, gd)
    verdict = vd.combine(function, training, trained_fn, None if history is None else history.judgement,
                         asked=not rep.by_default)
    c = {"n": "(1/N) ", "none": "", "n+1": "(1/(N+1)) "}[layer.norm]
    question = verdict.question + f" (the twin: W₂W₁z, z = vec({c}Σ_n y_n x_n x_qᵀ), docs/theory.md §10.2)"
    return Analysis(data_rep, rep, _prediction(layer, rep, zd, trained),
                    dataclasses.replace(verdict, question=question), history=history,
                    stage_of=partial(stage_answer, layer, X, Y, 0.0, start, history))  # heads, theory §11.7


def _prediction(layer, rep: AttentionReport, zd: Dataset, trained: Training | None) -> Prediction:
    """The twin (``merged_to_twin``: α = 1, no weight or time scale) as a dense analysis's
    :class:`~.report.Prediction`: no closed-form curve here (``t``, ``loss`` empty; §10.3's sigmoid
    is the population's), its least-squares floor on z, the t = 0 gap over ``loss_ref`` and the
    measured run (``trained``) when there is one."""
    Z, Y = np.asarray(zd.X), np.asarray(zd.Y)
    beta = np.linalg.lstsq(Z, Y, rcond=None)[0]
    return Prediction(merged_to_twin(layer), 1.0, 1.0, "none", rep.kind == "merged" and rep.on_twin,
                      "linear attention's twin W₂W₁z (docs/theory.md §10.2); no closed-form curve is drawn: "
                      "the sigmoid of §10.3 is the population's, measure the twin's with train=",
                      np.zeros(0), np.zeros(0), rep.loss0, _loss(Z @ beta, Y), None, trained, rep.gap0,
                      float("nan"), twin_loss0=rep.twin_loss0, growth_gap_low=float("nan"),
                      growth_gap_high=float("nan"))


def _history(start, layer, ds, zd, src, mirror, cfg, budget, progress, measure: bool, gd: bool) -> History:
    """Question (iii): training from ``start`` beside its twin, measured with ``cfg`` or, ``gd``,
    GD on the default schedule measured at ``start`` (and how close the rerun ends to the given
    ``layer``, ``match``), else predicted for GD and, unless ``measure`` is off, measured by
    default where that prediction is undecided (run whole: it is compared with the model)."""
    X, Y = np.asarray(ds.X), np.asarray(ds.Y)
    rep = _report(start, X, Y, zd, src, mirror)
    how = "how the model got here: training from the init by"
    if gd:
        rep, j, run, _ = gd_run(rep, start, ds, zd, budget, progress, f"{how} {{}}, measured", False, False)
    elif cfg is None:
        j = _predicted(rep, None, f"{how} GD or gradient flow, predicted")
        if not (measure and j.level == UNDECIDED):
            return History(rep, _prediction(start, rep, zd, None), j, None)
        rep, j, run = measure_by_default(rep, start, ds, zd, None, budget, progress,
                                  f"{how} {{}}, measured by default", j, early=False)
    else:
        ends = ends_of(start, ds, zd)[0] if cfg.plain_gd else None  # plain GD: the end's bound holds
        rep, run = run_beside_twin(rep, start, ds, zd, cfg, budget, progress, ends=ends), cfg
        j = answer(rep, cfg, f"{how} {training_name(cfg)}, measured", longer_call(cfg))
    f, g = (np.asarray(forward((m,), X, 0.0)) for m in (layer, rep.trained))
    match = float(np.mean((g - f) ** 2) / max(np.mean(f**2), 1e-300))
    same = "a default GD run, not the training that made the model; " if rep.by_default else ""
    j = dataclasses.replace(j, notes=j.notes + (
        f"the rerun from the init ends {match:.3g} (of <f²>) from the given model ({same}reported, not "
        "judged)",))
    return History(rep, _prediction(start, rep, zd, as_training(rep, run)), j, None, match)


__all__ = ["AttentionReport", "analyse_attention", "label_mirror_violation"]
