"""How an :class:`~biasfree.analysis.report.Analysis` prints: a short summary (the headline
verdict and each answer's deciding numbers, never an array) for ``print(res)``,
``res.summary()`` and a notebook's table (``_repr_html_``). Everything else is in the
object's fields and ``res.to_json()``."""

from __future__ import annotations

import html

EVIDENCE_SHOWN = 3
"""Evidence lines shown per answer: the failed ones first, else the last (the deciding) ones."""
MAX_LINES = 25
"""The summary's length at most."""


def _answers(analysis) -> list:
    v = analysis.verdict
    return [j for j in (v.function, v.training, v.trained_function, v.history) if j is not None]


def _deciding(j) -> list:
    failed = [e for e in j.evidence if not e.passed]
    return (failed or list(j.evidence))[-EVIDENCE_SHOWN:]


def _net(analysis) -> str:
    """The model in words: each report (dense or attention) titles itself."""
    d = analysis.data
    return analysis.net.title(d.n, d.source)


def summary(analysis) -> str:
    """The headline, the question it answers, then each answer's sentence and its deciding
    evidence (at most :data:`EVIDENCE_SHOWN` lines each): at most :data:`MAX_LINES` lines."""
    v = analysis.verdict
    lines = [f"Analysis of a {_net(analysis)}",
             f"verdict: {v.level.upper()} (the question: {v.question})"]
    for j in _answers(analysis):
        lines.append(f"- {j.text}")
        lines.extend(f"    {e.line()}" for e in _deciding(j))
    reg = analysis.regime
    if reg is not None:
        lines.append(f"regime: init gain / strongest mode {reg.init_ratio:.3g}, relative gradient "
                     f"{reg.relative_gradient:.3g}")
    st = getattr(analysis, "stage", None)
    if st is not None:  # saddle to saddle (docs/theory.md §11.7): reported, not judged
        lines.extend(["stage: " + st] if isinstance(st, str) else
                     [("stage: " if i == 0 else "    ") + x for i, x in enumerate(st.lines())])
    lines.append("more: .verdict.<answer>.evidence, .notes; .stage; .to_json(); biasfree.save_analysis")
    if len(lines) > MAX_LINES:  # never: 4 answers × 4 lines + 4 + stage 4; a guard on the promise
        lines = lines[:MAX_LINES - 1] + [f"... ({len(lines) - MAX_LINES + 1} lines more: .to_json())"]
    return "\n".join(lines)


def summary_html(analysis) -> str:
    """The summary as a small HTML table (one row per answer: question, level, deciding
    numbers), every text HTML-escaped."""
    v, esc = analysis.verdict, html.escape
    rows = "".join(f"<tr><td>{esc(j.kind)}</td><td><b>{esc(j.level)}</b></td><td>"
                   + "<br>".join(esc(e.line()) for e in _deciding(j)) + "</td></tr>"
                   for j in _answers(analysis))
    return (f"<div><p><b>{esc(v.level.upper())}</b> — {esc(_net(analysis))}; the question: {esc(v.question)}"
            "</p><table><tr><th>answer</th><th>level</th><th>deciding numbers</th></tr>"
            f"{rows}</table></div>")
