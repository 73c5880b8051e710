"""`biasfree show NAME` on an 80-column terminal: every config value, type, bound and header
appears in full (issue 40: Rich's default ellipsis cut '3.1622776601683795e-07' to
'3.1622…' and the header 'Config() default' to 'Config…')."""

import pytest
from typer.testing import CliRunner

from biasfree.app.cli import app
from biasfree.claims import REGISTRY, get
from biasfree.claims.config import DEFAULT_PRESET, field_rows

runner = CliRunner()


def _squeeze(text: str) -> str:
    return "".join(text.split())


def _cells(output: str, mark: str) -> list[list[str]]:
    """The table's rows (``mark`` "│" body, "┃" header), each a list of its cells' texts with
    all whitespace removed: a row starts where its first (never wrapped) column is non-empty,
    and a cell wrapped or folded over several lines is its lines' pieces joined."""
    rows: list[list[str]] = []
    for line in output.splitlines():
        if not line.startswith(mark):
            continue
        parts = [p.strip() for p in line.split(mark)[1:-1]]
        if mark == "┃" and rows:  # the header is one row however many lines it takes
            rows[0] = [a + b for a, b in zip(rows[0], parts, strict=True)]
        elif parts[0] or not rows:
            rows.append(parts)
        else:
            rows[-1] = [a + b for a, b in zip(rows[-1], parts, strict=True)]
    return [[_squeeze(c) for c in row] for row in rows]


@pytest.mark.parametrize("name", [n for n, e in REGISTRY.items() if e.config is not None])
def test_show_prints_every_value_in_full_at_80_columns(name):
    res = runner.invoke(app, ["show", name], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    table = [line for line in res.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(map(len, table)) <= 80  # the table fits the terminal (the docstring soft-wraps)
    exp = get(name)
    header = ["field", "type", "Config() default",
              *(p + (" (run's default)" if p == DEFAULT_PRESET else "") for p in exp.presets), "bounds"]
    assert _cells(res.stdout, "┃") == [[_squeeze(h) for h in header]], res.stdout
    want = [[_squeeze(c) for c in (f, t, repr(d), *(repr(v) for v in values.values()), b)]
            for f, t, d, values, b in field_rows(exp)]
    got = _cells(res.stdout, "│")
    assert got == want, "\n".join(f"{g}\n{w}" for g, w in zip(got, want, strict=False) if g != w)
    assert "…" not in res.stdout
