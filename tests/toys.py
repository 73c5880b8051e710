"""Toy experiments that tests register in :data:`biasfree.claims.REGISTRY`: a record with
its own ``run`` and a figure (by default one bar per check)."""

from dataclasses import replace

from biasfree._figure import plt
from biasfree.claims import REGISTRY
from biasfree.claims.base import Experiment


def checks_figure(result):
    """Each check's value, one bar per check."""
    fig, ax = plt.subplots(figsize=(4, 2))
    ax.bar(list(result.checks), [c.value for c in result.checks.values()])
    return fig


def toy_experiment(name: str, claim: str, run, config, presets, figure=checks_figure, **kw) -> Experiment:
    """A toy's record: ``run`` and ``figure`` given as functions."""
    return Experiment(name, claim, config, presets, run=run, figure=figure, **kw)


def give_figures(monkeypatch, *names: str, figure=checks_figure) -> None:
    """Give the registered experiments ``names`` the figure ``figure`` for the test's duration."""
    for name in names:
        monkeypatch.setitem(REGISTRY, name, replace(REGISTRY[name], figure=figure))
