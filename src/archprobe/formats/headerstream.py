"""A large safetensors header read entry by entry, so parsing it costs about its own bytes, not 10-30x.

Why: `json.loads`/`orjson.loads` of a whole header builds a dict per tensor, a list per shape and a
str per name before any check runs: 9-12x the header's bytes for plain entries, ~30x for a hostile
`__metadata__` of `[[],[],...]`. Here an anchored regex walks the top-level object one entry at a time
(`"name": {flat object}`), orjson parses only that entry's bytes, and the caller folds it into a
compact record before the next one is parsed, so only one entry's objects are alive at a time.

The form accepted is the one every writer produces and the reference reader (the `safetensors` crate)
requires: each value a JSON object whose members are scalars, strings or flat arrays (`shape`,
`data_offsets`); `__metadata__` an object of strings. Deeper nesting is refused by name. Validity is
kept: every byte is either whitespace/`:`/`,` matched here or inside a slice orjson parses.
`__metadata__` over MAX_METADATA_BYTES is checked for form but not kept (nothing downstream reads it;
a small text costs 10-15x its bytes as Python strings).
"""

from __future__ import annotations

import re

from archprobe.errors import CheckpointError
from archprobe.formats.limits import MAX_METADATA_BYTES

# possessive quantifiers (*+): nothing to backtrack into, so a match keeps no per-token state (a plain
# `(?:...)*` over a 30 MB object of short strings holds ~1.8 GB of backtracking marks) and runs ~5x faster
_WS = rb"[ \t\n\r]*+"
_STRING = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_FLAT_OBJECT = rb"\{[^{}\[\]\"]*+(?:(?:" + _STRING + rb"|\[[^\[\]{}\"]*+\])[^{}\[\]\"]*+)*+\}"
_ENTRY = re.compile(_WS + rb"(" + _STRING + rb")" + _WS + rb":" + _WS + rb"(" + _FLAT_OBJECT + rb")" + _WS
                    + rb"([,}])", re.DOTALL)
_KEY = re.compile(_WS + rb"(" + _STRING + rb")" + _WS + rb":" + _WS, re.DOTALL)
_OPEN = re.compile(_WS + rb"\{" + _WS + rb"(\})?", re.DOTALL)
_TAIL = re.compile(_WS + rb"\Z")



class StreamedEntries:
    """Iterable of (name, entry dict) over `raw`; `metadata` is set once the walk has passed it."""

    def __init__(self, raw: bytes, path: str, loads, json_error: tuple[type[BaseException], ...]):
        self.raw, self.path, self.loads, self.errors = raw, path, loads, json_error
        self.metadata: dict = {}

    def _fail(self, message: str):
        return CheckpointError(self.path, message)

    def __iter__(self):
        raw, match, loads = self.raw, _ENTRY.match, self.loads
        m = _OPEN.match(raw)
        if m is None:
            raise self._fail("header is not a JSON object")
        pos, end = m.end(), m.group(1) is not None
        try:
            while not end:
                m = match(raw, pos)
                if m is None:
                    self._explain(pos)
                key, value, sep = m.groups()
                name = loads(key)
                if name == "__metadata__":
                    self._metadata(value)
                else:
                    yield name, loads(value)
                pos, end = m.end(), sep == b"}"
        except self.errors as exc:
            msg = str(exc).splitlines()[0][:100] if str(exc) else type(exc).__name__
            raise self._fail(f"header is not valid JSON near byte {pos:,} ({msg})") from None
        if _TAIL.match(raw, pos) is None:
            raise self._fail(f"header is not valid JSON: data after the object at byte {pos:,}")

    def _metadata(self, piece: bytes) -> None:
        if len(piece) > MAX_METADATA_BYTES:   # checked for form by the regex; not kept
            return
        doc = self.loads(piece)
        if not all(type(v) is str for v in doc.values()):
            raise self._fail("__metadata__ is not a JSON object of strings")
        self.metadata = doc

    def _explain(self, pos: int):
        """Raise the precise complaint about the entry at `pos` that the entry pattern did not match."""
        k = _KEY.match(self.raw, pos)
        if k is None:
            raise self._fail(f"header is not valid JSON near byte {pos:,} (a quoted tensor name was expected)")
        name = self.loads(k.group(1))
        short = repr(name) if len(repr(name)) <= 80 else repr(name)[:77] + "..."
        first = self.raw[k.end():k.end() + 1]
        if first != b"{":
            raise self._fail(f"tensor {short}: entry is not a JSON object")
        raise self._fail(f"tensor {short}: entry is not a flat JSON object (nested values, or invalid JSON)")
