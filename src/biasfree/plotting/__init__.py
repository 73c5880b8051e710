"""Figures drawn from saved results (the only place matplotlib is used).

``figure(result)`` dispatches to ``biasfree.plotting.<module>.figure`` where the
module name is the experiment name with ``-`` replaced by ``_``; a result whose
module is missing gets a generic figure of its checks.
"""

from __future__ import annotations

import importlib

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from ..experiments.base import Result  # noqa: E402


def figure(result: Result):
    """A matplotlib Figure for ``result``."""
    name = result.experiment.replace("-", "_")
    try:
        mod = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError:
        return checks_figure(result)
    return mod.figure(result)


def status_title(result: Result) -> str:
    """``"NAME: all checks passed"`` or ``"NAME: FAILED: check, ..."`` for a suptitle."""
    status = "all checks passed" if result.passed else "FAILED: " + ", ".join(result.failed())
    return f"{result.experiment}: {status}"


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
