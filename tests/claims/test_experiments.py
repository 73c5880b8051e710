"""Every registered experiment at size tiny, through the CLI, and the HTML report.

Each experiment is run once per test session (``biasfree run NAME --preset tiny``) into one
folder shared by every pytest-xdist worker, under a file lock per experiment: the runs are
separate xdist groups, so they spread over the workers, and the report tests wait for
(or run) whichever is missing. Each run's exit code says whether every check passed, its
files must hold the keys of docs/cli.md's "Output", and the report built from them must show
every figure and every check; ``run all`` into the same folder then skips them all.
"""

import ast
import html
import json
import re
from pathlib import Path

import numpy as np
import pytest
from figure_checks import covered, texts_outside
from tiny_runs import shared_folder, tiny_run
from toys import toy_experiment
from typer.testing import CliRunner

from biasfree import claims, store
from biasfree.app.cli import app
from biasfree.app.report import render
from biasfree.claims import HEADLINE, REGISTRY, get

runner = CliRunner()


@pytest.fixture(scope="session")
def shared_out(tmp_path_factory, worker_id):
    return shared_folder(tmp_path_factory, worker_id)


@pytest.fixture(scope="session")
def results(shared_out):
    """Every experiment's tiny run: first those no other worker is running (instead of
    idling on a lock), then waiting for the rest. In reverse registry order: the per-experiment
    tests run in registry order on the other workers, so the two meet in the middle; in the same
    order a worker's next per-experiment test waited on the run this fixture had just started,
    and every run was this worker's, one after another (tests/claims/test_experiments.py alone,
    two workers: this fixture's setup 184 s of a 202 s session)."""
    for name in reversed(REGISTRY):
        tiny_run(shared_out, name, wait=False)
    return shared_out, {name: tiny_run(shared_out, name) for name in REGISTRY}


def _per_experiment():
    return [pytest.param(n, marks=pytest.mark.xdist_group(f"exp-{n}")) for n in REGISTRY]


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_claim_is_one_folder_with_its_run_figure_and_sentence_once(name):
    folder = Path(claims.__file__).with_name(name.replace("-", "_"))
    assert {"__init__.py", "run.py", "figure.py"} <= {p.name for p in folder.iterdir()}
    exp = get(name)
    assert exp.claim and exp.paper_claim
    strings = [n.value for p in sorted(folder.glob("*.py"))
               for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
               if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    for sentence in (exp.claim, exp.paper_claim):  # written once: the figure reads result.claim
        assert strings.count(sentence) == 1, sentence


def test_registry_has_the_headline_first():
    assert next(iter(REGISTRY)) == HEADLINE == "leaky-collapse"


def test_list_shows_every_experiment():
    res = runner.invoke(app, ["list"])
    assert res.exit_code == 0
    for name in REGISTRY:
        assert re.search(rf"^{re.escape(name)}\s", res.stdout, re.M)


@pytest.mark.parametrize("name", _per_experiment())
def test_tiny_run_passes_every_check_and_keeps_the_output_contract(shared_out, name):
    out, run = shared_out, tiny_run(shared_out, name)
    failed = store.load(out / name).failed() if (out / name / "result.json").exists() else "no result"
    assert run["exit_code"] == 0, f"failed checks: {failed}\n{run['output']}"
    folder = out / name
    for f in ("result.json", "arrays.npz", "figure.png", "figure.pdf"):
        assert (folder / f).stat().st_size > 0, f"{name}: {f} missing or empty"
    doc = json.loads((folder / "result.json").read_text())
    assert set(store.RESULT_KEYS) <= set(doc)
    assert doc["experiment"] == name and doc["size"] == "tiny" and doc["seed"] == 0
    assert doc["checks"], f"{name} has no checks"
    for key, check in doc["checks"].items():
        assert {"value", "threshold", "passed", "claim"} <= set(check), key
        assert len(check["claim"]) > 20, f"{name}.{key}: state the claim in a sentence"
        assert check["passed"], f"{name}.{key}: {check}"
    with np.load(folder / "arrays.npz", allow_pickle=False) as z:
        assert z.files, f"{name}: no arrays saved"
    # paths written go to stdout
    assert str(folder / "result.json") in run["stdout"]


def test_run_all_skips_what_is_saved(results):
    out, _ = results
    res = runner.invoke(app, ["run", "all", "--preset", "tiny", "--out", str(out)])
    assert res.exit_code == 0, res.output[-3000:]
    for name in REGISTRY:
        assert re.search(rf"{re.escape(name)}\s+skipped", res.output), f"{name} was not skipped"


def test_report_shows_every_figure_and_check(results):
    out, _ = results
    res = runner.invoke(app, ["report", "--out", str(out)])
    assert res.exit_code == 0, res.output
    page = (out / "index.html").read_text()
    assert page == render(out)
    assert "http://" not in page and "https://" not in page, "report must work offline"
    assert page.count("data:image/png;base64,") == len(REGISTRY)
    for name in REGISTRY:
        doc = json.loads((out / name / "result.json").read_text())
        for key in doc["checks"]:
            assert f'id="exp-{name}--{key}"' in page, f"{name}.{key} has no row in the report"


def test_report_reads_headline_first_with_contents_and_cards(results):
    out, _ = results
    page = render(out)
    cards = re.findall(r'<section class="card[^"]*" id="exp-([^"]+)">', page)
    assert cards == list(REGISTRY), "cards: headline first, then registry order"
    assert cards[0] == HEADLINE
    toc = page[page.index("<nav>"):page.index("</nav>")]
    assert re.findall(r'<a href="#exp-([^"]+)">', toc) == list(REGISTRY)
    assert page.index("</nav>") < page.index('id="exp-')
    for name in REGISTRY:
        card = page[page.index(f'id="exp-{name}"'):]
        card = card[:card.index("</section>")]
        exp = get(name)
        assert exp.paper_claim.startswith("Claim "), f"{name}: set paper_claim on its Experiment"
        assert html.escape(exp.paper_claim) in card and html.escape(exp.claim) in card
        res = store.load(out / name)
        n_ok = sum(c.passed for c in res.checks.values())
        assert f"{n_ok} of {len(res.checks)} checks passed" in card
        # claim, then verdict, then figure, then checks, then metrics
        order = [card.index(html.escape(exp.claim)), card.index("checks passed</span>"),
                 card.index("data:image/png;base64,"), card.index("<table class=checks>"),
                 card.index("<summary>metrics")]
        assert order == sorted(order), f"{name}: card out of reading order"
        for key, c in res.checks.items():
            assert html.escape(c.claim) in card, f"{name}.{key}: claim sentence missing"
            if name != HEADLINE:
                assert c.unit, f"{name}.{key}: name the unit of the check's value"
            if c.unit:
                assert f"<td>{html.escape(c.unit)}</td>" in card


def test_units_round_trip_and_old_results_still_load(results, tmp_path):
    out, _ = results
    name = next(n for n in REGISTRY if n != HEADLINE)
    doc = json.loads((out / name / "result.json").read_text())
    assert all(c["unit"] for c in doc["checks"].values())
    assert {k: c.unit for k, c in store.load(out / name).checks.items()} == \
        {k: c["unit"] for k, c in doc["checks"].items()}
    for c in doc["checks"].values():  # a result.json written before units existed
        del c["unit"]
    (tmp_path / name).mkdir()
    (tmp_path / name / "result.json").write_text(json.dumps(doc))
    assert all(c.unit == "" for c in store.load(tmp_path / name).checks.values())


def _in_order(words: list[str], text: str) -> bool:
    """Whether ``words`` appear in ``text`` in order (other table cells may sit between)."""
    tokens = iter(re.sub(r"[│┃]", " ", text).split())
    return all(any(w == t for t in tokens) for w in words)


@pytest.mark.parametrize("columns", ["80", "200"])
def test_console_table_wraps_claims_and_never_cuts_names(results, tmp_path, monkeypatch, capsys,
                                                         columns):
    import dataclasses

    from biasfree.app.cli import _print_checks
    from biasfree.results import at_least

    out, _ = results
    long_name = "a_very_long_check_name_that_a_narrow_terminal_must_not_cut"
    names = [n for n in REGISTRY if n != HEADLINE][:2]
    for n in names:  # real results, plus one check with a long name and claim
        res = store.load(out / n)
        claim = (f"This claim sentence of {n} is long enough that an eighty-column terminal has to "
                 "wrap it over several lines rather than cut it off at the end.")
        checks = res.checks | {long_name: at_least(2.0, 1.0, claim, unit="fraction of L(0)")}
        store.save(dataclasses.replace(res, checks=checks), tmp_path, 0.0)
    monkeypatch.setenv("COLUMNS", columns)
    _print_checks(tmp_path, names)
    text = capsys.readouterr().err
    assert "…" not in text, "nothing in the check table may be truncated"
    assert max(len(line) for line in text.splitlines()) <= int(columns)
    starts = [text.index(f"{n}: ") for n in names] + [len(text)]
    for i, n in enumerate(names):
        table = text[starts[i]:starts[i + 1]]
        res = store.load(tmp_path / n)
        assert f"{sum(c.passed for c in res.checks.values())} of {len(res.checks)} checks" in table
        for key, c in res.checks.items():
            assert re.search(rf"[\s│]{re.escape(key)}[\s│]", table), \
                f"check name {key} cut at COLUMNS={columns}"
            assert _in_order(c.claim.split(), table), f"claim of {key} cut or missing"
            assert _in_order(["unit:", *c.unit.split()], table), f"unit of {key} missing"


def test_saved_result_round_trips(results):
    out, _ = results
    res = store.load(out / HEADLINE)
    assert res.experiment == HEADLINE and res.passed
    assert set(res.arrays) >= {"t", "alphas", "loss", "loss_pred"} and "lr" not in res.arrays  # in config


def test_bad_cli_input_names_the_problem(tmp_path):
    res = runner.invoke(app, ["run", "no-such-experiment", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "unknown experiment" in res.output
    res = runner.invoke(app, ["run", HEADLINE, "--preset", "huge", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "unknown preset 'huge'" in res.output
    res = runner.invoke(app, ["report", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "no results" in res.output
    with pytest.raises(TypeError, match="takes a .*Config"):
        claims.run_experiment(get(HEADLINE), "tiny", 0)


def test_failed_check_is_reported_and_sets_exit_code(tmp_path, monkeypatch):
    from biasfree.claims.base import config
    from biasfree.results import Result, at_most, config_dict

    @config
    class Config:
        n: int = 2

    def failing(cfg, seed, progress=None):
        return Result("failing", seed, config_dict(cfg), {"x": 1.0},
                      {"impossible": at_most(1.0, 0.5, "One is not at most one half, so this fails.")},
                      {"x": np.zeros(cfg.n)})

    exp = toy_experiment("failing", "always fails", failing, Config, {"tiny": Config(), "paper": Config()})
    monkeypatch.setitem(REGISTRY, "failing", exp)
    res = runner.invoke(app, ["run", "failing", "--preset", "tiny", "--out", str(tmp_path)])
    assert res.exit_code == 1
    doc = json.loads((tmp_path / "failing" / "result.json").read_text())
    assert doc["checks"]["impossible"]["passed"] is False


def test_headline_figure_note_and_legends_cover_no_curve(shared_out):
    """The half-loss note of panel (a) and the legends of (a) and (f) leave every curve
    visible (a paper run put the note on the α = 1 curve and (f)'s legend on the dotted
    ones), and no text leaves the figure."""
    tiny_run(shared_out, HEADLINE)
    fig = get(HEADLINE).figure(store.load(shared_out / HEADLINE))
    assert not texts_outside(fig)  # draws it
    a, f = fig.axes[0], fig.axes[5]
    curves_a = [ln for ln in a.get_lines() if len(ln.get_xdata()) > 2]  # not the step marker
    assert len(curves_a) >= 6  # every α and its prediction
    (note,) = [t for t in a.texts if "half loss" in t.get_text()]
    assert covered(note.get_window_extent(), curves_a) == {}
    assert covered(a.get_legend().get_window_extent(), curves_a) == {}
    dotted = [ln for ln in f.get_lines() if ln.get_linestyle() == ":" and len(ln.get_xdata()) > 2]
    assert dotted and covered(f.get_legend().get_window_extent(), f.get_lines()) == {}


def test_headline_metrics_have_one_name_each(shared_out):
    """No two metrics differ only in underscores (half_time_ratio_alpha0 beside
    half_time_ratio_alpha_0 was one number under two names in every sweep's summary)."""
    tiny_run(shared_out, HEADLINE)
    names = list(store.load(shared_out / HEADLINE).metrics)
    squashed = [n.replace("_", "") for n in names]
    twins = sorted(n for n in names if squashed.count(n.replace("_", "")) > 1)
    assert not twins, twins
