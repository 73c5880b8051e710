"""Every ```python snippet of README.md and of the pages under docs/ runs on its own, in a
fresh process with JAX's default settings (``jax_enable_x64`` off), and the numbers it
prints match the page's Output block where it shows one (issue 19 item 5: results keep
their precision in the user's hands). The snippets run side by side, one process each, to
share the wall time. Every relative link of those pages names a file that exists.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# a fresh process per snippet compiles everything anew (~2 min on 2 cores): `make test-readme`
# runs this file, from .ci/run after `make test`
pytestmark = pytest.mark.readme

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# docs/theory.md is the mathematics: its blocks (if any) are not meant to run
PAGES = [README, *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "theory.md")]
TEXTS = {page: page.read_text(encoding="utf-8") for page in PAGES}
ALL_SNIPPETS = [(page.relative_to(ROOT).as_posix(), code) for page, text in TEXTS.items()
                for code in re.findall(r"```python\n(.*?)```", text, re.S)]
# needs a SLURM batch system (dask-jobqueue submits jobs): the one snippet that cannot run here;
# its names are checked instead (bf.sweep(client=...) exists and the spec file is real)
NEEDS_CLUSTER = [code for _, code in ALL_SNIPPETS if "SLURMCluster" in code]
SNIPPETS = [(page, code) for page, code in ALL_SNIPPETS if code not in NEEDS_CLUSTER]
CODES = [code for _, code in SNIPPETS]
IDS = [f"{page}:{i}" for i, (page, _) in enumerate(SNIPPETS)]
THEORY = next(code for code in CODES if "th.leaky_loss" in code)  # "Theory vs simulation"
THEORY_PAGE = next(text for text in TEXTS.values() if THEORY in text)
OUTPUT = re.search(r"Output \(.*?\):\n\n```\n(.*?)```", THEORY_PAGE[THEORY_PAGE.index(THEORY):],
                   re.S).group(1)


def _numbers(line: str) -> np.ndarray:
    return np.array([float(x) for x in re.findall(r"[-+]?\d+\.\d*(?:e[-+]?\d+)?", line.split(":", 1)[1])])


def _lines(text: str) -> dict[str, np.ndarray]:
    return {ln.split(":", 1)[0]: _numbers(ln) for ln in text.strip().splitlines() if ":" in ln}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(returncode, stdout, stderr) of each snippet, all started at once."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_ENABLE_X64")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    procs = []
    for i, code in enumerate(CODES):
        cwd = tmp_path_factory.mktemp(f"snippet{i}")  # a snippet may write (runs/width)
        procs.append(subprocess.Popen([sys.executable, "-c", code], cwd=cwd, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    out = []
    for p in procs:  # 600 s: the slowest (the Tour) takes ~1 min quiet, 4-5 min at load 20
        try:
            stdout, stderr = p.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
        out.append((p.returncode, stdout, stderr))
    return out


def test_pages_have_the_snippets_this_test_reads():
    assert sum(page == "README.md" for page, _ in SNIPPETS) >= 2  # the tour and "Your own model"
    assert len(SNIPPETS) >= 8 and "half times (ReLU)" in OUTPUT
    assert len(NEEDS_CLUSTER) <= 1


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_relative_links_name_files_that_exist(page):
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXTS[page])
    missing = [link for link in links if "://" not in link and not (page.parent / link).exists()]
    assert not missing, f"{page.name} links to missing files: {missing}"


@pytest.mark.parametrize("code", NEEDS_CLUSTER)
def test_cluster_snippet_names_what_exists(code):
    import inspect

    import biasfree as bf
    from biasfree.experiments import read_spec

    assert "client" in inspect.signature(bf.sweep).parameters
    specs = re.findall(r'bf\.sweep\("([^"]+)"', code)
    assert specs, code
    for spec in specs:
        read_spec(ROOT / spec)


@pytest.mark.parametrize("i", range(len(SNIPPETS)), ids=IDS)
def test_snippet_runs_on_its_own(runs, i):
    rc, stdout, stderr = runs[i]
    assert rc == 0, f"snippet {IDS[i]} failed:\n{CODES[i]}\n--- stderr:\n{stderr[-3000:]}"
    assert "will be truncated to dtype float32" not in stderr, stderr[-2000:]  # precision kept


def test_theory_vs_simulation_prints_the_readme_numbers(runs):
    rc, stdout, stderr = runs[CODES.index(THEORY)]
    assert rc == 0, stderr[-3000:]
    got, want = _lines(stdout), _lines(OUTPUT)
    assert got.keys() == want.keys(), (stdout, OUTPUT)
    for key in ("half times (ReLU)", "half times (linear)"):
        # closed forms in float64 of the data's singular values (an SVD, κ ~ s1/s2 ~ 2):
        # ε·κ·size ~ 2e-16·2·40 ~ 2e-14 relative; the page prints 8 decimals, so the
        # bound is its rounding, 5e-9, plus that.
        np.testing.assert_allclose(got[key], want[key], rtol=1e-13, atol=5e-9, err_msg=key)
    # ReLU takes exactly 1/c = 2 times as long: equal up to the printout's rounding
    # (5e-9 on each side, doubled for 2 × linear): 1.5e-8
    np.testing.assert_allclose(got["half times (ReLU)"], 2 * got["half times (linear)"], rtol=0, atol=1.5e-8)
    # the simulated flow's gap to the closed form is the solver's error, not a fixed number:
    # local error <= rtol·|L| + atol = 1e-10·L(0) + 1e-12 per step, summed over at most
    # ~1e3 accepted steps of this stable (logistic) flow: <= 1e-7 of L(0). The page's
    # printed value must satisfy the same bound; both are checked, neither is matched.
    (gap,), (readme_gap,) = got["max |L_sim - L_theory| / L(0)"], want["max |L_sim - L_theory| / L(0)"]
    assert 0 <= gap <= 1e-7 and 0 <= readme_gap <= 1e-7


def _readme_snippet(marker: str) -> int:
    return next(i for i, (page, code) in enumerate(SNIPPETS) if page == "README.md" and marker in code)


def test_readme_tour_prints_what_its_comment_says(runs):
    rc, stdout, stderr = runs[_readme_snippet('runs.twin_gap("relu")')]  # the tour, by its last line
    assert rc == 0, stderr[-3000:]
    relu, pairs = (float(x) for x in stdout.split())
    # pairs: exact identity (§2.3), so only round-off of 1000 float64 GD steps on a net of
    # ~2e3 weights: ≲ ε·steps·size ~ 2e-16·1e3·2e3 ~ 4e-10, far above what it meets (~1e-16)
    assert 0 <= pairs <= 4e-10
    # random init: the comment's "~2e-3" to one significant figure; the value is fixed by the
    # key up to round-off (relative ~1e-10 by the bound above), far from a rounding boundary
    assert f"{relu:.0e}" == "2e-03", relu


def test_readme_own_model_prints_what_its_comments_say(runs):
    rc, stdout, stderr = runs[_readme_snippet("bf.analyse")]
    assert rc == 0, stderr[-3000:]
    level, history, match = stdout.strip().splitlines()
    assert level == "effectively linear"
    assert history.startswith("how the net got here: training from the init, measured: "
                              "not effectively linear")
    # the gap is a max over 3000 float64 GD steps of a seeded torch init: round-off moves it by
    # ~1e-12 relative, far below the two figures the comment gives (0.963% measured here)
    gap = float(re.search(r"trained gap ([\d.]+)% of L\(0\)", history).group(1))
    assert f"{gap:.2g}" == "0.96", history
    # the rerun is the same GD from the same init: only round-off separates it from torch's run
    # (two float64 loops, ε ~ 1e-16 per step, squared in an energy): far below 1e-20 of <f²>
    assert float(match) <= 1e-20, match
