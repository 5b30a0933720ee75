"""Shared CLI pieces: option aliases, JSON output, one-line errors, progress bars."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from typing import Annotated

import typer

from archprobe.errors import ArchprobeError

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON (see contracts.md).")]
NoProgressOpt = Annotated[bool, typer.Option("--no-progress", help="No progress bar.")]
DEBUG_ENV = "ARCHPROBE_DEBUG"


def print_json(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


def fail(exc: ArchprobeError) -> None:
    """One line on stderr (and a hint), exit status 2; tracebacks only with ARCHPROBE_DEBUG=1."""
    if os.environ.get(DEBUG_ENV):
        raise exc
    typer.echo(f"error: {exc.message}", err=True)
    if exc.hint:
        typer.echo(f"hint: {exc.hint}", err=True)
    raise typer.Exit(2)


@contextmanager
def shard_progress(enabled: bool, label: str = "reading headers"):
    """Yields a (done, total) callback that drives a rich progress bar on stderr."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True, console=_stderr_console()) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def guarded(fn: Callable[[], None]) -> None:
    try:
        fn()
    except ArchprobeError as exc:
        fail(exc)
