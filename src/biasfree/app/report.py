"""One static HTML page from saved results, in the order a reader thinks (:func:`ordered`).

A table of contents links every experiment with its verdict; each experiment is a card:
what it claims and which of the paper's claims it tests (as its ``result.json`` stores
them), its verdict (n of m checks passed), the config it ran with (the preset and every
field that differs from it, so that a check failed at a user's own settings is not read
as the preset failing), its figure, its checks (claim sentence, value, threshold, unit),
its notes, and its metrics folded away.

Figures are embedded as base64 PNG so the page opens anywhere, offline. A result that
cannot be read (a truncated ``result.json``, a corrupted ``arrays.npz``) is left out of
the page and listed at its top, with the file and what is wrong with it.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from ..claims import HEADLINE, REGISTRY
from ..results import Result, config_dict
from ..store import CorruptResult, atomic_write, clean_leftovers, load_all, load_crashes

STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:auto;padding:1em 1.5em;
  color:#222;line-height:1.4}
h1{margin-bottom:.2em} h2{margin:0 0 .3em 0}
.summary{font-size:110%}
nav ol{padding-left:1.4em} nav li{margin:.25em 0}
nav .claim{color:#555;font-size:90%}
.card{border:1px solid #ccc;border-radius:6px;padding:1em 1.2em;margin:1.5em 0;
  box-shadow:0 1px 3px #0001}
.card.headline{border:2px solid #335}
.tag{font-size:75%;background:#335;color:#fff;border-radius:3px;padding:1px 6px;
  vertical-align:middle;margin-left:.5em}
.verdict{font-weight:bold;border-radius:4px;padding:1px 8px;white-space:nowrap}
.verdict.pass{background:#e3f4e3;color:#15601a} .verdict.fail{background:#fbe0e0;color:#a00}
.claim-line{font-size:105%;margin:.3em 0} .paper{color:#335;margin:.3em 0}
.meta{color:#666;font-size:80%}
img{max-width:100%;display:block;margin:.8em auto}
table{border-collapse:collapse;width:100%}
td,th{border:1px solid #ddd;padding:3px 6px;font-size:88%;vertical-align:top;text-align:left}
th{background:#f4f4f4}
td.num{font-family:ui-monospace,monospace;white-space:nowrap;text-align:right}
td.name{min-width:13em} td.name code{font-size:95%}
tr.fail{background:#fdd} td.ok{color:#15601a;font-weight:bold} td.bad{color:#a00;font-weight:bold}
details{margin-top:.8em} summary{cursor:pointer;color:#335}
.metrics td{font-size:80%}
.notes{font-size:92%;color:#333}
.skipped{border:2px solid #a00;background:#fdd;border-radius:6px;padding:.5em 1em}
.card.crashed{border:2px solid #a00} .verdict.crash{background:#a00;color:#fff}
pre.error{white-space:pre-wrap;font-size:85%;background:#f8f8f8;padding:.5em}
.config{font-size:92%} .config.custom{background:#fff6d5;border-left:4px solid #c90;padding:2px 8px}
"""


def _img(path: Path) -> str:
    if not path.exists():
        return "<p><em>no figure</em></p>"
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.parent.name)} figure" src="data:image/png;base64,{data}">'


def ordered(results: list[tuple[Result, dict]]) -> list[tuple[Result, dict]]:
    """Headline first, then registry order, then results the registry does not know (by name)."""
    rank = {name: i for i, name in enumerate(REGISTRY)} | {HEADLINE: -1}
    return sorted(results, key=lambda rd: (rank.get(rd[0].experiment, len(rank)), rd[0].experiment))


def anchor(name: str) -> str:
    """The HTML id of an experiment's card."""
    return "exp-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name)


def verdict(res: Result) -> tuple[str, str]:
    """(CSS class, text): ``"7 of 8 checks passed"``."""
    n, m = sum(c.passed for c in res.checks.values()), len(res.checks)
    if m == 0:
        return "fail", "no checks"
    return ("pass" if n == m else "fail"), f"{n} of {m} checks passed"


def _breakable(name: str) -> str:
    """A snake_case name that may wrap after its underscores, never inside a word."""
    return "_<wbr>".join(html.escape(part) for part in name.split("_"))


def config_changes(res: Result) -> dict[str, tuple] | None:
    """The fields of ``res``'s effective config that differ from its preset's: field ->
    ``(value, the preset's value as text)``; None when the preset is not known here (a config built
    by hand, or an experiment or preset the registry no longer has)."""
    exp = REGISTRY.get(res.experiment)
    preset = exp.presets.get(res.preset) if exp is not None else None
    if preset is None:
        return None
    base = config_dict(preset)
    return {k: (v, repr(base[k]) if k in base else "no such field")
            for k, v in res.config.items() if k not in base or base[k] != v}


def _config_line(res: Result) -> str:
    changes = config_changes(res)
    preset = f"<code>{html.escape(res.preset)}</code>"
    if changes is None:
        given = ", ".join(f"{html.escape(k)} = {html.escape(repr(v))}" for k, v in res.overrides.items())
        return (f"<p class='config custom'><b>Config.</b> preset {preset} (not a preset of this "
                f"experiment here); overrides recorded: {given or 'none'}. The checks judge these "
                "settings.</p>")
    if not changes:
        return f"<p class=config><b>Config.</b> preset {preset}, no field changed.</p>"
    items = ", ".join(f"<code>{html.escape(k)} = {html.escape(repr(v))}</code> (preset: {html.escape(b)})"
                      for k, (v, b) in changes.items())
    return (f"<p class='config custom'><b>Config.</b> preset {preset} with {len(changes)} field(s) "
            f"changed: {items}. The checks judge these settings, not the preset's.</p>")


def _checks_table(res: Result) -> str:
    units = any(c.unit for c in res.checks.values())  # results saved before units had none
    rows = "".join(
        f'<tr class="{"pass" if c.passed else "fail"}" id="{anchor(res.experiment)}--{html.escape(k)}">'
        f"<td class=name><code>{_breakable(k)}</code></td>"
        f"<td>{html.escape(c.claim)}</td><td class=num>{c.value:.3g}</td>"
        f"<td class=num>{'≤' if c.op == '<=' else '≥'} {c.threshold:.3g}</td>"
        + (f"<td>{html.escape(c.unit)}</td>" if units else "") +
        f'<td class="{"ok" if c.passed else "bad"}">{"pass" if c.passed else "FAIL"}</td></tr>'
        for k, c in res.checks.items())
    return ("<table class=checks><tr><th>check</th><th>what passing shows</th><th>value</th>"
            "<th>threshold</th>" + ("<th>unit</th>" if units else "") + "<th>result</th></tr>"
            + rows + "</table>")


def claims_of(res: Result) -> tuple[str, str]:
    """``(claim, paper_claim)`` as the result stores them; a result saved before they were
    kept in ``result.json`` takes them from the registry (empty when it has no such
    experiment)."""
    if res.claim:
        return res.claim, res.paper_claim
    exp = REGISTRY.get(res.experiment)
    return (exp.claim, exp.paper_claim) if exp is not None else ("", "")


def _card(res: Result, doc: dict, out_dir: Path) -> str:
    name = res.experiment
    cls, text = verdict(res)
    tag = '<span class=tag>headline</span>' if name == HEADLINE else ""
    said, paper_said = claims_of(res)
    claim = f"<p class=claim-line><b>Claim.</b> {html.escape(said)}</p>" if said else ""
    paper = (f"<p class=paper><b>Paper's claim tested.</b> {html.escape(paper_said)}</p>"
             if paper_said else "")
    metrics = "".join(f"<tr><td>{html.escape(k)}</td><td class=num>{v:.6g}</td></tr>"
                      for k, v in res.metrics.items())
    meta = (f"size {html.escape(res.preset)}, seed {res.seed}, "
            f"{doc.get('elapsed_s', float('nan')):.1f} s; versions: "
            + html.escape(", ".join(f"{k} {v}" for k, v in doc.get("versions", {}).items())))
    notes = f"<p class=notes><b>Notes.</b> {html.escape(res.notes)}</p>" if res.notes else ""
    return (
        f'<section class="card{" headline" if tag else ""}" id="{anchor(name)}">'
        f"<h2>{html.escape(name)}{tag}</h2>{claim}{paper}"
        f'<p><span class="verdict {cls}">{text}</span></p>{_config_line(res)}'
        f"{_img(out_dir / name / 'figure.png')}{_checks_table(res)}{notes}"
        f"<details><summary>metrics ({len(res.metrics)})</summary>"
        f"<table class=metrics>{metrics}</table></details>"
        f"<p class=meta>{meta}</p></section>")


def _toc(results: list[tuple[Result, dict]]) -> str:
    items = []
    for res, _ in results:
        said, paper_said = claims_of(res)
        cls, text = verdict(res)
        paper = paper_said.split(":")[0]
        claim = (f'<br><span class=claim>{f"<b>{html.escape(paper)}.</b> " if paper else ""}'
                 f"{html.escape(said)}</span>") if said else ""
        changes = config_changes(res)
        at = "custom settings" if changes is None else f"{len(changes)} changed field(s)"
        custom = "" if changes == {} else f" <span class=meta>at {at}</span>"
        items.append(f'<li><a href="#{anchor(res.experiment)}">{html.escape(res.experiment)}</a> '
                     f'<span class="verdict {cls}">{text}</span>{custom}{claim}</li>')
    return f"<nav><h2>Contents</h2><ol>{''.join(items)}</ol></nav>"


def _skipped(skipped: list[CorruptResult], out_dir: Path) -> str:
    if not skipped:
        return ""
    def where(path: Path) -> str:
        return html.escape(str(path.relative_to(out_dir) if path.is_relative_to(out_dir) else path))

    items = "".join(f"<li><code>{where(e.path)}</code>: {html.escape(e.reason)}</li>" for e in skipped)
    return (f'<div class=skipped id="skipped"><b>{len(skipped)} result(s) could not be read and are '
            f"not shown</b> (rerun them with <code>biasfree run NAME --force</code>):<ul>{items}</ul></div>")


def _crashed(docs: list[dict]) -> str:
    """A card per crashed experiment (``NAME/error.json``): what raised, at which seed, preset
    and overrides; not a result, so not counted among the checks."""
    cards = []
    for doc in docs:
        name = str(doc.get("experiment", "?"))
        where = (f"seed {doc.get('seed', '?')}, preset {doc.get('preset', '?')}, overrides "
                 f"{doc.get('overrides') or 'none'}")
        cards.append(
            f'<section class="card crashed" id="{anchor(name)}"><h2>{html.escape(name)}</h2>'
            f'<p><span class="verdict crash">crashed: no result</span> ({html.escape(where)})</p>'
            f"<pre class=error>{html.escape(str(doc.get('error', '')))}: "
            f"{html.escape(str(doc.get('message', '')))}</pre>"
            f"<p class=meta>traceback: <code>{html.escape(name)}/traceback.txt</code>; an exception "
            "is a bug to report, not a failed check</p></section>")
    return "".join(cards)


def render(out_dir, skipped: list | None = None) -> str:
    """The HTML text for the results under ``out_dir``. Results that cannot be read are
    left out, listed at the top of the page and appended to ``skipped`` (a list of
    :class:`~biasfree.store.CorruptResult`) when it is given."""
    out_dir = Path(out_dir)
    skipped = [] if skipped is None else skipped
    results = ordered(load_all(out_dir, skipped))
    crashed = load_crashes(out_dir)
    if not results and not skipped and not crashed:
        if any((out_dir / f).exists() for f in ("result.json", "error.json")):  # one experiment's own
            raise FileNotFoundError(f"{out_dir} is one experiment's folder; give the folder that holds "
                                    f"it: --out {out_dir.parent}")
        raise FileNotFoundError(f"no results under {out_dir}: run `biasfree run all` first")
    n_pass = sum(c.passed for r, _ in results for c in r.checks.values())
    n_all = sum(len(r.checks) for r, _ in results)
    n_ok = sum(r.passed and bool(r.checks) for r, _ in results)
    unread = f' <a href="#skipped">{len(skipped)} unreadable, not counted</a>.' if skipped else ""
    unread += f" {len(crashed)} crashed (no result, not counted)." if crashed else ""
    summary = (f"<p class=summary>{n_pass} of {n_all} checks passed; {n_ok} of {len(results)} "
               f"experiments pass all their checks.{unread} Paper: Zhang, Saxe, Latham, <i>When Are "
               "Bias-Free ReLU Networks Effectively Linear Networks?</i> (TMLR 2025).</p>")
    cards = "".join(_card(res, doc, out_dir) for res, doc in results)
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>biasfree report</title>"
        f"<style>{STYLE}</style></head><body><h1>biasfree: results</h1>{_skipped(skipped, out_dir)}"
        f"{summary}"
        f"{_toc(results)}{_crashed(crashed)}{cards}</body></html>")


def write_report(out_dir, skipped: list | None = None) -> Path:
    """Write ``out_dir/index.html`` atomically and return its path; unreadable results are
    left out and appended to ``skipped`` (see :func:`render`)."""
    out_dir = Path(out_dir)
    text = render(out_dir, skipped).encode()
    path = out_dir / "index.html"
    clean_leftovers(out_dir, path.name)  # a killed write's temporary file
    atomic_write(path, lambda fh: fh.write(text))
    return path
