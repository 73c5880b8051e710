"""How the command line says no: one ``error:`` line on stderr and exit status 2, never a
traceback, for a refused value (:func:`refuse`, :func:`refusing`) and for click's usage
errors alike (:class:`OneLineErrors`, the app's command group)."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

err = Console(stderr=True)
"""stderr: progress, logs and refusals (stdout holds the paths written)."""

_CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
"""The base of click's usage errors, in the click Typer runs on (its own copy since Typer 0.2x)."""


def refuse(message: str) -> typer.Exit:
    """Print ``error: message`` (one line) and return the exit to raise: status 2."""
    err.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(2)


@contextmanager
def refusing(*errors: type[Exception]):
    """Bad input: one of ``errors`` (default TypeError, ValueError) raised inside is
    refused with its message (:func:`refuse`, exit 2)."""
    kinds = errors or (TypeError, ValueError)
    try:
        yield
    except kinds as e:
        raise refuse(str(e.args[0] if isinstance(e, KeyError) else e)) from None


class OneLineErrors(typer.core.TyperGroup):
    """Click's usage errors (a missing argument, ``--seed abc``, an unknown command) as one
    ``error:`` line naming the command's ``--help``, exit 2, instead of Typer's boxed usage
    panel; Ctrl-C at a prompt, one line and exit 1."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except _CLICK_ERROR as e:
            where = e.ctx.command_path if getattr(e, "ctx", None) is not None else prog_name or "biasfree"
            err.print(f"[red]error:[/] {escape(e.format_message())} (see: {escape(where)} --help)",
                      soft_wrap=True)
            sys.exit(e.exit_code)
        except typer.Abort:
            err.print("[yellow]aborted[/]")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)
