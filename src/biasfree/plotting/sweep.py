"""A sweep's summary figure: each metric against the first swept field, with the spread
over seeds (drawn from the table of :func:`biasfree.load_sweep`)."""

from __future__ import annotations

from numbers import Real

import numpy as np

from . import plt

NON_METRICS = ("seed", "point", "status", "error", "elapsed_s", "passed")


def metric_columns(df) -> list[str]:
    """The numeric metric columns of a sweep table (not fields, keys or checks)."""
    fields = set(df.attrs.get("grid", [])) | set(df.attrs.get("fixed", {}))
    return [c for c in df.columns
            if c not in fields and c not in NON_METRICS and not c.startswith("check.")
            and df[c].dtype.kind in "fiu" and np.isfinite(df[c].to_numpy(float)).any()
            and df[c].nunique(dropna=True) > 1]  # a constant says nothing against the grid


def _log_ok(values) -> bool:
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return v.size > 1 and bool(np.all(v > 0)) and v.max() / v.min() > 30


def _hashable(v):
    if isinstance(v, list | np.ndarray):
        return tuple(v)
    return v.item() if isinstance(v, np.generic) else v


def _is_number(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool)


def summary_figure(df, ncols: int = 4):
    """One panel per metric: median over seeds against the first swept field (``seed``
    if nothing is swept), the min–max band over seeds shaded, one line per combination
    of the other swept fields."""
    done = df[df["status"] == "done"].copy()
    grid = list(df.attrs.get("grid", []))
    x_name = grid[0] if grid else "seed"
    others = grid[1:]
    done[x_name] = done[x_name].map(_hashable)
    xs = list(done[x_name].unique())
    numeric = all(_is_number(v) for v in xs)
    xs = sorted(xs) if numeric else sorted(xs, key=str)
    pos = {v: (float(v) if numeric else i) for i, v in enumerate(xs)}
    metrics = metric_columns(done)
    n = max(len(metrics), 1)
    nrows = int(np.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, min(ncols, n), figsize=(3.6 * min(ncols, n), 2.7 * nrows + 0.9),
                             squeeze=False, constrained_layout=True)
    groups = list(done.groupby([done[o].map(_hashable) for o in others], sort=True)) if others \
        else [((), done)]
    colours = plt.cm.viridis(np.linspace(0, 0.9, max(len(groups), 1)))
    for ax, metric in zip(axes.flat, metrics, strict=False):
        for colour, (label, g) in zip(colours, groups, strict=False):
            stats = g.groupby(x_name)[metric].agg(["median", "min", "max"])
            stats = stats.loc[[v for v in xs if v in stats.index]]
            x = [pos[v] for v in stats.index]
            name = ", ".join(f"{o}={v}" for o, v in zip(others, np.atleast_1d(label), strict=False))
            ax.plot(x, stats["median"], "o-", color=colour, ms=3.5, lw=1.3, label=name or None)
            ax.fill_between(x, stats["min"], stats["max"], color=colour, alpha=0.2, lw=0)
        ax.set_title(metric, fontsize=8)
        ax.tick_params(labelsize=7)
        if numeric and _log_ok(xs):
            ax.set_xscale("log")
        if _log_ok(done[metric]):
            ax.set_yscale("log")
        if not numeric:
            ax.set_xticks(range(len(xs)), [str(v) for v in xs], fontsize=7)
        ax.set_xlabel(x_name, fontsize=8)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    if others and len(groups) > 1:
        axes.flat[0].legend(fontsize=6, loc="best")
    seeds = df.attrs.get("seeds") or sorted(df["seed"].unique())
    failed = int((df["status"] != "done").sum())
    fig.suptitle(f"sweep of {df.attrs.get('experiment', '?')} ({df.attrs.get('preset', '?')} preset): "
                 f"{len(done)} of {len(df)} points done" + (f", {failed} failed or missing" if failed else "")
                 + f"\neach metric against {x_name}: line = median over {len(seeds)} seeds, "
                 "band = min to max", fontsize=10, color="k" if not failed else "tab:red")
    return fig
