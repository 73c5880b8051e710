"""One static HTML page from saved results: every figure, every check, metadata.

Figures are embedded as base64 PNG so the page opens anywhere, offline.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from .store import atomic_write, load_all


def _img(path: Path) -> str:
    if not path.exists():
        return "<p><em>no figure</em></p>"
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.parent.name)} figure" src="data:image/png;base64,{data}">'


def render(out_dir) -> str:
    """The HTML text for the results under ``out_dir``."""
    out_dir = Path(out_dir)
    results = load_all(out_dir)
    if not results:
        raise FileNotFoundError(f"no results under {out_dir}: run `biasfree run all` first")
    rows, sections = [], []
    n_pass = sum(c.passed for r, _ in results for c in r.checks.values())
    n_all = sum(len(r.checks) for r, _ in results)
    for res, doc in results:
        for k, c in res.checks.items():
            ok = "pass" if c.passed else "FAIL"
            rows.append(
                f'<tr class="{ok.lower()}"><td>{html.escape(res.experiment)}</td>'
                f"<td>{html.escape(k)}</td><td>{html.escape(c.claim)}</td>"
                f"<td>{c.value:.4g}</td><td>{c.op} {c.threshold:.4g}</td><td>{ok}</td></tr>")
        metrics = "".join(f"<tr><td>{html.escape(k)}</td><td>{v:.6g}</td></tr>"
                          for k, v in res.metrics.items())
        meta = (f"size {html.escape(res.size)}, seed {res.seed}, "
                f"{doc.get('elapsed_s', float('nan')):.1f} s; versions: "
                + html.escape(", ".join(f"{k} {v}" for k, v in doc.get("versions", {}).items())))
        sections.append(
            f'<section id="{html.escape(res.experiment)}"><h2>{html.escape(res.experiment)}</h2>'
            f"<p class=meta>{meta}</p>{_img(out_dir / res.experiment / 'figure.png')}"
            f"<p>{html.escape(res.notes)}</p>"
            f"<details><summary>metrics</summary><table>{metrics}</table></details></section>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 6px;"
             "font-size:90%}tr.fail{background:#fdd}tr.pass td:last-child{color:green}"
             "img{max-width:100%}.meta{color:#555;font-size:85%}")
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>biasfree report</title>"
        f"<style>{style}</style></head><body><h1>biasfree: results</h1>"
        f"<p>{n_pass} of {n_all} checks passed across {len(results)} experiments.</p>"
        "<table><tr><th>experiment</th><th>check</th><th>claim</th><th>value</th>"
        f"<th>threshold</th><th>result</th></tr>{''.join(rows)}</table>"
        f"{''.join(sections)}</body></html>")


def write_report(out_dir) -> Path:
    """Write ``out_dir/index.html`` atomically and return its path."""
    out_dir = Path(out_dir)
    text = render(out_dir).encode()
    path = out_dir / "index.html"
    atomic_write(path, lambda fh: fh.write(text))
    return path
