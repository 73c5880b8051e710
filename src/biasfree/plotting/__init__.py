"""Figures drawn from saved results (matplotlib is set up in ``biasfree._figure``).

``figure(result)`` dispatches to ``biasfree.plotting.<module>.figure`` where the
module name is the experiment name with ``-`` replaced by ``_``; a result whose
module is missing gets a generic figure of its checks.
"""

from __future__ import annotations

import importlib

from .._figure import plt
from ..results import Result


def figure(result: Result):
    """A matplotlib Figure for ``result``."""
    name = result.experiment.replace("-", "_")
    try:
        mod = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError:
        return checks_figure(result)
    return mod.figure(result)


def checks_figure(result: Result):
    """Bar chart of each check's value relative to its threshold."""
    fig, ax = plt.subplots(figsize=(6, 0.4 * len(result.checks) + 1.5))
    names = list(result.checks)
    ratios = [abs(c.value) / abs(c.threshold) if c.threshold else 0.0
              for c in result.checks.values()]
    colors = ["tab:green" if c.passed else "tab:red" for c in result.checks.values()]
    ax.barh(names, ratios, color=colors)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xlabel("|value| / threshold")
    ax.set_title(result.experiment)
    fig.tight_layout()
    return fig
