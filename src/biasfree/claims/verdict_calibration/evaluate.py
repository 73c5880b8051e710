"""verdict-calibration's two measurements of a net, kept apart: analyse's verdict from the
net alone, and the truth measured by training it beside its twin; and the confusion table
that sets one against the other (docs/theory.md §6)."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np

from ... import theory
from ...analysis import measure_step
from ...analysis import verdict as vd
from ...analysis.analyse import analyse
from ...core.data import Dataset
from ...core.layers import scale_params
from ...core.twin import twin_scales
from ...dynamics.trainer import GDConfig, _train
from ...expressivity.decomposition import net_function, odd_nonlinearity
from ..base import Progress, quiet
from .families import Point, reference_loss

LINEAR = (vd.EXACT, vd.EFFECTIVE)
"""The levels that call a net's training linear."""


def called_linear(level) -> np.ndarray:
    """Whether each answer (an index into :data:`~biasfree.analysis.verdict.LEVELS`) is in :data:`LINEAR`."""
    return np.isin(level, [vd.LEVELS.index(v) for v in LINEAR])


ASSUMPTIONS = ("depth", "init not small", "a convolutional")
"""Reasons that refuse the prediction because an assumption of the theory fails (depth > 2,
an init not small, a conv net), not on evidence of a departure: issue 31's verdict answers
"undecided" there (§6.1), so a "not" resting on them alone is no claim that the net is off
its twin."""


def truth_setup(params, X, Y, max_steps: int):
    """The truth run of one net: the twin of its bias-free weights (× c^((L−1)/L)), the step
    factor k_t = c^(2(L−1)/L), analyse's default schedule
    (:func:`~biasfree.analysis.measure_step.schedule`, at most ``max_steps`` steps), and whether
    the steps reach the horizon: ``(twin, k_t, lr, steps, full)``."""
    ws, ks = twin_scales(0.0, len(params))
    free = tuple(la.without_bias() for la in params)
    a0 = float(np.linalg.norm(odd_nonlinearity(net_function(free, 0.0), X).beta, 2))
    modes = theory.data_modes(X, Y, 0.0, whiten=True)
    lr, steps, need = measure_step.schedule(free, X, Y, 0.0, modes, a0, max_steps)
    return scale_params(free, ws), ks, lr, steps, steps == need


def measure(runs, progress: Progress = quiet) -> np.ndarray:
    """Gaps to the twins (fraction of :func:`~.families.reference_loss`) for ``runs``, a list of
    ``(params, twin, X, Y, lr, steps, time_scale, decay)``: runs of one shape, one data set and
    one step factor go as one ensemble through the trainer's loop
    (:func:`~biasfree.dynamics.trainer.train` with ``twin``; each member with its own η, λ and
    step count, the gap over every one of its steps), the twin's step η·k_t and decay λ/k_t."""
    groups: dict = {}
    for i, (params, _, X, Y, _, _, time_scale, _) in enumerate(runs):
        leaves, tree = jax.tree_util.tree_flatten(tuple(params))  # conv shapes and padding are in tree
        data = (np.shape(X), np.shape(Y), hash(np.asarray(X).tobytes()), hash(np.asarray(Y).tobytes()))
        key = (tree, tuple(np.shape(x) for x in leaves), data, time_scale)
        groups.setdefault(key, []).append(i)
    gap = np.zeros(len(runs))
    for key, idx in groups.items():
        progress(f"truth: {len(idx)} nets of shapes {key[1]}, {max(runs[i][5] for i in idx)} steps at most")
        stack = [jax.tree_util.tree_map(lambda *a: np.stack(a), *[runs[i][j] for i in idx]) for j in (0, 1)]
        X, Y = runs[idx[0]][2], runs[idx[0]][3]
        vectors = {"alpha": np.zeros(len(idx)), "lr": np.array([runs[i][4] for i in idx], float),
                   "weight_decay": np.array([runs[i][7] for i in idx], float)}
        steps = np.array([[runs[i][5]] for i in idx])
        traj = _train(stack[0], Dataset(X, Y), GDConfig(lr=1.0, steps=int(steps.max())), vectors,
                      twin=stack[1], batched=True, observables="loss", segments=steps)
        L0 = np.asarray(traj.loss)[:, 0]
        gap[idx] = np.asarray(traj.twin_gap) / np.maximum(reference_loss(L0, np.asarray(Y)[None]), 1e-300)
    return gap


@dataclass(frozen=True)
class Family:
    """One family's verdicts and truths, per point: ``labels`` (``keys`` for metric names);
    ``level`` (index into :data:`~biasfree.analysis.verdict.LEVELS`) of analyse's training
    answer; ``assumption`` a "not" resting only on :data:`ASSUMPTIONS`; ``high_end`` the
    predicted gap's high end (NaN without a prediction); ``gap`` the measured gap (fraction
    of L₀); ``full`` the truth run reached its horizon; ``steps`` run."""

    name: str
    labels: tuple[str, ...]
    keys: tuple[str, ...]
    level: np.ndarray
    assumption: np.ndarray
    high_end: np.ndarray
    gap: np.ndarray
    full: np.ndarray
    steps: np.ndarray

    @property
    def linear(self) -> np.ndarray:
        return called_linear(self.level)

    @property
    def false_linear(self) -> int:
        """Points called linear whose measured gap exceeds 0.3% (runs cut short have no truth)."""
        return int(np.sum(self.linear & self.full & (self.gap > vd.PAPER_LEVEL)))

    def table(self) -> np.ndarray:
        """(levels, 2) counts over the points with a truth: column 0 measured linear (gap ≤
        0.3%), column 1 not."""
        truth = self.gap <= vd.PAPER_LEVEL
        return np.array([[np.sum(self.full & (self.level == i) & t) for t in (truth, ~truth)]
                         for i in range(len(vd.LEVELS))], dtype=int)


def _answer(judgement, prediction):
    level = vd.LEVELS.index(judgement.level)
    assumption = (judgement.level == vd.NOT and bool(judgement.reasons)
                  and all(r.startswith(ASSUMPTIONS) for r in judgement.reasons))
    high = (float("nan") if prediction is None
            else max(prediction.t0_gap, prediction.growth_gap_high))
    return level, assumption, high


def verdict(point: Point):
    """analyse's answers for ``point.params``, each ``(level index, assumption-only "not",
    predicted high end)``: on training from the net alone, and (None without ``point.init``)
    on how it got here from ``point.init``, both from one call (the first does not depend on
    the init)."""
    a = analyse(point.params, (point.X, point.Y), alpha=0.0, init=point.init, t_max=1.0, n_times=2,
                train=False)  # the prediction alone: the truth runs measure
    return (_answer(a.verdict.training, a.prediction),
            None if a.history is None else _answer(a.history.judgement, a.history.prediction))


def _family(name, points, answers, gap, full, steps) -> Family:
    level, assumption, high = (np.array([a[i] for a in answers]) for i in range(3))
    return Family(name, tuple(p.label for p in points), tuple(p.key for p in points), level.astype(int),
                  assumption.astype(bool), high.astype(float), np.asarray(gap, float), np.asarray(full, bool),
                  np.asarray(steps, int))


def evaluate(families: dict[str, list[Point]], max_steps: int, progress: Progress = quiet) -> list[Family]:
    """Verdicts and measured truths of every family (all truth runs batched together by shape);
    the trained family also gives "trained-history" (the gaps measured on the way from the init,
    and analyse's answers with ``init=``)."""
    runs, owners, answers = [], [], {}
    for name, points in families.items():
        progress(f"verdicts: {name} ({len(points)} nets)")
        answers[name] = [verdict(p) for p in points]  # (training answer, history answer or None)
        for j, p in enumerate(points):
            twin, ks, lr, steps, full = truth_setup(p.params, p.X, p.Y, max_steps)
            runs.append((p.params, twin, p.X, p.Y, lr, steps, ks, p.decay))
            owners.append((name, j, full))
    gaps = measure(runs, progress)
    out = []
    for name, points in families.items():
        mine = [i for i, o in enumerate(owners) if o[0] == name]
        out.append(_family(name, points, [v[0] for v in answers[name]], gaps[mine],
                           [owners[i][2] for i in mine], [runs[i][5] for i in mine]))
        if name == "trained" and points:
            out.append(_family("trained-history", points, [v[1] for v in answers[name]],
                               [p.history_gap for p in points], [True] * len(points), [0] * len(points)))
    return out
