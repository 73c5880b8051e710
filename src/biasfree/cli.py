"""Command line: ``biasfree list | run [NAME|all] | report``.

Progress and logs go to stderr (Rich); the paths written go to stdout, one a line.
``run`` exits with status 1 if any check fails, 2 on bad input.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=False,
                  help="When are bias-free ReLU networks effectively linear networks?")
err = Console(stderr=True)


@app.command("list")
def list_() -> None:
    """List the experiments, one line each."""
    from .experiments import REGISTRY

    for name, exp in REGISTRY.items():
        typer.echo(f"{name:20s} {exp.claim}")


@app.command()
def run(
    name: Annotated[str, typer.Argument(help="experiment name, or 'all'")] = "leaky-collapse",
    size: Annotated[str, typer.Option(help="tiny (seconds) or paper (minutes)")] = "paper",
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("results"),
) -> None:
    """Run an experiment (default: the headline, leaky-collapse) and save its results."""
    from . import plotting, store
    from .experiments import REGISTRY, SIZES, get

    if size not in SIZES:
        err.print(f"[red]error:[/] unknown size {size!r}; choose one of {', '.join(SIZES)}")
        raise typer.Exit(2)
    if name == "all":
        names = list(REGISTRY)
    else:
        try:
            names = [get(name).name]
        except KeyError as e:
            err.print(f"[red]error:[/] {e.args[0]}")
            raise typer.Exit(2) from None
    failed = []
    columns = (SpinnerColumn(), TextColumn("[bold]{task.fields[exp]}[/] {task.description}"),
               TimeElapsedColumn())
    with Progress(*columns, console=err, transient=False) as bar:
        for n in names:
            task = bar.add_task("starting", exp=n, total=None)
            t0 = time.perf_counter()
            result = get(n).run(size, seed, lambda msg, task=task: bar.update(task, description=msg))
            bar.update(task, description="plotting")
            fig = plotting.figure(result)
            paths = store.save(result, out, time.perf_counter() - t0, fig)
            status = "[green]all checks passed[/]" if result.passed else \
                f"[red]failed: {', '.join(result.failed())}[/]"
            bar.update(task, description=status, total=1, completed=1)
            for p in paths:
                typer.echo(str(p))
            if not result.passed:
                failed.append(n)
    _print_checks(out, names)
    if failed:
        err.print(f"[red]{len(failed)} experiment(s) failed a check: {', '.join(failed)}[/]")
        raise typer.Exit(1)


def _print_checks(out: Path, names: list[str]) -> None:
    from . import store

    table = Table(title="checks", show_lines=False)
    for col in ("experiment", "check", "value", "threshold", "pass"):
        table.add_column(col)
    for n in names:
        res = store.load(out / n)
        for k, c in res.checks.items():
            table.add_row(n, k, f"{c.value:.3g}", f"{c.op} {c.threshold:.3g}",
                          "[green]yes[/]" if c.passed else "[red]NO[/]")
    err.print(table)


@app.command()
def report(out: Annotated[Path, typer.Option(help="results folder")] = Path("results")) -> None:
    """Write OUT/index.html: every figure and check from the saved results."""
    from .report import write_report

    try:
        path = write_report(out)
    except FileNotFoundError as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    typer.echo(str(path))


def main() -> None:  # pragma: no cover
    app()
