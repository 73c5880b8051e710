"""A sweep's summary figures, drawn from the table of :func:`biasfree.experiments.load_sweep`: each
metric against the first swept field with the spread over seeds, and for a
linearity-map sweep the 0.3% contour of the gap to the linear twin in every slice."""

from __future__ import annotations

import textwrap
from numbers import Real
from pathlib import Path

import numpy as np

from .. import store
from .._figure import plt
from .sweep_table import COLUMNS as NON_METRICS
from .sweep_table import CONTOURS, POINTS, SUMMARY, load_sweep

MAX_PANELS = 12
"""Panels of a summary by default: the checks first (each a claim the experiment tests,
against its threshold), then the metrics; ``all_panels`` (``biasfree sweep --all-panels``)
draws every one."""


def write_summary(out, all_panels: bool = False) -> list[Path]:
    """Write ``out/summary.png`` from the table (at most :data:`MAX_PANELS` panels unless
    ``all_panels``), and for a linearity-map sweep ``out/contours.png`` from the points' gap
    arrays; returns the paths written (none when no point has a result)."""
    df = load_sweep(out)
    if not (df["status"] == "done").any():
        return []
    figures = {SUMMARY: summary_figure(df, all_panels=all_panels)}
    if df.attrs.get("experiment") == "linearity-map":
        figures[CONTOURS] = contour_figure(df, Path(out) / POINTS)
    paths = []
    for name, fig in figures.items():
        paths += store.save_figure(fig, Path(out) / Path(name).stem, exts=("png",), dpi=110)
        plt.close(fig)
    return paths


def metric_columns(df) -> list[str]:
    """The numeric metric columns of a sweep table (not fields, keys or checks)."""
    fields = set(df.attrs.get("grid", [])) | set(df.attrs.get("fixed", {}))
    return [c for c in df.columns
            if c not in fields and c not in NON_METRICS and not c.startswith("check.")
            and df[c].dtype.kind in "fiu" and np.isfinite(df[c].to_numpy(float)).any()
            and df[c].nunique(dropna=True) > 1]  # a constant says nothing against the grid


def check_names(df) -> list[str]:
    """The checks of a sweep table with a finite value somewhere or a failure somewhere (a
    non-finite value fails), those that failed at some point first, else in the table's order."""
    names = [c[len("check."):-len(".value")] for c in df.columns
             if c.startswith("check.") and c.endswith(".value")]
    names = [n for n in names
             if np.isfinite(df[f"check.{n}.value"].to_numpy(float)).any() or _fails(df, n).any()]
    return sorted(names, key=lambda n: not _fails(df, n).any())  # stable: the table's order within each


def _fails(df, name: str) -> np.ndarray:
    """Which rows of ``df`` failed check ``name`` (rows without the check: False)."""
    col = f"check.{name}.passed"
    if col not in df:
        return np.zeros(len(df), bool)
    return df[col].map(_is_false).to_numpy(bool)


def _is_false(v) -> bool:
    """A table's ``passed`` cell that says False (None or NaN, a point without it: no)."""
    return isinstance(v, bool | np.bool_) and not v


def panels(df, all_panels: bool = False, limit: int = MAX_PANELS) -> tuple[list[tuple[str, str]], int]:
    """``([(kind, name)], hidden)``: the summary's panels, the checks first (kind "check";
    those that failed somewhere first of all), then every metric that varies and is not a
    check's own value (kind "metric"), at most ``limit`` unless ``all_panels``; ``hidden``
    how many were left out."""
    checks = check_names(df)
    items = [("check", c) for c in checks] + [("metric", m) for m in metric_columns(df) if m not in checks]
    shown = items if all_panels else items[:limit]
    return shown, len(items) - len(shown)


_UNITS = (("_steps", "steps"), ("_s", "s"))  # a metric's unit where its name says it


def readable(name: str, unit: str = "") -> str:
    """A metric's or a check's name for a panel title: words, α and σ for ``alpha_X`` and
    ``scale_X``, then the unit if known (``"half_loss_steps_alpha_0.5"`` ->
    ``"half loss steps, α = 0.5 (steps)"``)."""
    import re

    if not unit:
        stem = re.sub(r"_(alpha|scale)_[^_]+$", "", name)
        unit = next((u for suffix, u in _UNITS if stem.endswith(suffix)), "")
    text = re.sub(r"_alpha_([0-9.e+-]+)", r", α = \1", name)
    text = re.sub(r"_scale_([0-9.e+-]+)", r", σ = \1", text)
    text = re.sub(r"\balpha", "α", text.replace("_", " "))
    return text + (f" ({unit})" if unit else "")


def _log_ok(values) -> bool:
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return v.size > 1 and bool(np.all(v > 0)) and v.max() / v.min() > 30


def _hashable(v):
    if isinstance(v, list | np.ndarray):
        return tuple(v)
    return v.item() if isinstance(v, np.generic) else v


def summary_figure(df, ncols: int = 4, all_panels: bool = False):
    """One panel per check, then per metric (:func:`panels`; at most :data:`MAX_PANELS`
    unless ``all_panels``): median over seeds against the first swept field (``seed`` if
    nothing is swept), the min–max band over seeds shaded, one line per combination of the
    other swept fields; a check's panel draws its threshold, says how many points pass and
    marks each point that fails it with a red cross (at the top edge where its value is not
    finite), its title naming the x values where it fails."""
    done = df[df["status"] == "done"].copy()
    grid = list(df.attrs.get("grid", []))
    x_name = grid[0] if grid else "seed"
    others = grid[1:]
    done[x_name] = done[x_name].map(_hashable)
    xs = list(done[x_name].unique())
    numeric = all(isinstance(v, Real) and not isinstance(v, bool) for v in xs)
    xs = sorted(xs) if numeric else sorted(xs, key=str)
    pos = {v: (float(v) if numeric else i) for i, v in enumerate(xs)}
    shown, hidden = panels(done, all_panels)
    n = max(len(shown), 1)
    nrows = int(np.ceil(n / ncols))
    # fixed margins in inches, not constrained_layout: every panel is alike (a title of one
    # line, 7-pt ticks), and constrained_layout took a large share of a many-panel summary's
    # time (docs/performance.md, "Sweeps")
    titles = [_panel_title(done, kind, panel, df.attrs.get("check_units") or {}, x_name)
              for kind, panel in shown]
    t_lines = max([t.count("\n") + 1 for t in titles] + [1])
    failing = _failing_line(done)
    sup_lines = 2 + bool(hidden) + failing.count("\n") + bool(failing)
    # margins in inches: the suptitle's lines, then the panels' titles of up to t_lines lines
    top, gap = 0.3 + 0.19 * sup_lines + 0.13 * t_lines, 0.75 + 0.13 * t_lines
    w = max(3.6 * min(ncols, n), 7.2)  # at least the title's width
    h = top + 0.45 + 2.3 * nrows + gap * (nrows - 1)
    fig, axes = plt.subplots(nrows, min(ncols, n), figsize=(w, h), squeeze=False,
                             gridspec_kw={"left": 0.55 / w, "right": 1 - 0.15 / w, "bottom": 0.45 / h,
                                          "top": 1 - top / h, "wspace": 0.3, "hspace": gap / 2.3})
    groups = list(done.groupby([done[o].map(_hashable) for o in others], sort=True)) if others \
        else [((), done)]
    colours = plt.cm.viridis(np.linspace(0, 0.9, max(len(groups), 1)))
    for ax, (kind, panel), title in zip(axes.flat, shown, titles, strict=False):
        metric = f"check.{panel}.value" if kind == "check" else panel
        for colour, (label, g) in zip(colours, groups, strict=False):
            stats = g.groupby(x_name)[metric].agg(["median", "min", "max"])
            stats = stats.loc[[v for v in xs if v in stats.index]]
            x = [pos[v] for v in stats.index]
            name = ", ".join(f"{o}={v}" for o, v in zip(others, label, strict=True))  # label: a tuple
            ax.plot(x, stats["median"], "o-", color=colour, ms=3.5, lw=1.3, label=name or None)
            ax.fill_between(x, stats["min"], stats["max"], color=colour, alpha=0.2, lw=0)
        if kind == "check":
            _threshold(ax, done, panel, xs, pos, x_name)
            _crosses(ax, done, panel, pos, x_name)
        ax.set_title(title, fontsize=8, color="tab:red" if kind == "check" and "✗" in title else "k")
        ax.tick_params(labelsize=7)
        if numeric and _log_ok(xs):
            ax.set_xscale("log")
        if _log_ok(done[metric]):
            ax.set_yscale("log")
        if not numeric:
            ax.set_xticks(range(len(xs)), [str(v) for v in xs], fontsize=7)
        ax.set_xlabel(x_name, fontsize=8)
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    if others and len(groups) > 1:
        axes.flat[0].legend(fontsize=6, loc="best")
    seeds = df.attrs.get("seeds") or sorted(df["seed"].unique())
    fig.suptitle(f"sweep of {df.attrs.get('experiment', '?')} ({df.attrs.get('preset', '?')} preset): "
                 f"{done_line(df)}\nthe checks (red dashes: threshold), then the metrics, against {x_name}: "
                 f"line = median over {len(seeds)} seeds, band = min to max"
                 + (f"\n{len(shown)} of {len(shown) + hidden} panels; all_panels=True (biasfree sweep "
                    "--all-panels) draws the rest" if hidden else "") + (f"\n{failing}" if failing else ""),
                 fontsize=10, color="k" if len(done) == len(df) and not failing else "tab:red",
                 y=1 - 0.1 / h)  # its lines end above the first row's titles
    return fig


def _panel_title(done, kind: str, name: str, units: dict, x_name: str = "seed") -> str:
    """A panel's title, wrapped to its width: the readable name (:func:`readable`); for a
    check "check: ...", how many points pass, and the x values of those that fail."""
    title = readable(name, units.get(name, ""))
    if kind == "check":
        fails = _fails(done, name)
        n_fail = int(fails.sum())
        bad = int((~np.isfinite(done[f"check.{name}.value"].to_numpy(float)[fails])).sum())
        verdict = "✓ every point passes" if n_fail == 0 else (
            f"✗ {n_fail} of {len(fails)} fail (red ×"
            + (f"; {bad} not finite, × at the top edge" if bad else "")
            + f"), at {x_name} = {_values(done[x_name][fails])}")
        title = f"check: {title}\n{verdict}"
    return "\n".join(textwrap.fill(part, 52) for part in title.split("\n"))


def _values(col, most: int = 6) -> str:
    """The distinct values of ``col``, sorted, at most ``most`` of them then "…"."""
    vs = list(dict.fromkeys(col.map(_hashable)))
    vs = sorted(vs) if all(isinstance(v, Real) for v in vs) else sorted(vs, key=str)
    shown = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in vs[:most])
    return shown + (", …" if len(vs) > most else "")


def _crosses(ax, done, name: str, pos: dict, x_name: str) -> None:
    """A red cross at each point that fails check ``name``: at its value, or at the panel's
    top edge (with "not finite") where its value is NaN or infinite."""
    rows = done[_fails(done, name)]
    if rows.empty:
        return
    x = np.array([pos[_hashable(v)] for v in rows[x_name]], float)
    y = rows[f"check.{name}.value"].to_numpy(float)
    ok = np.isfinite(y)
    style = {"marker": "x", "color": "tab:red", "ms": 7, "mew": 1.8, "ls": "none", "zorder": 5}
    ax.plot(x[ok], y[ok], **style)
    if not ok.all():
        ax.plot(x[~ok], np.full((~ok).sum(), 0.97), transform=ax.get_xaxis_transform(), clip_on=False,
                **style)


def _failing_line(done) -> str:
    """The suptitle's line naming the checks that failed and at how many points ("" if none)."""
    tally = [(n, int(_fails(done, n).sum())) for n in check_names(done)]
    tally = [(n, k) for n, k in tally if k]
    if not tally:
        return ""
    text = "failed checks: " + ", ".join(f"{n} (at {k} point{'s' * (k > 1)})" for n, k in tally)
    return textwrap.fill(text, 150)


def _threshold(ax, done, name: str, xs, pos, x_name: str) -> None:
    """A check's threshold (the median over the points at each x) as red dashes."""
    col = f"check.{name}.threshold"
    if col not in done:  # a table written before thresholds were
        return
    med = done.groupby(x_name)[col].median()
    med = med.loc[[v for v in xs if v in med.index]]
    ax.plot([pos[v] for v in med.index], med.to_numpy(float), "--", color="tab:red", lw=1.0)


def done_line(df) -> str:
    """``"38 of 40 points done, 1 crashed, 1 missing, 3 with failed checks"``."""
    status = df["status"].value_counts()
    crashed = int(status.get("crashed", 0) + status.get("failed", 0))  # "failed": an older table's name
    extra = [f"{crashed} crashed"] if crashed else []
    extra += [f"{int(status['missing'])} missing"] if status.get("missing", 0) else []
    n_checks = int(df["passed"].map(_is_false).sum()) if "passed" in df else 0
    extra += [f"{n_checks} with failed checks"] if n_checks else []
    return f"{int(status.get('done', 0))} of {len(df)} points done" + "".join(f", {e}" for e in extra)


def _slices(done):
    """The done rows grouped by every swept field but the seed and ``alphas`` (pandas >= 2
    names each group by a tuple, also for one field): ``[(label, rows)]``."""
    grid = [g for g in done.attrs.get("grid", []) if g != "alphas"]
    if not grid:
        return [("", done)]
    return [(", ".join(f"{g}={v}" for g, v in zip(grid, k, strict=True)), rows)
            for k, rows in done.groupby([done[g].map(_hashable) for g in grid], sort=False)]


def _slice_gaps(rows, points_dir):
    """Median gap over seeds and inits per α and kind for one slice's rows, read from
    their ``arrays.npz``: ``({kind: {α: (W, S) median}}, scales, widths, paper level,
    number of points)``. Rows that swept α (one α each) are merged by α."""
    pooled: dict = {}
    for key in rows["point"]:
        with np.load(Path(points_dir) / key / "arrays.npz", allow_pickle=False) as z:
            scales, widths, level = z["scales"], z["widths"], float(z["paper_level"])
            for kind in ("gap", "gap_biased"):
                if kind in z.files:
                    for ia, al in enumerate(z["alphas"]):
                        pooled.setdefault(kind, {}).setdefault(float(al), []).append(z[kind][ia])
    meds = {kind: {al: np.median(np.concatenate(g, axis=-1), axis=-1) for al, g in sorted(by_a.items())}
            for kind, by_a in pooled.items()}
    return meds, scales, widths, level, len(rows)


def contour_figure(df, points_dir, ncols: int = 5):
    """For a sweep of ``linearity-map``: one panel per slice (a combination of the swept
    fields other than the seed and α) and kind (bias-free, biased), on init std σ ×
    width m. Colour: the median gap to the linear twin over seeds and inits at the first
    α, as a fraction of L(0), blue below the paper's 0.3% and red above; lines: where the
    median crosses 0.3%, one per α. The gaps are read from each point's ``arrays.npz``
    under ``points_dir``."""
    from matplotlib.colors import TwoSlopeNorm

    from ..claims.linearity_map.figure import log_edges, scale_width_axes

    done = df[df["status"] == "done"]
    slices = [(label, *_slice_gaps(rows, points_dir)) for label, rows in _slices(done)]
    level = slices[0][4]
    kinds = [(name, k) for name, k in (("bias-free", "gap"), ("biased", "gap_biased")) if k in slices[0][1]]
    cols = min(ncols, len(slices))
    rows_per_kind = int(np.ceil(len(slices) / cols))
    fig, axes = plt.subplots(rows_per_kind * len(kinds), cols, squeeze=False, constrained_layout=True,
                             figsize=(3.3 * cols + 1.2, 3.0 * rows_per_kind * len(kinds) + 1.1))
    lv = np.log10(level)
    lowest = min(float(np.min(next(iter(sl[1][k].values())))) for sl in slices for _, k in kinds)
    norm = TwoSlopeNorm(vcenter=lv, vmin=min(lv - 0.5, max(np.log10(max(lowest, 1e-16)), lv - 3)), vmax=0.0)
    colours = plt.cm.tab10(np.arange(10))
    mesh = None
    for r, (kind, k) in enumerate(kinds):
        for i, (label, meds, scales, widths, _, n_points) in enumerate(slices):
            ax = axes[r * rows_per_kind + i // cols, i % cols]
            by_alpha = meds[k]
            first = next(iter(by_alpha.values()))
            mesh = ax.pcolormesh(log_edges(scales), log_edges(widths),
                                 np.clip(np.log10(first), norm.vmin, norm.vmax), norm=norm, cmap="RdBu_r",
                                 shading="flat")
            S, W = np.meshgrid(scales, widths)
            notes = []
            for ia, (al, med) in enumerate(by_alpha.items()):
                below = float(np.mean(med <= level))
                if med.min() < level < med.max():
                    ax.contour(S, W, med, levels=[level], colors=[colours[ia % 10]], linewidths=2)
                    ax.plot([], [], color=colours[ia % 10], lw=2, label=f"α={al:g}: {below:.0%} ≤ 0.3%")
                else:
                    notes.append(f"α={al:g}: {'every' if below == 1 else 'no'} cell ≤ 0.3%")
            if notes:
                ax.text(0.03, 0.03, "\n".join(notes), transform=ax.transAxes, fontsize=6.5, va="bottom",
                        bbox={"facecolor": "w", "alpha": 0.8, "lw": 0})
            if ax.get_lines():
                ax.legend(fontsize=6, loc="upper right")
            scale_width_axes(ax, scales, widths)
            ax.tick_params(labelsize=7)
            ax.set_xlabel("init std σ", fontsize=8)
            ax.set_ylabel("width m", fontsize=8)
            ax.set_title(f"{kind}{', ' + label if label else ''} ({n_points} points)", fontsize=8)
    for ax in axes.flat:
        if not ax.has_data():
            ax.axis("off")
    first_alpha = next(iter(slices[0][1]["gap"]))
    cb = fig.colorbar(mesh, ax=axes, shrink=0.6,
                      label=f"log10 median gap (fraction of L(0)) at α={first_alpha:g}")
    cb.ax.axhline(lv, color="k", lw=1.5)
    fig.suptitle(f"linearity-map sweep: where the gap to the linear twin is ≤ 0.3% of L(0) (blue; lines: "
                 f"the 0.3% contour of the median over seeds and inits, per α)\n{done_line(df)}",
                 fontsize=10, color="k" if len(done) == len(df) else "tab:red")
    return fig
