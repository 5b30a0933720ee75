"""Terminal output for untrusted text: never markup, never a control sequence.

Names, dtypes, model types, paths and claims come from checkpoints, servers and files that strangers
write. Rich would read `[/]` in them as markup (a MarkupError, or a style the author chose) and would
pass ESC sequences (`\\x1b[2J` clears the screen) to the terminal. `SafeConsole` renders every plain
string with markup and emoji off and control characters shown escaped (`\\x1b`); our own styling is
applied with `styled()` (a `rich.text.Text`), never by markup inside an f-string.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from archprobe.cli.errors import one_line


def clean(value) -> str:
    """`value` as text with control characters (ESC, newlines, bidi overrides) shown escaped."""
    return one_line(str(value), 1 << 20)


def styled(value, style: str = "") -> Text:
    """Untrusted `value` as one styled, inert piece of text."""
    return Text(clean(value), style=style)


def line(*parts) -> Text:
    """A line from (value, style) pairs and plain values, each cleaned."""
    out = Text()
    for p in parts:
        if isinstance(p, Text):
            out.append_text(p)
        elif isinstance(p, tuple):
            out.append(clean(p[0]), style=p[1])
        else:
            out.append(clean(p))
    return out


class SafeConsole(Console):
    """A Console whose plain strings (print, table cells, titles) are inert text (see module docstring)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("markup", False)
        kwargs.setdefault("emoji", False)
        kwargs.setdefault("highlight", False)
        super().__init__(**kwargs)

    def render_str(self, text: str, **kwargs) -> Text:
        kwargs["markup"] = False
        kwargs["emoji"] = False
        kwargs["highlight"] = False
        return super().render_str(clean(text), **kwargs)
