"""Shared CLI pieces: option aliases, JSON output, progress bars (errors: cli/errors.py, mapped in main.py)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON (see contracts.md).")]
NoProgressOpt = Annotated[bool, typer.Option("--no-progress", help="No progress bar.")]
CardOpt = Annotated[str | None, typer.Option(
    "--card", help="An architecture card (archprobe card SOURCE -o card.yaml, edited): its fields override "
                   "what was derived from the shapes.", show_default=False)]


def load_card_opt(path: str | None):
    """The user's card from `--card`, or None (a bad card is a one-line CardError)."""
    if path is None:
        return None
    from archprobe.structure.card import load_card

    return load_card(path)


def print_json(doc: dict) -> None:
    from archprobe.formats.jsontext import dumps

    sys.stdout.write(dumps(doc) + "\n")


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

