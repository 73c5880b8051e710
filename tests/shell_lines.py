"""The shell lines of README.md and docs/*.md, and how ``make test-readme`` treats each
(tests/app/test_readme.py): found in shell blocks (```, ```sh, not an "Output" block) and in
inline code spans; each is run, checked as a synopsis, excepted with a reason, or a ``make``
line. The rules and every exception live here, in one place, with their reasons."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
SHELL_LANGS = ("", "sh", "bash", "shell", "console")
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]*[A-Z]\b|\[--|\||…|η")
"""A synopsis, not a line to copy: an upper-case placeholder (NAME, MODEL, DIR, COMMAND,
SPEC.toml, HOST), an optional part ``[--…]``, a choice ``a|b``, ``…`` or a symbol (η)."""

EXCEPTED: list[tuple[str, str, str]] = [
    # (page, regex the whole line matches, reason): not run; the CLI's parser reads the line
    # and, for run and sweep, every experiment name and preset or spec point is validated
    ("docs/experiments.md", r"biasfree run [a-z-]+",
     "each experiment at the paper preset takes minutes; the same command at --preset tiny runs "
     "for every experiment in make test (tests/claims/test_experiments.py, through the CLI)"),
    ("docs/experiments.md", r"biasfree report",
     "reads the results of the page's runs (not run here, see above); make test builds the report "
     "from every tiny result (tests/claims/test_experiments.py)"),
    ("docs/experiments.md", r"biasfree sweep sweeps/linearity-map\.toml",
     "about 12 minutes at the paper preset (docs/performance.md); its spec is read and every point "
     "validated"),
    ("docs/verdict.md", r"biasfree run verdict-calibration --preset tiny",
     "about 3 minutes even at tiny on 2 loaded cores; the same command runs in make test "
     "(tests/claims/test_experiments.py)"),
    ("docs/performance.md", r"biasfree (run|sweep) .*",
     "the commands whose timings the page reports, minutes each (the point of the page); "
     "tiny runs of every experiment are in make test"),
    ("docs/sweeps.md", r"biasfree sweep sweep\.toml --scheduler tcp://HOST:8786 .*",
     "needs a Dask scheduler at HOST (tests/app/test_sweep.py runs one on this machine)"),
]

OTHER: list[tuple[str, str]] = [
    # shell commands that are not biasfree or make: (regex, why not run)
    (r"pip install -e .*", "installs the package: make test and make test-readme run in the venv it makes"),
    (r"dask (scheduler|worker) .*", "starts a Dask cluster on the user's machines"),
    (r"export JAX_COMPILATION_CACHE_DIR=.*", "sets a variable for the dask worker line after it"),
]

LATE = ("report",)
"""Commands run after the page's other lines: they read what the runs wrote."""


@dataclass(frozen=True)
class Line:
    page: str
    text: str  # as the page writes it, continuation lines joined, comment dropped
    kind: str  # "run", "synopsis", "excepted", "make", "other"; "unknown" fails the test
    reason: str = ""

    @property
    def args(self) -> list[str]:
        """The arguments after ``biasfree`` (or ``make``)."""
        return shlex.split(self.text)[1:]

    @property
    def run_args(self) -> list[str]:
        """What runs, after two substitutions: ``biasfree run … --preset tiny`` (paper presets
        take minutes), and a sweep line with ``--workers`` but no ``--out`` (docs/sweeps.md's
        second) into the first's folder, ``runs/width``, where its 16 points are already saved."""
        args = self.args
        if args[:1] == ["sweep"] and "--workers" in args and "--out" not in args:
            args += ["--out", "runs/width"]  # the folder of the page's first sweep: resumes, 0 recomputed
        if args[:1] == ["run"]:
            if "--preset" in args:
                args[args.index("--preset") + 1] = "tiny"
            else:
                args += ["--preset", "tiny"]
        return args


def _block_lines(body: str) -> list[str]:
    out: list[str] = []
    for raw in body.splitlines():
        if raw[:1].isspace() and out and raw.strip() and not raw.strip().startswith("#"):
            out[-1] += " " + raw.strip()  # a continuation of the line above
        else:
            out.append(raw)
    return [c for c in (re.split(r"\s+#\s", ln, maxsplit=1)[0].strip() for ln in out) if c]


def shell_lines(page: str, text: str) -> list[str]:
    """Every shell command line of ``text``: shell blocks' lines, then inline spans that start
    with ``biasfree ``, ``.venv/bin/biasfree `` or ``make ``."""
    lines = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip().rsplit("\n", 1)[-1]
        if m.group(1).strip() in SHELL_LANGS and not before.startswith("Output"):
            lines += _block_lines(m.group(2))
    prose = FENCE.sub("", text).replace("```", "")
    for span in re.findall(r"`([^`]{1,300})`", prose):
        span = " ".join(span.split())
        if re.match(r"(\.venv/bin/)?biasfree |make ", span):
            lines.append(span)
    return [ln.removeprefix(".venv/bin/") for ln in lines]


def classify(page: str, line: str, required: dict[str, bool]) -> Line:
    """``required``: command -> whether it takes a required argument (a bare ``biasfree sweep``
    in prose names the command, it is not a line to run)."""
    if line.startswith("make "):
        return Line(page, line, "make")
    if not line.startswith("biasfree "):
        for pattern, why in OTHER:
            if re.fullmatch(pattern, line):
                return Line(page, line, "other", why)
        return Line(page, line, "unknown", "neither a biasfree nor a make line, nor listed in "
                    "tests/shell_lines.py OTHER with the reason it is not run")
    for where, pattern, why in EXCEPTED:
        if where == page and re.fullmatch(pattern, line):
            return Line(page, line, "excepted", why)
    words = line.split()
    if PLACEHOLDER.search(line) or (len(words) == 2 and required.get(words[1], False)):
        return Line(page, line, "synopsis", "a synopsis: its command and options are checked")
    return Line(page, line, "run")


# ----------------------------------------------------------------- the pages' fixture files


def dense_files(folder: Path) -> None:
    """m.safetensors (a small bias-free ReLU net, 6 -> 12 -> 1), m0.safetensors (the init it
    'started from') and d.npz (symmetric inputs, a linear target): what docs/verdict.md names."""
    import jax

    import biasfree as bf

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 6))
    X = np.concatenate([X, -X])
    np.savez(folder / "d.npz", X=X, Y=X[:, :1] / 3)
    bf.save_model(bf.init_gaussian(jax.random.PRNGKey(0), (6, 12, 1), scale=0.01), folder / "m0.safetensors")
    bf.save_model(bf.init_gaussian(jax.random.PRNGKey(1), (6, 12, 1), scale=0.02), folder / "m.safetensors")


def conv_files(folder: Path) -> None:
    """m.safetensors: a torch conv state dict (3×3 'same' conv, 3 channels, on 8×8 images, then
    a linear read-out), what docs/conv.md's ``--in-shape 8,8`` line reads; d.npz its data."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    nn = torch.nn
    net = nn.Sequential(nn.Conv2d(1, 3, 3, padding="same", bias=False), nn.ReLU(), nn.Flatten(),
                        nn.Linear(3 * 64, 1, bias=False)).double()
    save_file(net.state_dict(), str(folder / "m.safetensors"))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 64))
    X = np.concatenate([X, -X])
    np.savez(folder / "d.npz", X=X, Y=X @ rng.normal(size=(64, 1)) / 8)


PAGE_FILES = {"docs/verdict.md": dense_files, "docs/conv.md": conv_files}
"""The pages whose shell lines name files no snippet of theirs writes. README.md writes its
own (its own-model snippet saves m.safetensors, m0.safetensors and d.npz)."""


def toml_files(text: str) -> dict[str, str]:
    """The page's ```toml blocks that start with ``# NAME.toml``: NAME.toml -> the block."""
    out = {}
    for m in FENCE.finditer(text):
        first = m.group(2).split("\n", 1)[0]
        if m.group(1).strip() == "toml" and re.fullmatch(r"# [\w.-]+\.toml", first):
            out[first[2:]] = m.group(2)
    return out
