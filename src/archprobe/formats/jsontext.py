"""JSON from outside (config.json, index, hub answers), parsed strictly and within caps.

Strict means what two parsers could disagree on is an error, not a guess: a key given twice
(`"num_hidden_layers": 2, "num_hidden_layers": 100`), NaN/Infinity or a number too large for a
float, nesting deeper than MAX_JSON_DEPTH (json.loads would hit a RecursionError), more bytes than
the cap. Every failure is one CheckpointError naming the file.

Memory: a parsed JSON document costs 4-45x its bytes (an empty list is 2 bytes of text, 64 of Python),
so a byte cap alone does not bound memory. `check_cost` first counts, at C speed, the tokens that
start a value (`,` `:` `[` `{`) and refuses a document whose parse could cost over MAX_JSON_COST:
measured (tests/hostile/test_memory.py) at <= 110 bytes a token plus 8 bytes a byte for non-ASCII
text (the decoded str and its copies), 2 for ASCII; the estimate uses 128 and 10/2.
"""

from __future__ import annotations

import json
import math

from archprobe.errors import CheckpointError
from archprobe.formats.limits import JSON_MAX_DIGITS as MAX_DIGITS
from archprobe.formats.limits import MAX_EXPANDED, cap


class _Refused(ValueError):
    pass


def _no_constant(name: str):
    raise _Refused(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text[:40]} is out of range")
    return value




def _short_int(text: str) -> int:
    if len(text) > MAX_DIGITS:
        raise _Refused(f"an integer of {len(text):,} digits")
    return int(text)


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


def load_strict(raw: bytes, where: str, what: str, limit: int | None = None, non_finite: bool = False) -> dict:
    """A JSON object from `raw`; any of the module docstring's problems is one CheckpointError.
    `non_finite`: `Infinity`, `-Infinity` and `NaN` literals (and a number past a float's range) are values,
    as Python's json reads them and transformers writes them (`"time_step_limit": [0.0, Infinity]` in every
    Mamba-2 config it saves); config.json takes them, and its readers refuse them where a count, width or
    size must be finite, naming the key (structure/config.py)."""
    doc = parse(raw, where, what, limit, non_finite)
    if not isinstance(doc, dict):
        raise CheckpointError(where, f"{what} is a JSON {type(doc).__name__}, not an object")
    return doc


def parse(raw: bytes, where: str, what: str, limit: int | None = None, non_finite: bool = False):
    """Any JSON value from `raw`, parsed as strictly as load_strict."""
    limit = cap("MAX_CONFIG_BYTES") if limit is None else limit
    if len(raw) > limit:
        raise CheckpointError(where, f"{what} is {len(raw):,} bytes, over the {limit:,}-byte cap")
    check_cost(raw, where, what)
    max_depth = cap("MAX_JSON_DEPTH")
    try:
        constants = {} if non_finite else {"parse_constant": _no_constant, "parse_float": _finite_float}
        doc = json.loads(raw, object_pairs_hook=_unique_keys, parse_int=_short_int, **constants)
    except _Refused as exc:
        raise CheckpointError(where, f"{what} is refused: {exc}") from None
    except RecursionError:
        raise CheckpointError(where, f"{what} nests too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, int digit limit, bad UTF-8
        msg = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise CheckpointError(where, f"{what} is not valid JSON ({msg})") from None
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


def finite_only(doc, path: str = "", found: list | None = None):
    """`doc` with every NaN / infinity replaced by None, and where each was: [(path, "nan"|"inf"|"-inf")]."""
    found = [] if found is None else found
    if isinstance(doc, float):
        if math.isfinite(doc):
            return doc, found
        found.append((path or ".", "nan" if doc != doc else ("inf" if doc > 0 else "-inf")))
        return None, found
    if isinstance(doc, dict):
        return {k: finite_only(v, f"{path}.{k}" if path else str(k), found)[0] for k, v in doc.items()}, found
    if isinstance(doc, list | tuple):
        return [finite_only(v, f"{path}.{i}" if path else str(i), found)[0] for i, v in enumerate(doc)], found
    return doc, found


def dumps(doc, indent: int | None = 2) -> str:
    """Strict JSON text of a document archprobe writes (every `--json`, every file): a non-finite number
    (a layer that went NaN, a sum that overflowed) is written as null, and a top-level `non_finite`
    mapping says which fields were and what they held, so a strict reader (ours included) reads it."""
    clean, found = finite_only(doc)
    if found and isinstance(clean, dict):
        clean["non_finite"] = dict(found[:10_000])
    return json.dumps(clean, indent=indent, default=str, allow_nan=False)
