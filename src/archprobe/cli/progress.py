"""Progress bars on stderr, only for a person at a terminal (never with --json, --no-progress or a pipe)."""

from __future__ import annotations

import sys
from contextlib import contextmanager


@contextmanager
def shard_progress(enabled: bool, label: str = "reading headers"):
    """Yields a (done, total) callback that drives a rich progress bar on stderr, or None."""
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


def item_progress(enabled: bool, description: str):
    """A wrapper `items -> items` that draws a transient bar over an iterable (layers, tensors), or None."""
    if not enabled or not sys.stderr.isatty():
        return None
    from rich.progress import track

    def progress(items):
        return track(items, description=description, console=_stderr_console(), transient=True)

    return progress


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)
