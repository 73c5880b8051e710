"""Geometry checks on a drawn matplotlib figure, shared by the figure tests: every text
inside the figure, and which curve points a box (a note, a legend) covers."""

from __future__ import annotations

import numpy as np


def drawn_texts(fig) -> list:
    """Every text ``fig`` draws: titles, labels, tick labels in the view, legends, notes
    (matplotlib keeps tick labels of ticks outside the view, and of an ``axis("off")`` panel,
    without drawing them)."""
    hidden = set()
    for ax in fig.axes:
        for axis, (lo, hi) in ((ax.xaxis, sorted(ax.get_xlim())), (ax.yaxis, sorted(ax.get_ylim()))):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not (ax.axison and lo <= tick.get_loc() <= hi):
                    hidden.update((id(tick.label1), id(tick.label2)))
    return [t for t in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_window_extent"))
            if t.get_visible() and t.get_text().strip() and id(t) not in hidden]


def texts_outside(fig, slack: float = 0.5) -> list[str]:
    """The drawn texts of ``fig`` (drawn first) that extend past the figure's edges by more
    than ``slack`` pixels, each with its extent."""
    fig.canvas.draw()
    renderer, box = fig.canvas.get_renderer(), fig.bbox
    out = []
    for t in drawn_texts(fig):
        e = t.get_window_extent(renderer)
        if e.x0 < box.x0 - slack or e.x1 > box.x1 + slack or e.y0 < box.y0 - slack or e.y1 > box.y1 + slack:
            out.append(f"{t.get_text()!r} at {e.bounds}")
    return out


def curve_points(line, per_segment: int = 20) -> np.ndarray:
    """Display coordinates (P, 2) of ``line``'s drawn path: its data points with
    ``per_segment`` points between each two (a box between two records still counts);
    non-finite points dropped (matplotlib breaks the line there)."""
    xy = line.get_xydata().astype(float)
    xy = xy[np.all(np.isfinite(xy), axis=1)]
    if len(xy) < 2:
        return np.empty((0, 2))
    disp = line.get_transform().transform(xy)
    s = np.linspace(0.0, 1.0, per_segment, endpoint=False)[None, :, None]
    dense = (disp[:-1, None, :] * (1 - s) + disp[1:, None, :] * s).reshape(-1, 2)
    pts = np.concatenate([dense, disp[-1:]])
    return pts[np.all(np.isfinite(pts), axis=1)]


def covered(box, lines, pad: float = 1.0) -> dict[str, int]:
    """For each of ``lines`` (Line2D) drawn inside its axes: how many of its path points
    (:func:`curve_points`) lie in the display box ``box`` grown by ``pad`` pixels; only
    lines with a point covered are listed, by label."""
    out = {}
    for line in lines:
        pts = curve_points(line)
        a = line.axes.bbox
        pts = pts[(pts[:, 0] >= a.x0) & (pts[:, 0] <= a.x1) & (pts[:, 1] >= a.y0) & (pts[:, 1] <= a.y1)]
        hit = ((pts[:, 0] >= box.x0 - pad) & (pts[:, 0] <= box.x1 + pad)
               & (pts[:, 1] >= box.y0 - pad) & (pts[:, 1] <= box.y1 + pad))
        if hit.any():
            out[line.get_label()] = int(hit.sum())
    return out
