"""The one way a command's answer reaches stdout: `emit(doc, as_json, render)`.

Why one place: with --json a script reads exactly one document, written by formats/jsontext (the same
escaping and float rules everywhere); without it a person reads what the command's renderer
(cli/render/) draws from that same document. A command never writes JSON itself
(tests/cli/test_shell.py checks).
"""

from __future__ import annotations

import sys
from collections.abc import Callable


def emit(doc: dict, as_json: bool, render: Callable[[dict], None] | None = None) -> None:
    """--json: `doc` as one JSON document on stdout; otherwise `render(doc)` (nothing when render is None)."""
    if as_json:
        from archprobe.formats.jsontext import dumps

        sys.stdout.write(dumps(doc) + "\n")
        sys.stdout.flush()    # a command that keeps running (eval standin) is read as it goes
    elif render is not None:
        render(doc)
