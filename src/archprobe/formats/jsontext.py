"""JSON from outside (config.json, index, hub answers), parsed strictly and within caps.

Strict means what two parsers could disagree on is an error, not a guess: a key given twice
(`"num_hidden_layers": 2, "num_hidden_layers": 100`), nesting deeper than MAX_JSON_DEPTH (json.loads
would hit a RecursionError), more bytes than the cap. Every failure is one CheckpointError naming the file.

`Infinity`, `-Infinity` and `NaN` are values here, as Python's json (and so transformers, which writes
`"time_step_limit": [0.0, Infinity]` into every Mamba-2 config it saves) reads them; a number too large
for a float reads as an infinity the same way. Where a count, width or size must be finite the reader of
that key refuses it, naming the key (structure/config.py `int_at` / `float_at`).

Memory: a parsed JSON document costs 4-45x its bytes (an empty list is 2 bytes of text, 64 of Python),
so a byte cap alone does not bound memory. `check_cost` first counts, at C speed, the tokens that
start a value (`,` `:` `[` `{`) and refuses a document whose parse could cost over MAX_JSON_COST:
measured (tests/hostile/test_memory.py) at <= 110 bytes a token plus 8 bytes a byte for non-ASCII
text (the decoded str and its copies), 2 for ASCII; the estimate uses 128 and 10/2.
"""

from __future__ import annotations

import json

from archprobe.errors import CheckpointError
from archprobe.formats.limits import cap


class _Refused(ValueError):
    pass


def _unique_keys(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        for k, _ in pairs:
            if k in seen:
                raise _Refused(f"key {k[:80]!r} appears twice")
            seen.add(k)
    return out


def _depth(doc, limit: int) -> int:
    """The nesting depth of `doc` (iterative: a deep document cannot exhaust the stack here)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            stack.extend((child, d + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


MAX_EXPANDED = 1_000_000   # values of a parsed document counted with repeats (YAML aliases share them)


def nesting_problem(doc) -> str | None:
    """Why an already parsed document (YAML, say) is too deep, expands to too many values through
    shared references (a YAML alias bomb: 12 lines can stand for 10^12 values) or refers to itself;
    None when it is fine. Each shared container is measured once (memoised by identity)."""
    limit = cap("MAX_JSON_DEPTH")
    sizes: dict[int, tuple[int, int]] = {}   # id -> (values with repeats, height)
    busy: set[int] = set()

    class _Stop(Exception):
        pass

    def measure(node, depth: int) -> tuple[int, int]:
        if not isinstance(node, dict | list):
            return 1, 0
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in busy:
            raise _Stop("refers to itself (a recursive YAML alias)")
        if depth > limit:
            raise _Stop(f"nests deeper than {limit} levels")
        busy.add(key)
        total, height = 1, 0
        for child in (node.values() if isinstance(node, dict) else node):
            n, h = measure(child, depth + 1)
            total, height = total + n, max(height, h + 1)
            if total > MAX_EXPANDED:
                raise _Stop(f"expands to over {MAX_EXPANDED:,} values (shared YAML aliases)")
        busy.discard(key)
        sizes[key] = (total, height)
        return total, height

    try:
        _, height = measure(doc, 1)
    except _Stop as exc:
        return str(exc)
    return f"nests deeper than {limit} levels" if height >= limit else None


def parse_cost(raw: bytes) -> int:
    """An upper bound on the bytes of Python objects parsing `raw` builds (module docstring)."""
    tokens = raw.count(b",") + raw.count(b":") + raw.count(b"[") + raw.count(b"{") + 1
    return 128 * tokens + (2 if raw.isascii() else 10) * len(raw)


def check_cost(raw: bytes, where: str, what: str, error=CheckpointError) -> None:
    """Refuse `raw` before parsing when its estimated parse cost is over MAX_JSON_COST."""
    limit = cap("MAX_JSON_COST")
    cost = parse_cost(raw)
    if cost > limit:
        message = (f"{what} would cost ~{cost / 2**20:,.0f} MB of memory to parse, over the "
                   f"{limit / 2**20:,.0f} MB cap (ARCHPROBE_MAX_JSON_COST)")
        raise error(where, message) if error is CheckpointError else error(f"{where}: {message}")


def load_strict(raw: bytes, where: str, what: str, limit: int | None = None) -> dict:
    """A JSON object from `raw`; any of the module docstring's problems is one CheckpointError."""
    limit = cap("MAX_CONFIG_BYTES") if limit is None else limit
    if len(raw) > limit:
        raise CheckpointError(where, f"{what} is {len(raw):,} bytes, over the {limit:,}-byte cap")
    check_cost(raw, where, what)
    max_depth = cap("MAX_JSON_DEPTH")
    try:
        doc = json.loads(raw, object_pairs_hook=_unique_keys)
    except _Refused as exc:
        raise CheckpointError(where, f"{what} is refused: {exc}") from None
    except RecursionError:
        raise CheckpointError(where, f"{what} nests too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, int digit limit, bad UTF-8
        msg = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise CheckpointError(where, f"{what} is not valid JSON ({msg})") from None
    if not isinstance(doc, dict):
        raise CheckpointError(where, f"{what} is a JSON {type(doc).__name__}, not an object")
    if _depth(doc, max_depth) > max_depth:
        raise CheckpointError(where, f"{what} nests deeper than {max_depth} levels")
    return doc


def load_fast(raw: bytes, where: str, what: str, limit: int) -> dict:
    """A large JSON object (the index) with orjson: capped, NaN refused, depth capped at 1024 by orjson.
    Duplicate keys keep the last value (the index only names shard files; each header is read anyway)."""
    from archprobe.formats.safetensors import _json_loads, _JSONError

    if len(raw) > limit:
        raise CheckpointError(where, f"{what} is {len(raw):,} bytes, over the {limit:,}-byte cap")
    check_cost(raw, where, what)
    try:
        doc = _json_loads(raw)
    except (_JSONError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        msg = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise CheckpointError(where, f"{what} is not valid JSON ({msg})") from None
    if not isinstance(doc, dict):
        raise CheckpointError(where, f"{what} is a JSON {type(doc).__name__}, not an object")
    return doc
