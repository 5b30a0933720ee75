"""Untrusted text made inert: control characters shown, never emitted.

Strings from checkpoints, servers and claim files can carry ESC sequences (`\\x1b[2J` clears a
terminal, others retitle it or fake a prompt), newlines that forge an extra output line, and bidi
overrides that reorder what a reader sees. Every writer (terminal, HTML, Markdown, error lines)
passes such text through `visible()` before its own escaping. Standard library only.
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_INVISIBLE = set("\u2028\u2029\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def visible(text) -> str:
    """`text` with C0/C1 control characters, line separators and bidi overrides written as escapes."""
    text = str(text)
    if text.isprintable():   # the common case: nothing to do (fast path)
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if code < 32 or code == 127 or 0x80 <= code < 0xA0:
            out.append(_NAMED.get(ch, f"\\x{code:02x}"))
        elif ch in _INVISIBLE:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)
