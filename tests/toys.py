"""Figures for the toy experiments that tests register: :func:`biasfree.claims.figure`
finds a claim's figure by name (``biasfree.claims.<name>.figure``), so a toy gets one in
``sys.modules`` for the test's duration."""

import sys
import types

from biasfree._figure import plt


def checks_figure(result):
    """Each check's value, one bar per check."""
    fig, ax = plt.subplots(figsize=(4, 2))
    ax.bar(list(result.checks), [c.value for c in result.checks.values()])
    return fig


def give_figures(monkeypatch, *names: str, figure=checks_figure) -> None:
    """Register ``figure`` as the figure module of each toy experiment in ``names``."""
    for name in names:
        mod = types.ModuleType(f"biasfree.claims.{name.replace('-', '_')}.figure")
        mod.figure = figure
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
