"""Is *your* network effectively linear? One call from a model and data to a verdict.

:func:`analyse` measures, on the given data, what docs/theory.md says decides the answer:

- the data: symmetric or not (§2.1), by :func:`biasfree.datasets.asymmetry`;
- the net: depth, widths, slope α (c = (1 + α)/2), biases, and the split of its output
  ``f = f_odd + f_even`` (§1.2): ``even_fraction = <||f_even||²> / <||f||²>`` and
  ``odd_nonlinear_fraction = min_β <||f_odd - βᵀx||²> / <||f_odd||²>`` (round-off for
  every two-layer bias-free net), ``β_eff`` and each layer's effective rank;
- the prediction: the *linear twin* (§2.4) — two layers: ``√c (W_1, W_2)`` run in time
  ``c t``; depth L > 2: every layer × ``c^{(L-1)/L}`` in time ``c^{2(L-1)/L} t`` (the
  net with σ_α replaced by its odd part ``c z``; approximate, §4.1) — and its learning
  curve from this init, by the exact closed form where it applies ("riccati": two
  layers, whitened inputs, balanced init) or the integrated linear network ("ode");
  the floors on this data;
- optionally the net trained by gradient descent beside its twin, with the measured
  gaps ``max_t |L(t) - L_pred(t)| / L(0)`` and ``max_t |L(t) - L_twin(t)| / L(0)``.

Units: every loss and floor is the package's training loss, the *half* mean squared
error ``L = (1/2N) Σ_n ||y_n - f(x_n)||²``; fractions are ratios of mean energies.

The verdict is "effectively linear" when none of these fails: no bias; symmetric data
(asymmetry ≤ 1e-10); an odd part that is linear (fraction ≤ 1e-10; it can fail only
for depth > 2); and, when trained, a measured gap to the prediction within the paper's
0.3% of L(0) between the trained net and its twin trained by the same GD (the gap to
the gradient-flow prediction also holds GD's O(η) step error, so it is reported, not
judged).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from . import theory, validate
from .data import Dataset, check_data
from .datasets import RealData, asymmetry, load_data
from .expressivity import net_function, odd_nonlinearity
from .floors import dataset_floor
from .interop import Model, as_model
from .nets import Params, depth, even_part, forward, has_bias, scale_params, slope_factor, widths
from .precision import precise
from .train import GDConfig, gd

ROUND_OFF = 1e-10
"""Tolerance of an exact identity (relative): symmetric data, a linear odd part."""

PAPER_LEVEL = 3e-3
"""The paper's level for "equal curves" ("errors below 0.3%" of L(0))."""

LOSS_UNIT = "half mean squared error, L = (1/2N) sum_n ||y_n - f(x_n)||^2"


@dataclass(frozen=True)
class DataReport:
    """``n`` points, ``d`` inputs, ``p`` outputs; ``asymmetry`` (0 exactly for a
    symmetric set), ``mirror_violation`` (:func:`biasfree.validate.mirror_violation` of
    ``[X, Y]`` relative to the largest row norm: 0 exactly when every point's mirror is
    present as often as the point), ``symmetric`` (both ≤ 1e-10: symmetric as a
    multiset), ``input_rank`` (directions of XᵀX/N above 1e-12 of the largest),
    ``whitened`` (XᵀX/N = I to 1e-10), ``source``."""

    n: int
    d: int
    p: int
    asymmetry: float
    symmetric: bool
    input_rank: int
    whitened: bool
    source: str
    mirror_violation: float = 0.0


@dataclass(frozen=True)
class NetReport:
    """``depth`` L, ``widths`` (d, n_1, ..., p), slope ``alpha``, ``c`` = (1+α)/2,
    ``has_bias``; on the data: ``output_energy`` <||f||²>, ``even_fraction``,
    ``odd_nonlinear_fraction`` (module doc), the energies ``even_energy`` <||f_even||²>,
    ``odd_linear_energy`` <||β_effᵀx||²> and ``odd_nonlinear_energy`` <||f_odd - β_effᵀx||²>,
    ``beta_eff`` (d, p), per-layer
    ``effective_ranks`` (entropy effective rank of the singular values, Roy & Vetterli
    2007) and ``singular_values``."""

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


@dataclass(frozen=True)
class Training:
    """The net trained by GD (``config``) beside its linear twin (GD too, step η·k_t,
    weights × the twin's scale): ``t`` (T,) times t = ηk, ``loss``, ``twin_loss`` (twin
    record j sits at twin time k_t t_j), ``predicted`` (the prediction at ``t``),
    ``even_energy`` <||f_even||²> along training; ``gap_to_prediction`` and
    ``gap_to_twin`` (max over t of the difference / L(0)); the trained net's
    ``final_even_fraction``, ``final_odd_nonlinear_fraction``, ``final_odd_linear_energy``
    <||β_effᵀx||²>, ``final_odd_nonlinear_energy`` and ``final_even_energy``; ``params``."""

    config: GDConfig
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


@dataclass(frozen=True)
class Prediction:
    """The linear twin and its learning curve. ``twin`` params (α = 1), ``weight_scale``
    and ``time_scale`` k_t (twin = net × weight_scale per layer, twin time = k_t t),
    ``reference`` "riccati" or "ode", ``exact`` (True when the twin map is exact: a
    two-layer net with zero even part, or α = 1), ``note``; ``t`` (T,), ``loss`` (T,)
    predicted; ``loss0_net`` the net's own L(0) (includes ½<f_even²>), ``linear_floor``
    (least-squares residual: the twin's limit), ``two_layer_floor`` (exact two-layer
    bias-free floor on symmetric data, §1.3, else None), all in loss units; optional
    ``trained``."""

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


@dataclass(frozen=True)
class Verdict:
    """``effectively_linear``; ``failures`` the conditions that fail, each with its
    number; ``text`` one plain sentence with the numbers."""

    effectively_linear: bool
    failures: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Analysis:
    """What :func:`analyse` found: ``data``, ``net``, ``prediction`` (None for a net
    with biases, which has no linear twin) and the ``verdict``."""

    data: DataReport
    net: NetReport
    prediction: Prediction | None
    verdict: Verdict

    def to_json(self) -> dict:
        """A JSON-able document with top-level keys data, net, prediction, verdict."""
        return {"data": _jsonable(dataclasses.asdict(self.data)),
                "net": _jsonable(dataclasses.asdict(self.net)),
                "prediction": None if self.prediction is None else _prediction_json(self.prediction),
                "verdict": _jsonable(dataclasses.asdict(self.verdict))}


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return _jsonable(v.tolist())
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


def _prediction_json(p: Prediction) -> dict:
    doc = {"loss_unit": LOSS_UNIT, "reference": p.reference, "exact": p.exact, "note": p.note,
           "twin": {"alpha": 1.0, "weight_scale": p.weight_scale,
                    "time_scale": p.time_scale,
                    "shapes": [list(np.shape(layer.W)) for layer in p.twin]},
           "t": p.t, "loss": p.loss, "loss0_net": p.loss0_net, "linear_floor": p.linear_floor,
           "two_layer_floor": p.two_layer_floor, "trained": None}
    if p.trained is not None:
        tr = {f.name: getattr(p.trained, f.name) for f in dataclasses.fields(Training)
              if f.name not in ("params", "config")}
        tr["config"] = dataclasses.asdict(p.trained.config)
        doc["trained"] = tr
    return _jsonable(doc)


# ----------------------------------------------------------------- measurements


def effective_rank(sv) -> float:
    """Entropy effective rank ``exp(-Σ p_i ln p_i)``, ``p = σ/Σσ`` of singular values ``sv``."""
    sv = np.asarray(sv, float)
    if sv.sum() <= 0:
        return 0.0
    p = sv / sv.sum()
    p = p[p > 0]
    return float(np.exp(-np.sum(p * np.log(p))))


@dataclass(frozen=True)
class _Split:
    energy: float
    even: float
    odd_linear: float
    odd_nonlinear: float
    odd_fraction_nonlinear: float
    beta: np.ndarray


def _split(params: Params, X, alpha) -> _Split:
    """Energies of f, of f_even, of the best linear fit of f_odd and of its remainder."""
    F = np.asarray(forward(params, X, alpha))
    fe = np.asarray(even_part(params, X, alpha))
    fit = odd_nonlinearity(net_function(params, alpha), X)
    energy = float(np.mean(np.sum(F**2, axis=1)))
    even = float(np.mean(np.sum(fe**2, axis=1)))
    lin = float(np.mean(np.sum((np.asarray(X) @ fit.beta) ** 2, axis=1)))
    return _Split(energy, even, lin, fit.residual, fit.fraction, fit.beta)


def _data_arrays(data):
    if isinstance(data, RealData):
        return data.X, data.Y, data.source
    if isinstance(data, Dataset):
        return np.asarray(data.X), np.asarray(data.Y), "Dataset"
    if isinstance(data, str) or hasattr(data, "__fspath__"):
        try:
            d = load_data(data)
        except ValueError as e:
            raise ValueError(f"data: {e}") from None
        return d.X, d.Y, d.source
    if isinstance(data, tuple) and len(data) == 2:
        return data[0], data[1], "arrays"
    raise TypeError(f"data: give (X, Y), a biasfree Dataset, a load_data result, a file or a data "
                    f"set name; got {type(data).__name__}")


def _twin_scales(L: int, alpha: float) -> tuple[float, float]:
    """(weight scale per layer, time scale): ``c^{(L-1)/L}`` and ``c^{2(L-1)/L}``."""
    c = float(slope_factor(alpha))
    return c ** ((L - 1) / L), c ** (2 * (L - 1) / L)


def default_t_max(X, Y, beta, time_scale: float, horizon: float = 3.0) -> float:
    """A horizon for the prediction when none is given: ``horizon`` × the slowest mode's
    half time ``t_1/2 = ln(max(s/a_0 - 1, e)) / (2 s k_t)`` (§3.1), with ``s`` the
    singular values of ``Σ_yx Σ_xx^{+1/2}`` above 1% of the largest and ``a_0`` the
    twin's initial strength ``||β_eff||₂`` (floored at 1e-12 s_1); k_t = ``time_scale``."""
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    N = X.shape[0]
    lam, V = np.linalg.eigh(X.T @ X / N)
    keep = lam > 1e-12 * lam.max()
    root = (V[:, keep] * np.sqrt(lam[keep])) @ V[:, keep].T
    s = np.linalg.svd(Y.T @ X / N @ np.linalg.pinv(root), compute_uv=False)
    s = s[s > 1e-2 * s[0]]
    a0 = max(float(np.linalg.norm(beta, 2)), 1e-12 * s[0])
    return float(horizon * np.max(np.log(np.maximum(s / a0 - 1.0, np.e)) / (2.0 * s)) / time_scale)


@precise
def analyse(model, data, *, alpha=None, train: GDConfig | None = None, t_max: float | None = None,
            n_times: int = 201) -> Analysis:
    """Analyse a bias-free (leaky) ReLU net on data: is it effectively linear? (module doc)

    ``model``: a torch ``nn.Sequential``, an ``eqx.nn.MLP``, a ``.safetensors``/``.npz``
    path, a :class:`~biasfree.interop.Model` or a params tuple (:mod:`biasfree.interop`).
    ``data``: ``(X, Y)``, a Dataset, a :func:`~biasfree.load_data` result, a file or a
    bundled name. ``alpha``: the slope α, needed when the model does not state it.
    ``train``: a :class:`~biasfree.GDConfig` to also train the net (its ``alpha`` is
    replaced by the model's) beside its twin. ``t_max``: horizon of the predicted curve
    without training (default :func:`default_t_max`), on ``n_times`` points.
    """
    if train is not None and not isinstance(train, GDConfig):
        raise TypeError(f"train={train!r} must be a biasfree.GDConfig (or None: no training)")
    if t_max is not None:
        t_max = validate.positive("t_max", t_max, scalar=True, why="the horizon of the predicted curve")
    n_times = validate.integer("n_times", n_times, 2)
    m: Model = as_model(model, alpha)
    if m.alpha is None:
        raise ValueError(f"the slope α of {m.source} is unknown (weight files do not store the "
                         "activation): pass alpha (0 ReLU, a in (0, 1) leaky, 1 linear)")
    a, params = float(m.alpha), m.params
    X, Y, source = _data_arrays(data)
    check_data(X, Y)
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    if train is not None and train.loss == "logistic" and not np.all(np.abs(Y) == 1.0):
        raise ValueError("data: the logistic loss (train.loss='logistic') needs labels y = ±1; Y holds "
                         "other values (map {0, 1} labels with 2y - 1, or train with loss='mse')")
    w = widths(params)
    if X.shape[1] != w[0] or Y.shape[1] != w[-1]:
        raise ValueError(f"the net maps {w[0]} inputs to {w[-1]} outputs but the data have "
                         f"X {X.shape} and Y {Y.shape}")
    L, c, biased = depth(params), float(slope_factor(a)), has_bias(params)

    lam = np.linalg.eigvalsh(X.T @ X / X.shape[0])
    asym = asymmetry(X, Y)
    mv = validate.mirror_violation(X, Y) / max(float(np.max(np.linalg.norm(np.hstack([X, Y]), axis=1))),
                                               1e-300)
    data_rep = DataReport(X.shape[0], X.shape[1], Y.shape[1], asym, asym <= ROUND_OFF and mv <= ROUND_OFF,
                          int(np.sum(lam > 1e-12 * lam.max())), theory.is_whitened(X), source, mv)
    sp = _split(params, X, a)
    svs = tuple(np.linalg.svd(np.asarray(layer.W, float), compute_uv=False) for layer in params)
    beta = (c * np.asarray(params[0].W).T @ np.asarray(params[1].W).T
            if L == 2 and not biased else sp.beta)
    net_rep = NetReport(L, w, a, c, biased, sp.energy, sp.even / sp.energy if sp.energy else 0.0,
                        sp.odd_fraction_nonlinear, sp.even, sp.odd_linear, sp.odd_nonlinear,
                        np.asarray(beta),
                        tuple(effective_rank(s) for s in svs), svs)
    prediction = None if biased else _predict(params, a, X, Y, sp, beta, train, t_max, n_times,
                                              data_rep.symmetric)
    return Analysis(data_rep, net_rep, prediction, _verdict(data_rep, net_rep, prediction, params))


def _predict(params, a, X, Y, sp, beta, train, t_max, n_times, symmetric) -> Prediction:
    L = depth(params)
    ws, ks = _twin_scales(L, a)
    twin = scale_params(params, ws)
    if train is not None:
        train = dataclasses.replace(train, alpha=a)
        from .train import record_steps

        t = train.lr * record_steps(train.steps, train.n_records, train.spacing)
    else:
        T = default_t_max(X, Y, beta, ks) if t_max is None else float(t_max)
        if not (T > 0 and np.isfinite(T)):
            raise ValueError(f"t_max={t_max} must be a positive finite time")
        t = np.linspace(0.0, T, n_times)
    if L == 2 or a == 1.0:
        curve = theory.reference_curve(params, X, Y, t, alpha=a)
        note = curve.note
        # the twin map is exact only with a zero even part on mirror-symmetric data (as a
        # multiset): reference_curve measures both and says so in curve.exact
        exact = a == 1.0 or (curve.exact and sp.even <= 1e-24 * max(sp.energy, 1e-300))
    else:
        exact = False
        curve = theory.reference_curve(twin, X, Y, ks * t, alpha=1.0)
        note = (f"APPROXIMATE: depth {L} > 2 has no exact linear twin (docs/theory.md §4.1); the twin is "
                f"the net with σ_α replaced by its odd part c z, weights × c^((L-1)/L) = {ws:.4g}, "
                f"time × c^(2(L-1)/L) = {ks:.4g}; " + curve.note)
    lin_floor = theory.linear_floor(X, Y)
    two = None
    if symmetric:  # the bound is exact only on a set symmetric as a multiset (dataset_floor checks)
        dsf = dataset_floor(X, Y, alpha=a)
        two = dsf.value if dsf.exact else None
    loss0 = float(0.5 * np.mean(np.sum((Y - np.asarray(forward(params, X, a))) ** 2, axis=1)))
    trained = None if train is None else _train(params, twin, a, ks, X, Y, train, curve.loss, loss0)
    return Prediction(twin, ws, ks, curve.reference, bool(exact), note, np.asarray(t),
                      np.asarray(curve.loss), loss0, lin_floor, two, trained)


def _train(params, twin, a, ks, X, Y, cfg: GDConfig, predicted, loss0) -> Training:
    data = Dataset(X, Y)
    tr = gd(params, data, cfg)
    tw = gd(twin, data, dataclasses.replace(cfg, alpha=1.0, lr=cfg.lr * ks))
    loss, twin_loss = np.asarray(tr.loss), np.asarray(tw.loss)
    L0 = max(loss0, 1e-300)
    sp = _split(tr.params, X, a)
    return Training(cfg, np.asarray(tr.t), loss, twin_loss, np.asarray(predicted),
                    np.asarray(tr.even_energy),
                    float(np.max(np.abs(loss - predicted)) / L0),
                    float(np.max(np.abs(loss - twin_loss)) / L0),
                    sp.even / sp.energy if sp.energy else 0.0, sp.odd_fraction_nonlinear,
                    sp.odd_linear, sp.odd_nonlinear, sp.even, tr.params)


def _verdict(data: DataReport, net: NetReport, pred: Prediction | None, params) -> Verdict:
    fails = []
    if net.has_bias:
        layers = [str(i + 1) for i, layer in enumerate(params) if layer.b is not None]
        fails.append(f"bias: layer(s) {', '.join(layers)} carry biases, so f has no odd/even "
                     "split and no linear twin (docs/theory.md §5)")
    if not data.symmetric:
        fails.append(f"asymmetric data: asymmetry {data.asymmetry:.3g} (0 for a set holding every "
                     "(-x, -y); symmetrise with biasfree.symmetrize)")
    trained = None if pred is None else pred.trained
    onf = net.odd_nonlinear_fraction
    if trained is not None:
        onf = max(onf, trained.final_odd_nonlinear_fraction)
    if onf > ROUND_OFF:
        fails.append(f"depth {net.depth} > 2 with a nonlinear odd part: {onf:.3g} of <f_odd²> lies "
                     "outside the best linear map")
    if trained is not None and not trained.gap_to_twin <= PAPER_LEVEL:
        fails.append(f"trained curve {100 * trained.gap_to_twin:.3g}% of L(0) from its linear twin "
                     f"(paper's level 0.3%); even part {100 * trained.final_even_fraction:.3g}% "
                     "of the output after training")
    even = 100 * net.even_fraction
    if trained is not None:
        even = 100 * max(net.even_fraction, trained.final_even_fraction)
    if not fails:
        text = (f"effectively linear: odd part linear to {onf:.1g}, even part {even:.2g}% of the "
                "output")
        if trained is not None:
            text += (f", trained curve within {100 * trained.gap_to_twin:.2g}% of L(0) of its linear "
                     f"twin trained alike ({100 * trained.gap_to_prediction:.2g}% of the gradient-flow "
                     "prediction, the rest being GD's finite step)")
        elif pred is not None and not pred.exact:
            text += ("; the prediction is approximate while the even part is not zero (train "
                     "with --train-steps to measure the gap)")
        return Verdict(True, (), text)
    return Verdict(False, tuple(fails), "not effectively linear: " + "; ".join(fails))


def save_analysis(analysis: Analysis, out_dir, figure=None) -> list:
    """Write ``OUT/analysis.json`` (keys data, net, prediction, verdict, versions), the twin's
    weights ``OUT/twin.safetensors`` (torch naming, metadata alpha = 1, weight_scale,
    time_scale) and ``figure`` (a matplotlib Figure) as ``OUT/figure.png``/``.pdf``;
    each file written atomically. Returns the paths written."""
    import json

    from .interop import save_model
    from .store import atomic_write, versions

    if not isinstance(analysis, Analysis):
        raise TypeError(f"analysis must be what biasfree.analyse returns, got {type(analysis).__name__}")
    if figure is not None and not hasattr(figure, "savefig"):
        raise TypeError(f"figure={figure!r} must be a matplotlib Figure (or None)")
    out = validate.writable_folder("out_dir", out_dir)
    doc = analysis.to_json()
    paths = []
    if analysis.prediction is not None:
        p = analysis.prediction
        twin = save_model(p.twin, out / "twin.safetensors", alpha=1.0,
                          metadata={"weight_scale": p.weight_scale, "time_scale": p.time_scale,
                                    "note": "linear twin written by biasfree analyse"})
        doc["prediction"]["twin"]["file"] = twin.name
        paths.append(twin)
    doc["versions"] = versions()
    blob = json.dumps(doc, indent=2, allow_nan=False).encode()
    atomic_write(out / "analysis.json", lambda fh: fh.write(blob))
    paths.insert(0, out / "analysis.json")
    if figure is not None:
        for ext in ("png", "pdf"):
            f = out / f"figure.{ext}"
            atomic_write(f, lambda fh, ext=ext: figure.savefig(fh, format=ext, dpi=130,
                                                          bbox_inches="tight"))
            paths.append(f)
    return paths
