"""What :func:`biasfree.analyse` returns: the typed reports of the data, the net, the
regime, the prediction and the training, and their files (``analysis.json``, the twin's
weights, the figure: :func:`save_analysis`).
Units: losses and floors in the package's loss unit, the half mean squared error."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from functools import cached_property

import numpy as np

from .. import _validate as validate
from ..core.layers import Params
from ..expressivity.local_linear import Identities, dimension_line
from ..store import atomic_write, save_figure, versions
from . import summary as _summary
from .interop import save_model
from .verdict import Verdict, judgement_json

LOSS_UNIT = "half mean squared error, L = (1/2N) sum_n ||y_n - f(x_n)||^2"


@dataclass(frozen=True)
class DataReport:
    """``n`` points, ``d`` inputs, ``p`` outputs; ``asymmetry`` (0 exactly for a
    symmetric set; :func:`biasfree.core.symmetry.asymmetry`, averaged over
    ``asymmetry_points`` evenly spaced points: an estimate when fewer than n),
    ``mirror_violation`` (:func:`biasfree.core.symmetry.mirror_violation` of
    ``[X, Y]`` relative to the largest row norm: 0 exactly when every point's mirror is
    present as often as the point), ``symmetric`` (both ≤ 1e-10: symmetric as a
    multiset), ``input_rank`` (directions of XᵀX/N above 1e-12 of the largest),
    ``whitened`` (XᵀX/N = I to 1e-10), ``source``; ``modes`` the s_i; ``linear_fraction``
    Σ s_i²/<||y||²>; ``target_even_fraction`` <||y_even||²>/<||y||²> (NaN unless the inputs
    are symmetric); ``mirror_violation_inputs`` the mirror violation of X alone, relative."""

    n: int
    d: int
    p: int
    asymmetry: float
    symmetric: bool
    input_rank: int
    whitened: bool
    source: str
    mirror_violation: float = 0.0
    modes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    linear_fraction: float = float("nan")
    target_even_fraction: float = float("nan")
    mirror_violation_inputs: float = 0.0
    asymmetry_points: int = 0


@dataclass(frozen=True)
class NetReport:
    """``depth`` L, ``widths`` (d, n_1, ..., p), slope ``alpha``, ``c`` = (1+α)/2,
    ``has_bias``; on the data: ``output_energy`` <||f||²>, ``even_fraction``,
    ``odd_nonlinear_fraction``, ``nonlinear_fraction`` (defined in the module doc of
    :mod:`biasfree.analysis.analyse`), the energies ``even_energy`` <||f_even||²>,
    ``odd_linear_energy`` <||β_effᵀx||²> and ``odd_nonlinear_energy``, ``beta_eff`` (d, p),
    per-layer ``effective_ranks`` (entropy effective rank, Roy & Vetterli 2007) and
    ``singular_values``; ``paired`` (depth 2: every hidden unit (w, v) has its (−w, −v), to
    1e-10 relative); ``structure`` the exact structure that keeps f_even ≡ 0 under training
    (:mod:`biasfree.analysis.structure`) or None."""

    depth: int
    widths: tuple[int, ...]
    alpha: float
    c: float
    has_bias: bool
    output_energy: float
    even_fraction: float
    odd_nonlinear_fraction: float
    even_energy: float
    odd_linear_energy: float
    odd_nonlinear_energy: float
    beta_eff: np.ndarray
    effective_ranks: tuple[float, ...]
    singular_values: tuple[np.ndarray, ...]
    nonlinear_fraction: float = 0.0
    paired: bool = False
    structure: str | None = None

    def title(self, n: int, source: str) -> str:
        """The net on ``n`` points of ``source``, in words (the summary's first line)."""
        arrow = "→".join(str(w) for w in self.widths)
        biases = ", biases" if self.has_bias else ""
        return f"depth-{self.depth} net {arrow} (α = {self.alpha:g}{biases}) on {n} points ({source})"


@dataclass(frozen=True)
class Regime:
    """``init_gain`` Π‖W_l‖₂ √λ_max(Σ_xx), ``s1`` the strongest mode, ``init_ratio`` their
    ratio (small init: ≤ 0.5, §6.3); when trained: ``movement`` per layer
    ‖W_l(T) − W_l(0)‖/‖W_l(0)‖, ``rich`` (first layer ≥ 1), ``alignment0``/``alignment``
    the first-layer rows' energy share in the learned input directions before/after
    (r/d for random rows; reported, not judged); ``relative_gradient`` ‖∇L(θ)‖·‖θ‖/(½<||y||²>)
    of the net as given (0 at a stationary point; reported, not judged)."""

    init_gain: float
    s1: float
    init_ratio: float
    small_init: bool
    movement: tuple[float, ...] | None = None
    rich: bool | None = None
    relative_gradient: float = float("nan")
    alignment0: float | None = None
    alignment: float | None = None


@dataclass(frozen=True)
class Training:
    """The net trained by GD or an optax optimiser (``config``: its
    :class:`~biasfree.dynamics.train_config.TrainConfig`; ``optimiser`` names it, with κ)
    beside its linear twin (:func:`~biasfree.dynamics.trainer.train` with ``twin``):
    ``t`` (R,) record times t = ηk, ``loss``, ``twin_loss``, ``predicted`` (the
    gradient-flow prediction at ``t``), ``even_energy``; ``gap_to_twin`` max over *every*
    step of ``|L − L_twin| / gap_reference``, reached at step ``gap_step`` (time ``gap_time``
    = η·gap_step); ``gap_reference`` its normaliser max(L(θ₀), ½<||y||²>)
    (:mod:`~biasfree.analysis.gap`); ``seconds`` the run's wall time and ``time_budget`` its
    limit (None: none); ``step_seconds`` a step's seconds once compiled (NaN: not measured);
    ``by_default`` True when ``analyse`` measured because the theory was
    silent (no ``train=`` given);
    ``gap_to_prediction`` max over the records of ``|L − L_pred| / gap_reference`` (holds GD's O(η)
    step error: reported, not judged); ``steps_run`` (< config.steps when the time budget
    stopped it); the trained net's ``final_even_fraction``, ``final_odd_nonlinear_fraction``,
    ``final_odd_linear_energy``, ``final_odd_nonlinear_energy``, ``final_even_energy``; ``params``;
    ``end`` where the run's last net and twin stand
    (:class:`~biasfree.analysis.stationary.Stationarity`; None unless full-batch GD on the MSE);
    ``decided`` True when a default measurement ended before its steps because its answer could
    no longer change (``biasfree.analysis.measured.decided``)."""

    config: object
    t: np.ndarray
    loss: np.ndarray
    twin_loss: np.ndarray
    predicted: np.ndarray
    even_energy: np.ndarray
    gap_to_prediction: float
    gap_to_twin: float
    final_even_fraction: float
    final_odd_nonlinear_fraction: float
    final_odd_linear_energy: float
    final_odd_nonlinear_energy: float
    final_even_energy: float
    params: Params
    gap_step: int = 0
    gap_time: float = 0.0
    steps_run: int = 0
    optimiser: str = "GD"
    end: object = None
    gap_reference: float = float("nan")
    seconds: float = float("nan")
    time_budget: float | None = None
    by_default: bool = False
    decided: bool = False
    step_seconds: float = float("nan")


@dataclass(frozen=True)
class Prediction:
    """The linear twin and its learning curve. ``twin`` params (α = 1), ``weight_scale``
    and ``time_scale`` k_t (twin = net × weight_scale per layer, twin time = k_t t),
    ``reference`` "riccati" or "ode", ``exact`` (True when the twin map is exact: a
    two-layer net with zero even part, or α = 1), ``note``; ``t`` (T,), ``loss`` (T,)
    predicted; ``loss0_net`` the net's own L(0), ``linear_floor`` (the twin's limit),
    ``two_layer_floor`` (exact on symmetric data, §1.3, else None), all in loss units;
    ``t0_gap`` ``|L(θ₀) − L_twin(θ₀)|/gap_reference``, ``growth_gap`` the predicted largest gap
    ``|L − L_twin|/gap_reference`` of the init's grown sign groups under GD (§6.4, depth 2) and
    ``growth_gap_low``/``growth_gap_high`` its interval (the init's remainder bounded, §6.4);
    ``horizon_floored`` (Σ_yx ≈ 0 set the horizon); optional ``trained``; ``twin_loss0`` the
    twin's loss at t = 0; ``gap_reference`` every gap's normaliser max(L(θ₀), ½<||y||²>)
    (:mod:`~biasfree.analysis.gap`)."""

    twin: Params
    weight_scale: float
    time_scale: float
    reference: str
    exact: bool
    note: str
    t: np.ndarray
    loss: np.ndarray
    loss0_net: float
    linear_floor: float
    two_layer_floor: float | None
    trained: Training | None = None
    t0_gap: float = 0.0
    growth_gap: float = 0.0
    horizon_floored: bool = False
    growth_gap_low: float = 0.0
    growth_gap_high: float = 0.0
    twin_loss0: float = float("nan")
    gap_reference: float = float("nan")


@dataclass(frozen=True)
class History:
    """Question (iii), how the net got here (``analyse(..., init=...)``): the ``init``'s
    :class:`NetReport` (an attention model's ``AttentionReport``; its ``regime`` then None), the
    ``prediction`` from it (with ``trained`` when the training
    config was rerun beside the twin; None for an init with biases), the ``judgement``,
    the init's ``regime`` (movement filled in when rerun) and ``match``, the rerun's final
    function's squared distance from the given net's over <||f_given||²> (NaN when not rerun;
    reported, not judged)."""

    init: NetReport
    prediction: Prediction | None
    judgement: object
    regime: Regime
    match: float = float("nan")


@dataclass(frozen=True)
class LocalReport(Identities):
    """The local linear analysis (docs/theory.md §8; :func:`biasfree.expressivity.local_linear`) of the
    net as given, at ``n_used`` of the ``n_total`` inputs (``rows``, evenly spaced):
    **reported, not judged** (§6). The :class:`~biasfree.expressivity.local_linear.Identities`
    against their round-off bounds; per input ``participation_ratio`` (Σσ²)²/Σσ⁴ of J(x),
    and the medians of it, of ``effective_rank`` (entropy) and of ``frobenius_dimension``
    Σσ² (BF-CNN); ``max_dimension`` min(p, d)."""

    n_used: int
    n_total: int
    rows: np.ndarray
    participation_ratio: np.ndarray
    participation_ratio_median: float
    effective_rank_median: float
    frobenius_dimension_median: float
    max_dimension: int

    judged = False
    """Never part of the verdict (docs/theory.md §6)."""

    def lines(self) -> list[str]:
        """The identities beside their bounds, then the Jacobian's effective dimension."""
        return super().lines() + [dimension_line(self.participation_ratio_median, self.max_dimension)]

    @property
    def note(self) -> str:
        """The one-line summary the CLI and the figure print."""
        return (f"local linearity at {self.n_used} of {self.n_total} inputs (reported, not judged, §8): "
                + "; ".join(self.lines()))


@dataclass(frozen=True)
class Analysis:
    """What :func:`~biasfree.analyse` found: ``data``, ``net``, ``regime``, ``prediction`` (None for
    a net with biases, which has no linear twin), the ``verdict`` and ``local``, the local
    linear analysis (reported, not judged; None when one Jacobian is too large to form)."""

    data: DataReport
    net: NetReport
    prediction: Prediction | None
    verdict: Verdict
    regime: Regime | None = None
    local: LocalReport | None = None
    history: History | None = None
    stage_of: Callable[[], object] | None = field(default=None, repr=False, compare=False)
    """What computes :attr:`stage`, once, when it is first asked for (printing the analysis asks):
    the nearest fixed point's search costs seconds on a small net, more than the rest of
    ``analyse``, and a caller after the verdict alone should not pay it."""

    @cached_property
    def stage(self) -> object:
        """Where the net stands on its saddle-to-saddle staircase (docs/theory.md §11.7): a
        :class:`~biasfree.analysis.stage_result.Stage` (effective units, nearest embedded fixed
        point, saddle, time to leave, with ``init`` the staircase), or the one-line reason there is
        none (a str); None without a ``stage_of``. Computed on first access, then kept. Reported,
        not judged."""
        return None if self.stage_of is None else self.stage_of()

    def summary(self) -> str:
        """The verdict and each answer's deciding numbers, at most 25 lines, no arrays
        (:func:`biasfree.analysis.summary.summary`); what ``print(analysis)`` shows."""
        return _summary.summary(self)

    def __repr__(self) -> str:
        return _summary.summary(self)

    def _repr_html_(self) -> str:
        return _summary.summary_html(self)

    def to_json(self) -> dict:
        """A JSON-able document with top-level keys data, net, regime, prediction, verdict and
        local_linear (reported, not judged; null when one Jacobian is too large to form)."""
        v, p = self.verdict, self.prediction
        local = None if self.local is None else {"judged": False, **asdict(self.local),
                                                  "note": self.local.note}
        h = self.history
        history = None if h is None else {
            "question": "how the net got here: training from the given init", "init": asdict(h.init),
            "regime": None if h.regime is None else asdict(h.regime), "match": h.match,
            "judgement": judgement_json(h.judgement),
            "prediction": None if h.prediction is None else _prediction_json(h.prediction)}
        return _jsonable({"data": asdict(self.data), "net": asdict(self.net),
                          "regime": None if self.regime is None else asdict(self.regime),
                          "prediction": None if p is None else _prediction_json(p),
                          "verdict": {"level": v.level, "effectively_linear": v.effectively_linear,
                                      "question": v.question, "failures": v.failures, "text": v.text,
                                      **{k: judgement_json(getattr(v, k)) for k in
                                         ("function", "training", "trained_function", "history")}},
                          "history": history, "local_linear": local, "stage": _stage_json(self.stage)})


def _stage_json(st) -> dict | None:
    """The stage's numbers (reported, not judged), or its refusal."""
    if st is None or isinstance(st, str):
        return None if st is None else {"refused": st}
    u, fp, up = st.units, st.fixed_point, st.unit_point
    if up is None:
        up = st.head_point  # separate attention: its escape coefficient c* is the rate
    point = fp if fp is not None else up
    # Stage.found: without a fixed point the numbers at where the search stopped are left out
    # (its gradient against its bound says how far it was)
    at = {"fixed_point_loss": point.loss, "distance": st.distance,
          "lambda_min": None if fp is None else fp.lambda_min, "escape_rate": None if up is None else up.rate,
          "unstable_distance": st.unstable_distance, "escape_time": st.escape_time,
          "drop_time": st.drop_time,
          "copy_time": getattr(st.unit_point, "copy_time", None)} if st.found else {}
    return {"judged": False, "lines": st.lines(), "family": st.family, "loss": st.loss, "units": u.count,
            "threshold": u.threshold, "threshold_rule": u.why, "units_decided": st.count_decided,
            "units_learned": st.learned,
            "nearest_k": st.k, "nearest_candidates": [list(c) for c in st.candidates] if st.found else None,
            "covered": st.covered,
            "saddle": st.saddle, "fixed_point_found": st.found,
            "fixed_point_loss": at.get("fixed_point_loss"), "distance": at.get("distance"),
            "gradient": None if point is None else point.grad,
            "gradient_tol": None if point is None else point.grad_tol,
            "lambda_min": at.get("lambda_min"), "lambda_tol": None if fp is None else fp.lambda_tol,
            "escape_rate": at.get("escape_rate"), "escape_rate_tol": None if up is None else up.rate_tol,
            "unstable_distance": at.get("unstable_distance"), "escape_time": at.get("escape_time"),
            "drop_time": at.get("drop_time"), "copy_time": at.get("copy_time"),
            "leave_measured": None if st.leave is None else asdict(st.leave),
            "staircase_levels": None if st.staircase is None else st.staircase.prediction.levels,
            "staircase_passed": None if st.staircase is None else st.staircase.passed,
            "notes": list(st.notes)}


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if is_dataclass(v) and not isinstance(v, type):
        return _jsonable(asdict(v))
    if isinstance(v, np.ndarray | np.generic):
        return _jsonable(v.tolist())
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


def _prediction_json(p: Prediction) -> dict:
    doc = {"loss_unit": LOSS_UNIT, "reference": p.reference, "exact": p.exact, "note": p.note,
           "twin": {"alpha": 1.0, "weight_scale": p.weight_scale, "time_scale": p.time_scale,
                    "shapes": [[layer.n_out, layer.n_in] for layer in p.twin]},
           "t": p.t, "loss": p.loss, "loss0_net": p.loss0_net, "linear_floor": p.linear_floor,
           "two_layer_floor": p.two_layer_floor, "t0_gap": p.t0_gap, "growth_gap": p.growth_gap,
           "growth_gap_low": p.growth_gap_low, "growth_gap_high": p.growth_gap_high,
           "horizon_floored": p.horizon_floored, "twin_loss0": p.twin_loss0,
           "gap_reference": p.gap_reference, "trained": None}
    if p.trained is not None:
        tr = {f.name: getattr(p.trained, f.name) for f in fields(Training)
              if f.name not in ("params", "config")}
        cfg = p.trained.config
        tr["config"] = asdict(cfg) if cfg.gd else cfg.record()
        doc["trained"] = tr
    return doc


def save_analysis(analysis: Analysis, out_dir, figure=None) -> list:
    """Write ``OUT/analysis.json`` (keys data, net, prediction, verdict, versions), the twin's
    weights ``OUT/twin.safetensors`` (torch naming, metadata alpha = 1, weight_scale,
    time_scale) and ``figure`` (a matplotlib Figure) as ``OUT/figure.png``/``.pdf``;
    each file written atomically. Returns the paths written."""
    if not isinstance(analysis, Analysis):
        raise TypeError(f"analysis must be what biasfree.analyse returns, got {type(analysis).__name__}")
    if figure is not None and not hasattr(figure, "savefig"):
        raise TypeError(f"figure={figure!r} must be a matplotlib Figure (or None)")
    out = validate.writable_folder("out_dir", out_dir)
    doc = analysis.to_json()
    paths = [out / "analysis.json"]
    if analysis.prediction is not None:
        p = analysis.prediction
        twin = save_model(p.twin, out / "twin.safetensors", alpha=1.0,
                          metadata={"weight_scale": p.weight_scale, "time_scale": p.time_scale,
                                    "note": "linear twin written by biasfree analyse"})
        doc["prediction"]["twin"]["file"] = twin.name
        paths.append(twin)
    doc["versions"] = versions()
    blob = json.dumps(doc, indent=2, allow_nan=False).encode()
    atomic_write(paths[0], lambda fh: fh.write(blob))
    return paths + (save_figure(figure, out / "figure") if figure is not None else [])
