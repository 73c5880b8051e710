"""Command line: ``biasfree list | show NAME | run [NAME…|all] | report | analyse | sweep``.

Progress and logs go to stderr (Rich); the paths written go to stdout, one a line. Bad
input exits 2 with one line (``error: ...``), never a traceback: a usage error (click's, e.g.
``--seed abc``) as much as a refused value. Arguments, paths, option values and configs are
checked before JAX is imported (this module and ``import biasfree`` load no JAX; each command
imports what it runs after its checks), so a refusal takes a few tenths of a second; errors
only a computation finds (a diverging ``--lr``) are refused the same way when they come. The
other exit statuses: each command's help (``run``'s: docs/cli.md, "Exit status").
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import progress as rp
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import _validate as validate
from .analyse_options import TRAIN_STEPS, check_options, train_option
from .cli_errors import OneLineErrors, err
from .cli_errors import refuse as _refuse
from .cli_errors import refusing as _refusing

app = typer.Typer(add_completion=False, no_args_is_help=False, cls=OneLineErrors,
                  help="When are bias-free ReLU networks effectively linear networks?")


def _one_host_device_per_core() -> None:
    """Let ensembles spread their members over the cores (biasfree.dynamics.batching, LAYOUTS): XLA
    reads the host device count once, when JAX starts its CPU backend, which has not
    happened yet when a command begins. An XLA_FLAGS that already sets it is kept."""
    import os

    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        count = f"--xla_force_host_platform_device_count={os.cpu_count() or 1}"
        os.environ["XLA_FLAGS"] = f"{flags} {count}".strip()


@app.command("list")
def list_() -> None:
    """List the experiments, one line each."""
    from ..claims import REGISTRY  # the claim packages: no JAX, no run or figure module

    for name, exp in REGISTRY.items():
        typer.echo(f"{name:20s} {exp.claim}")


@app.command()
def run(
    names: Annotated[list[str] | None, typer.Argument(
        help="experiment names, or 'all' (default: the headline, leaky-collapse)",
        show_default=False)] = None,
    preset: Annotated[str | None, typer.Option(
        "--preset", help="named config: tiny (seconds) or paper (minutes; the default)",
        show_default=False)] = None,
    sets: Annotated[list[str] | None, typer.Option(
        "--set", metavar="FIELD=VALUE",
        help="set a config field; VALUE is a TOML literal (200, 0.01, [0.0, 1.0]); "
             "NAME.FIELD=VALUE sets it for experiment NAME only; repeatable",
        show_default=False)] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="TOML file: FIELD = VALUE lines, [NAME] tables, preset = \"tiny\"",
        show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="random seed, 0 <= S < 2**31")] = 0,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("results"),
    force: Annotated[bool, typer.Option("--force", help="rerun even if a saved result matches")] = False,
) -> None:
    """Run experiments (default: the headline, leaky-collapse) and save their results.

    Each config starts from --preset, then the --config file, then each --set. An
    experiment whose saved result has the same config, seed and biasfree version is
    skipped (--force reruns it); see `biasfree show NAME` for the fields. A second run into
    the same OUT waits while another process computes an experiment, then reuses its result.

    Exit status: 0 all checks passed, 1 a check failed, 2 bad input (nothing run),
    3 an experiment crashed (its traceback in OUT/NAME/traceback.txt; the others run)."""
    from ..claims import HEADLINE, get, known
    from ..claims.config import ConfigError, parse_sets, plan, read_config_file

    with _refusing(TypeError, ValueError, KeyError):  # configs are light: all before JAX runs
        validate.seed(seed, "--seed")
        validate.writable_folder("--out", out)
        names = list(names or [HEADLINE])  # "all": every experiment; each named one once
        chosen = [get(n) for n in (known() if "all" in names else dict.fromkeys(names))]
        file_doc = read_config_file(config) if config is not None else {}
        overrides = parse_sets(sets)
    with _refusing(ConfigError):
        planned = plan(chosen, preset, file_doc, overrides, known=known())
    _one_host_device_per_core()
    from contextlib import ExitStack

    from .. import store
    from .claim import claim
    from .pipeline import Crash, run_point, save

    failed, crashed = [], []
    columns = (rp.SpinnerColumn(), TextColumn("[bold]{task.fields[exp]}[/] {task.description}"),
               TimeElapsedColumn())
    with Progress(*columns, console=err, transient=False) as bar, ExitStack() as held:
        for p in planned:
            n, folder = p.experiment.name, out / p.experiment.name
            held.close()  # the last experiment's claim; one writer per result folder (app/claim.py):
            held.enter_context(claim(out, "computing", lambda line: bar.console.print(  # wait for another
                escape(line), soft_wrap=True), name=n))  # run computing it, then reuse its result
            store.clean_leftovers(out, n)  # a killed save's temporary folders; restores its old result
            if (folder / "result.json").exists():
                same, why = store.reusable(folder, n, p.recorded, seed)
                if same and not force:
                    try:
                        passed = store.load(folder).passed
                    except store.CorruptResult as e:  # e.g. a damaged arrays.npz: computed again
                        same, why = False, f"{e.path.name} unreadable ({e.reason})"
                    else:
                        bar.console.print(f"[bold]{n}[/] skipped: {escape(why)} (--force reruns it)",
                                          soft_wrap=True)
                        if not passed:
                            failed.append(n)
                        continue
                bar.console.print(f"[bold]{n}[/] rerunning: {escape('--force' if same else why)}",
                                  soft_wrap=True)
            task = bar.add_task("starting", exp=n, total=None)
            ran = run_point(p, seed, lambda msg, task=task: bar.update(task, description=msg))
            paths = save(ran, out)  # outside the run: a failed save (OSError) is not a crash
            if isinstance(ran, Crash):  # a crash is not a result: recorded, the others run
                crashed.append(n)
                bar.update(task, description="[bold red]crashed[/]", total=1, completed=1)
                err.print(f"[red]error:[/] {n} crashed (seed {seed}, preset {p.preset}, "
                          f"overrides {escape(str(p.overrides or 'none'))}): "
                          f"{escape(ran.line())}; traceback in {escape(str(paths[-1]))}"
                          + (f"; its last result kept in {escape(str(paths[0].parent))}"
                             if paths[0].parent.name == store.PREVIOUS else ""),
                          soft_wrap=True)
                continue
            result = ran.result
            status = "[green]all checks passed[/]" if result.passed else \
                f"[red]failed: {', '.join(result.failed())}[/]"
            bar.update(task, description=status, total=1, completed=1)
            for path in paths:
                typer.echo(str(path))
            if not result.passed:
                failed.append(n)
    _print_checks(out, [p.experiment.name for p in planned if p.experiment.name not in crashed])
    if failed:
        err.print(f"[red]{len(failed)} experiment(s) failed a check: {', '.join(failed)}[/]")
    if crashed:
        err.print(f"[bold red]{len(crashed)} experiment(s) crashed: {', '.join(crashed)}[/] "
                  f"(exit 3; tracebacks in {escape(str(out))}/NAME/traceback.txt)")
        raise typer.Exit(3)
    if failed:
        raise typer.Exit(1)


@app.command()
def show(name: Annotated[str, typer.Argument(help="experiment name")]) -> None:
    """Print an experiment's claim, its config fields and its presets."""
    import inspect

    from ..claims import get
    from ..claims.config import DEFAULT_PRESET, field_rows

    with _refusing(KeyError):
        exp = get(name)
    con = Console()
    con.print(f"[bold]{exp.name}[/]: {escape(exp.claim)}")
    if exp.paper_claim:
        con.print(f"[bold]paper:[/] {escape(exp.paper_claim)}")
    if exp.config is None:
        con.print("(no config fields)")
        return
    doc = inspect.getdoc(exp.config) or ""
    if doc and not doc.startswith(f"{exp.config.__name__}("):  # not dataclass's generated one
        con.print(doc, highlight=False, markup=False, soft_wrap=True)
    table = Table(title=f"fields of {exp.name} (--set FIELD=VALUE)", title_justify="left")
    for i, col in enumerate(("field", "type", "Config() default", *exp.presets, "bounds")):
        # fold, never cut: a value wider than its column breaks across lines (Rich's default
        # ellipsis showed "3.1622…" and "Config…" at 80 columns)
        table.add_column(col + (" (run's default)" if col == DEFAULT_PRESET else ""), no_wrap=i == 0,
                         overflow="fold")
    for fname, tname, default, values, bounds in field_rows(exp):
        cells = [escape(repr(v)) if v == default else f"[bold]{escape(repr(v))}[/]"
                 for v in values.values()]
        table.add_row(fname, escape(tname), escape(repr(default)), *cells, escape(bounds))
    con.print(table)
    con.print(f"Presets: {', '.join(exp.presets)} (bold: differs from Config()). "
              f"Example: biasfree run {exp.name} --preset tiny --set FIELD=VALUE", highlight=False)


def _print_checks(out: Path, names: list[str]) -> None:
    """One table per experiment, titled with its verdict: every check's full name, the
    claim it tests (wrapped, with its unit), value, threshold and result. Names are
    never cut: on a wide terminal the claim has its own column, on a narrow one it is
    wrapped under the name."""
    from rich.text import Text

    from .. import store

    results = [store.load(out / n) for n in names]
    name_w = max((len(k) for r in results for k in r.checks), default=10)
    wide = err.width >= name_w + 80  # room for the value columns and a 40-character claim
    for res in results:
        n_ok = sum(c.passed for c in res.checks.values())
        colour = "green" if res.passed else "red"
        table = Table(title=Text.assemble((res.experiment, "bold"), ": ",
                                          (f"{n_ok} of {len(res.checks)} checks passed", colour)),
                      show_lines=True, width=min(err.width, name_w + 140) if wide else None)
        table.add_column("check" if wide else "check and claim", no_wrap=wide, min_width=name_w,
                         ratio=None if wide else 1)
        if wide:
            table.add_column("claim", ratio=1)
        table.add_column("value", justify="right", no_wrap=True)
        table.add_column("threshold", no_wrap=True)
        table.add_column("pass", no_wrap=True)
        for k, c in res.checks.items():
            claim = Text(c.claim)
            if c.unit:
                claim.append(f"\nunit: {c.unit}", style="dim")
            first = [Text(k, style="bold"), claim] if wide else \
                [Text.assemble((k, "bold"), "\n", claim)]
            table.add_row(*first, f"{c.value:.3g}", f"{c.op} {c.threshold:.3g}",
                          Text("yes", "green") if c.passed else Text("NO", "bold red"))
        err.print(table)


@app.command()
def report(out: Annotated[Path, typer.Option(help="results folder")] = Path("results")) -> None:
    """Write OUT/index.html: every figure and check from the saved results. A result that
    cannot be read is left out with a warning naming its file (and marked on the page);
    the command then exits 1 after writing the page for the rest."""
    with _refusing():
        validate.results_folder("--out", out)
    from .report import write_report

    skipped: list = []
    try:
        with _refusing(FileNotFoundError, NotADirectoryError):
            path = write_report(out, skipped)
    except OSError as e:
        raise _refuse(f"cannot write the report in {out}: {e}") from None
    for e in skipped:
        err.print(f"[yellow]warning:[/] skipped {escape(str(e))}", soft_wrap=True)
    from ..store import load_crashes

    for doc in load_crashes(out):
        err.print(f"[yellow]warning:[/] {escape(str(doc.get('experiment')))} crashed (no result; "
                  "shown as a crashed card)", soft_wrap=True)
    typer.echo(str(path))
    if skipped:
        raise typer.Exit(1)


@app.command()
def analyse(
    model: Annotated[Path, typer.Argument(help="weights: .safetensors or .npz (bias-free nets, or linear "
                                               "attention: W_V with W_KQ or W_K, W_Q)")],
    data: Annotated[str | None, typer.Option(help="required: the data the net is judged on, a .npz (X, Y) / "
                                                  ".csv file or a bundled set (digits, iris, wine, "
                                                  "breast_cancer, diabetes)", show_default=False)] = None,
    alpha: Annotated[float | None, typer.Option(help="leaky slope α: 0 ReLU, 1 linear (needed "
                                                     "unless the file stores it)")] = None,
    train: Annotated[bool, typer.Option("--train", help="also train beside the twin with the default "
                                                        "steps: GD's step and horizon from the data's scale; "
                                                        f"{TRAIN_STEPS} steps of an --optimiser (as "
                                                        "biasfree.analyse(train=optimiser))")] = False,
    train_steps: Annotated[int, typer.Option(min=0, help="also train K steps beside the twin (0: no)")] = 0,
    optimiser: Annotated[str, typer.Option(help="with --train or --train-steps: gd or an optax one (sgd, "
                                                "momentum, nesterov, adam, adamw, rmsprop, sign_sgd, lion, "
                                                "muon), its twin by biasfree.optimiser_twin (ε, decay "
                                                "scaled)")] = "gd",
    batch_size: Annotated[int | None, typer.Option(min=1, help="with --optimiser: points per step, drawn as "
                                                        "mirror pairs (default: full batch)")] = None,
    random_batches: Annotated[bool, typer.Option("--random-batches", help="with --batch-size: plain "
                                                 "random batches, not mirror pairs (which need data "
                                                 "stored as [X; -X])")] = False,
    lr: Annotated[float | None, typer.Option(help="step η of --train-steps or of an --optimiser (default "
                                                  "0.01; GD with --train: ¼ of the estimated stability "
                                                  "limit)")] = None,
    n_records: Annotated[int, typer.Option(min=2, help="points of the stored training curves (the gap is "
                                                "measured at every step whatever this is)")] = 201,
    time_budget: Annotated[float, typer.Option(help="seconds of training at most (then it stops)")] = 120.0,
    t_max: Annotated[float | None, typer.Option(help="horizon of the predicted curve without "
                                                     "training (default: from the data's modes)")] = None,
    init: Annotated[Path | None, typer.Option(help="weights training started from: how MODEL got here "
                                                   "(--train[-steps] reruns from INIT)")] = None,
    in_shape: Annotated[str | None, typer.Option(help="a torch conv state dict's input spatial shape "
                                                      "[and padding], e.g. 8,8 or 8,8,valid")] = None,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("analysis"),
) -> None:
    """Is MODEL effectively linear on the data? A graded verdict (docs/theory.md §6) on its
    function, its training (predicted, or measured with --train / --train-steps) and, with
    --init, how it got here. Not judged: its local linearity (§8) at up to 64 inputs. Writes
    OUT/analysis.json, twin.safetensors, figure.png; exits 0 whatever the verdict, 2 on bad input."""
    with _refusing():  # before JAX is imported
        for name, path in (("MODEL", model), ("--init", init)):
            path is None or validate.existing_file(name, path)
        validate.writable_folder("--out", out)
        if data is None:
            raise ValueError("analyse needs --data: the inputs and targets the net is judged on, e.g. "
                             "--data d.npz (arrays X (N, d) and Y (N, p)), a .csv, or a bundled set "
                             "(--data digits: 64 inputs, 10 outputs)")
        check_options(train, train_steps, optimiser, batch_size, random_batches, lr, time_budget, t_max,
                      alpha)
    from .._figure import plt
    from ..analysis import report
    from ..analysis.analyse import analyse as analyse_model
    from ..analysis.attention_figure import attention_figure
    from ..analysis.attention_files import SEQUENCES, model_file
    from ..analysis.figure import figure
    from ..analysis.model import Model
    from ..core.real_data import load_data
    from ..dynamics import DivergenceError

    with _refusing(ValueError, TypeError, FileNotFoundError, ImportError):
        option = train_option(train, train_steps, optimiser, batch_size, random_batches, lr, n_records)
        m, start = (None if f is None else model_file(f, alpha, in_shape) for f in (model, init))
        try:
            d = load_data(data)
        except (ValueError, TypeError) as e:
            reads = "" if isinstance(m, tuple | Model) else f" (a linear-attention model reads {SEQUENCES})"
            raise type(e)(f"--data {data}: {str(e).removeprefix('path_or_name: ')}{reads}") from None
        with Progress(TextColumn("training beside the twin"), rp.BarColumn(), rp.MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err, transient=True) as bar:
            task = bar.add_task("train", total=None)
            try:
                result = analyse_model(m, d, train=option, init=start, t_max=t_max,
                                       time_budget=time_budget,
                                       progress=lambda k, n: bar.update(task, completed=k, total=n))
            except DivergenceError as e:  # the step is an input too: a smaller --lr is the fix
                raise ValueError(f"{'training' if lr is None else f'--lr {lr:g}'}: {e}") from None
    drawn = figure(result) if isinstance(result.net, report.NetReport) else attention_figure(result)
    paths = report.save_analysis(result, out, drawn)
    plt.close(drawn)  # written: a process that analyses many models keeps no figure open
    for path in paths:
        typer.echo(str(path))
    v = result.verdict
    colour = "green" if v.effectively_linear else "yellow"
    table = Table(title=f"verdict: {v.level}", title_style=f"bold {colour}")
    for col in ("answer", "level", "evidence (value, threshold)"):
        table.add_column(col)
    for j in (v.function, v.training, v.trained_function, v.history):
        if j is not None:
            table.add_row(j.kind, j.level, escape("\n".join(e.line() for e in j.evidence)))
    loc = result.local
    if loc is not None:  # docs/theory.md §8: beside the verdict, never part of it
        table.add_row(f"local linearity at {loc.n_used} of {loc.n_total} inputs", "reported, not judged",
                      escape("\n".join(loc.lines())), style="dim")
    err.print(table)
    err.print(f"[{colour}]{escape(v.text)}[/]")
    st = result.stage  # where the net stands (docs/theory.md §11.7): reported, not judged
    if st is not None:
        said = st if isinstance(st, str) else "\n    ".join(st.lines())
        err.print(escape(f"stage: {said}"), soft_wrap=True)
    if loc is not None:
        err.print(f"[dim]{escape(loc.note)}[/]", soft_wrap=True)


@app.command()
def sweep(
    spec: Annotated[Path, typer.Argument(help="sweep spec: a TOML file with experiment, preset, "
                                               "seeds, [grid] and [fixed]")],
    out: Annotated[Path | None, typer.Option(help="output folder (default: results/sweeps/SPEC_NAME)",
                                             show_default=False)] = None,
    workers: Annotated[int | None, typer.Option(help="worker processes of the local Dask cluster "
                                                     "(default: the number of cores)",
                                                show_default=False)] = None,
    scheduler: Annotated[str | None, typer.Option(help="address of an existing Dask scheduler, e.g. "
                                                       "tcp://host:8786 (instead of a local cluster)",
                                                  show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="recompute points already saved")] = False,
    figures: Annotated[bool, typer.Option("--figures", help="also draw every point's figure "
                                                            "(default: the sweep's summary only)")] = False,
    all_panels: Annotated[bool, typer.Option("--all-panels", help="the summary draws every check and "
                                                                   "metric (default: the first 12)")] = False,
    worker_timeout: Annotated[float, typer.Option(help="seconds to wait for a Dask worker before "
                                                       "giving up (exit 2)")] = 60.0,
    group_size: Annotated[int | None, typer.Option(help="points per Dask task (default: about 4 "
                                                        "tasks per worker, at most 16 points each)",
                                                   show_default=False)] = None,
) -> None:
    """Run an experiment over a grid of config fields × seeds on Dask, resumably.

    Every point is validated before any task starts (exit 2 on a bad spec). Points are
    saved once, under OUT/points/<hash of experiment, config, seed, version>/; a rerun
    computes only the missing ones. Writes OUT/table.parquet (load it with
    biasfree.experiments.load_sweep) and OUT/summary.png; exits 1 if a point crashed (its crash
    record, as `biasfree run` writes it, in OUT/points/KEY/, and in the table) or failed a
    check (the table's failed_checks column), 2 if no worker joins within --worker-timeout.
    A second sweep into the same OUT waits for the first, then skips what it saved."""
    out = out if out is not None else Path("results") / "sweeps" / spec.stem
    with _refusing():  # before Dask, JAX or any experiment runs
        validate.existing_file("SPEC", spec)
        validate.writable_folder("--out", out)

    from .sweep import SpecError, plan_points, read_spec, run_sweep

    if workers is not None and scheduler is not None:
        raise _refuse("give --workers (a local cluster) or --scheduler (an existing one), not both")
    for name, value, low in (("--workers", workers, 1), ("--group-size", group_size, 1),
                             ("--worker-timeout", worker_timeout, 0)):
        if value is not None and not value >= low:
            raise _refuse(f"{name} {value}: need at least {low}")
    with _refusing(SpecError):
        parsed = read_spec(spec)
        n_points = len(plan_points(parsed))
    columns = (TextColumn("[bold]{task.description}[/]"), rp.BarColumn(), rp.MofNCompleteColumn(),
               TextColumn("done {task.fields[done]}, skipped {task.fields[skipped]}, "
                          "[red]crashed {task.fields[crashed]}, failed checks {task.fields[checks]}[/], "
                          "running {task.fields[running]}"),
               TimeElapsedColumn())
    with Progress(*columns, console=err, transient=False) as bar:
        task = bar.add_task(f"{parsed.experiment} sweep", total=n_points, done=0, skipped=0,
                            crashed=0, checks=0, running=0)

        def show(c):
            bar.update(task, completed=c.finished, done=c.done, skipped=c.skipped, crashed=c.crashed,
                       checks=c.failed_checks, running=c.running)

        try:
            outcome = run_sweep(parsed, out, workers=workers, scheduler=scheduler, force=force,
                                figures=figures, group_size=group_size, worker_timeout_s=worker_timeout,
                                all_panels=all_panels,
                                progress=show, log=lambda line: bar.console.print(escape(line)))
        except (ConnectionError, ImportError) as e:
            raise _refuse(str(e)) from None
        except KeyboardInterrupt:
            err.print(f"[yellow]interrupted[/]: finished points are saved in {out}; rerun the same "
                      "command to compute the rest")
            raise typer.Exit(130) from None
    for path in (outcome.table, *outcome.figures):
        typer.echo(str(path))
    err.print(outcome.counts.line())
    if outcome.crashed:
        err.print(f"[red]{len(outcome.crashed)} point(s) crashed[/] (crash records in "
                  f"{out / 'points'}/KEY/): " + escape("; ".join(outcome.crashed[:5])))
    if outcome.failed_checks:
        err.print(f"[red]{len(outcome.failed_checks)} point(s) failed a check[/] (the table's failed_checks "
                  "column): " + escape("; ".join(f"{label}: {', '.join(names)}" for label, names
                                                 in list(outcome.failed_checks.items())[:5])))
    if not outcome.passed:
        raise typer.Exit(1)


def main() -> None:  # pragma: no cover
    app()
