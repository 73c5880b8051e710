"""The figure of `analyse`: panel (a) names the optimiser that trained each curve and plots
in the units it measured (time t = ηk for gradient descent and the gradient-flow prediction,
steps k for any other optimiser, where no flow curve is drawn); every text lies inside the
figure, and no line of the evidence panel is cut off or overlaps the next."""

import re

import jax
import numpy as np
import optax
import pytest

import biasfree as bf
from biasfree.analysis.figure import figure
from biasfree.dynamics.train_config import optimiser_name

ADAM = optax.adam(1e-3)


@pytest.fixture(scope="module")
def runs():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 6))
    X, Y = bf.symmetrize(X, X @ rng.normal(size=(6, 1)))
    X, Y = np.asarray(X), np.asarray(Y)
    net0 = bf.init_gaussian(jax.random.PRNGKey(0), (6, 24, 1), 1e-3)
    net = bf.train(net0, bf.Dataset(X, Y), bf.GDConfig(lr=0.05, steps=200, alpha=0.0)).params
    gd = bf.GDConfig(lr=0.05, steps=200, n_records=51)
    adam = bf.TrainConfig(optimiser=ADAM, steps=300, n_records=51)
    return {"flow": bf.analyse(net, (X, Y), alpha=0.0, init=net0, train=False),  # predicted only
            "gd": bf.analyse(net, (X, Y), alpha=0.0, init=net0, train=gd),
            "adam": bf.analyse(net, (X, Y), alpha=0.0, init=net0, train=adam),
            "adam-now": bf.analyse(net0, (X, Y), alpha=0.0, train=adam)}


def _texts(fig):
    """Every text ``fig`` draws (titles, labels, ticks in the view, legends, panels)."""
    hidden = set()  # tick labels of ticks outside the view: matplotlib keeps but does not draw them
    for ax in fig.axes:
        for axis, (lo, hi) in ((ax.xaxis, sorted(ax.get_xlim())), (ax.yaxis, sorted(ax.get_ylim()))):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not (ax.axison and lo <= tick.get_loc() <= hi):  # axis("off") draws no ticks
                    hidden.update((id(tick.label1), id(tick.label2)))
    return [t for t in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_window_extent"))
            if t.get_visible() and t.get_text().strip() and id(t) not in hidden]


def _legend(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _drawn(name, runs):
    fig = figure(runs[name])
    fig.canvas.draw()
    return fig, fig.axes


def test_gd_curves_are_in_time_units_beside_the_flow_predictions_and_named_gd(runs):
    fig, (a, _, _) = _drawn("gd", runs)
    assert a.get_xlabel().startswith("time t = η k") and "η = 0.05" in a.get_xlabel()
    legend = _legend(a)
    assert "rerun from the given init by GD, α = 0" in legend
    assert "its linear twin by GD, same run (measured)" in legend
    assert any(s.startswith("predicted from the given init: linear twin, gradient flow") for s in legend)
    rerun = [ln for ln in a.get_lines() if ln.get_label().startswith("rerun")][0]
    assert rerun.get_xdata()[-1] == pytest.approx(0.05 * 200, rel=1e-12)  # t = ηK, not K


def test_a_flow_prediction_alone_is_in_time_units_with_no_trained_curve(runs):
    fig, (a, _, _) = _drawn("flow", runs)
    assert a.get_xlabel().startswith("time t (gradient-flow units")
    legend = _legend(a)
    assert any(s.startswith("predicted from the given weights") for s in legend)
    assert any(s.startswith("predicted from the given init") for s in legend)
    assert not any("GD" in s or "rerun" in s for s in legend)
    assert a.get_title(loc="left") == "(a) learning curves: gradient-flow prediction"


@pytest.mark.parametrize("name", ["adam", "adam-now"])
def test_an_adam_run_is_in_steps_named_by_its_optimiser_with_no_flow_curve_against_it(runs, name):
    fig, (a, b, _) = _drawn(name, runs)
    opt = optimiser_name(ADAM)
    assert a.get_xlabel() == f"optimiser steps k ({opt})"
    legend = _legend(a)
    assert not any("GD" in s or "predicted" in s or "gradient flow" in s for s in legend)
    who = "rerun from the given init" if name == "adam" else "trained from the given weights"
    assert f"{who} by {opt}, α = 0" in legend and f"its linear twin by {opt}, same run (measured)" in legend
    title = " ".join(a.get_title(loc="left").split())
    assert title.startswith(f"(a) learning curves under {opt}, in steps")
    assert f"No closed form predicts {opt}'s curve" in title and "is not drawn" in title
    line = [ln for ln in a.get_lines() if ln.get_label().startswith(who)][0]
    assert line.get_xdata()[-1] == 300  # steps, not a time
    if name == "adam-now":  # the bars name the optimiser too
        assert [t.get_text() for t in b.get_xticklabels()] == ["as given", f"trained by {opt}"]


@pytest.mark.parametrize("name", ["flow", "gd", "adam", "adam-now"])
def test_every_text_is_inside_the_figure_and_no_evidence_line_is_cut_or_overlapping(runs, name):
    fig, (_, _, c) = _drawn(name, runs)
    box = fig.bbox
    renderer = fig.canvas.get_renderer()
    for t in _texts(fig):
        e = t.get_window_extent(renderer)
        assert (e.x0 >= box.x0 - 0.5 and e.x1 <= box.x1 + 0.5 and e.y0 >= box.y0 - 0.5
                and e.y1 <= box.y1 + 0.5), f"{t.get_text()!r} at {e} leaves the figure {box}"
    lines = [t for t in c.texts if t.get_text().strip()]
    extents = sorted((t.get_window_extent(renderer) for t in lines), key=lambda e: -e.y1)
    for upper, lower in zip(extents, extents[1:], strict=False):
        assert lower.y1 <= upper.y0 + 1.0, "two evidence lines overlap"  # 1 px of ascender slack
    shown = " ".join(" ".join(t.get_text() for t in lines).split())
    assert "…" not in shown
    v = runs[name].verdict
    for j in (j for j in (v.function, v.training, v.trained_function, v.history) if j is not None):
        for r in j.reasons[:3]:  # every reason whole, however it was wrapped
            assert re.sub(r"\s+", " ", f"reason: {r}") in shown
