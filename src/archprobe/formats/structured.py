"""One reader for every structured file a user hands us (cards, claims, price tables, task sets, chain
exports, Inspect logs): YAML, JSON, JSONL and zip members, each read within caps before it is parsed.

Why one: each loader that called `yaml.safe_load(path.read_text())` on its own was a bomb waiting for
its file: read whole before any cap (a 1 GB sparse task file), a 700-byte alias bomb expanded by the
code that walks it, a 5,000-digit integer raising where no one catches it, a zip member inflating
1000:1. Here every read is:

- capped before it is read: a regular file only (a FIFO is refused, never waited on), its size
  checked with fstat, then at most `limit + 1` bytes read (formats/localfiles.py);
- JSON: strict (formats/jsontext.py: duplicate keys, NaN, depth, the parse-cost estimate);
- YAML: PyYAML's safe loader (no tags that build objects), duplicate keys refused, integers past
  MAX_DIGITS digits refused, nesting and the expanded size through shared aliases capped
  (jsontext.nesting_problem), and only JSON's types kept: a timestamp, a set or `!!binary` bytes is
  refused, and so are `.nan` / `.inf`;
- zip members: the declared size checked, then decompressed in chunks and stopped at the cap (a
  member may lie about its size).

Every refusal is one `error` (the caller's ArchprobeError subclass) naming the file.
"""

from __future__ import annotations

import math
import os

from archprobe.errors import ArchprobeError, CheckpointError
from archprobe.formats import jsontext
from archprobe.formats.limits import MAX_YAML_BYTES as YAML_BYTES
from archprobe.formats.limits import STRUCTURED_MAX_DIGITS as MAX_DIGITS
from archprobe.formats.limits import cap
from archprobe.formats.localfiles import read_capped


def read_bytes(path: str, limit: int, what: str, error=ArchprobeError) -> bytes:
    """At most `limit` bytes of a regular file (a FIFO, device or folder is refused; bigger is refused)."""
    path = str(path)
    folder = os.path.dirname(os.path.realpath(path))   # the user named it: a symlink to a file is fine
    try:
        return read_capped(folder, path, limit, what)
    except CheckpointError as exc:
        raise error(exc.message) from None


def parse_json(raw: bytes, where: str, what: str, error=ArchprobeError, want: type | None = dict):
    """A strict JSON document (see jsontext) of type `want` (None: any)."""
    try:
        doc = jsontext.parse(raw, where, what, limit=len(raw))
    except CheckpointError as exc:
        raise error(exc.message) from None
    if want is not None and not isinstance(doc, want):
        raise error(f"{where}: {what} is a JSON {type(doc).__name__}, not {'an object' if want is dict else want}")
    return doc


def load_json(path: str, what: str, error=ArchprobeError, limit: int | None = None, want: type | None = dict):
    limit = cap("MAX_STRUCTURED_BYTES") if limit is None else limit
    return parse_json(read_bytes(path, limit, what, error), str(path), what, error, want)


def parse_yaml(text: str, where: str, what: str, error=ArchprobeError):
    """A YAML document reduced to JSON's types, or one `error` (module docstring)."""
    import yaml

    try:
        doc = yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise error(f"{where}: {what} is not valid YAML ({str(exc).splitlines()[0][:100]})") from None
    except _Refused as exc:
        raise error(f"{where}: {what} is refused: {exc}") from None
    except RecursionError:
        raise error(f"{where}: {what} nests too deeply") from None
    except ValueError as exc:   # int() past Python's digit limit, a bad timestamp
        raise error(f"{where}: {what} is refused: {str(exc).splitlines()[0][:100]}") from None
    problem = jsontext.nesting_problem(doc) or _type_problem(doc)
    if problem:
        raise error(f"{where}: {what} {problem}")
    return doc


def load_yaml(path: str, what: str, error=ArchprobeError, limit: int = YAML_BYTES):
    """YAML (or JSON, by the name's suffix) from `path`, capped and checked."""
    if str(path).endswith(".json"):
        return load_json(path, what, error, want=None)
    raw = read_bytes(path, limit, what, error)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: {what} is not UTF-8 text") from None
    return parse_yaml(text, str(path), what, error)


def check_zip(path: str, what: str, error=ArchprobeError, limit: int | None = None) -> None:
    """Refuse a zip whose members, decompressed, would exceed `limit` bytes in all (each member is
    inflated in chunks and stopped at the cap, whatever it declares), or that is not a readable zip."""
    import zipfile

    from archprobe.formats.localfiles import regular_file_inside

    limit = cap("MAX_ARCHIVE_BYTES") if limit is None else limit
    try:
        regular_file_inside(os.path.dirname(os.path.realpath(path)), str(path))
    except CheckpointError as exc:
        raise error(exc.message) from None
    try:
        with zipfile.ZipFile(path) as zf:
            members = zf.infolist()
            if len(members) > cap("MAX_ARCHIVE_MEMBERS"):
                raise error(f"{path}: {what} holds {len(members):,} members, over the "
                            f"{cap('MAX_ARCHIVE_MEMBERS'):,} cap (ARCHPROBE_MAX_ARCHIVE_MEMBERS)")
            declared = sum(m.file_size for m in members)
            if declared > limit:
                raise error(f"{path}: {what} inflates to {declared:,} bytes, over the {limit:,}-byte cap "
                            "(ARCHPROBE_MAX_ARCHIVE_BYTES)")
            total, max_cost = 0, cap("MAX_JSON_COST")
            for m in members:
                cost = 0
                with zf.open(m) as f:
                    while chunk := f.read(1 << 20):
                        total += len(chunk)
                        cost += jsontext.parse_cost(chunk)   # linear in its bytes: chunks add up
                        if total > limit:
                            raise error(f"{path}: {what} inflates past the {limit:,}-byte cap "
                                        "(ARCHPROBE_MAX_ARCHIVE_BYTES; a member's declared size was false)")
                        if cost > max_cost:
                            raise error(f"{path}: {what}: member {m.filename[:80]!r} would cost over "
                                        f"{max_cost / 2**20:,.0f} MB to parse (ARCHPROBE_MAX_JSON_COST)")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError, ValueError) as exc:
        raise error(f"{path}: {what} is not a readable zip ({type(exc).__name__}: {str(exc)[:120]})") from None
    except RuntimeError as exc:   # an encrypted member
        raise error(f"{path}: {what}: {str(exc)[:120]}") from None


class _Refused(ValueError):
    pass


_LOADER = None


def _loader():
    """PyYAML's safe loader (C when built), refusing duplicate keys and long integers."""
    global _LOADER
    if _LOADER is None:
        import yaml

        class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            def construct_mapping(self, node, deep=False):
                if isinstance(node, yaml.MappingNode):
                    seen = set()
                    for key_node, _ in node.value:
                        if key_node.tag == "tag:yaml.org,2002:merge":
                            continue   # `<<: *base` then an override is YAML's own way, not a repeat
                        key = self.construct_object(key_node, deep=deep)
                        try:
                            repeat = key in seen
                            seen.add(key)
                        except TypeError:
                            raise _Refused("a mapping key that is not a plain value") from None
                        if repeat:
                            raise _Refused(f"key {str(key)[:80]!r} appears twice (line {key_node.start_mark.line + 1})")
                return super().construct_mapping(node, deep=deep)

            def construct_yaml_int(self, node):
                digits = sum(c.isalnum() for c in str(node.value))
                if digits > MAX_DIGITS:
                    raise _Refused(f"an integer of {digits:,} digits (line {node.start_mark.line + 1})")
                return super().construct_yaml_int(node)

        Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
        _LOADER = Loader
    return _LOADER


def _type_problem(doc) -> str | None:
    """Why a parsed YAML document holds something JSON cannot, naming where (each shared node once)."""
    seen: set[int] = set()
    stack = [(doc, "")]
    while stack:
        node, where = stack.pop()
        at = f" at {where[:120]!r}" if where else ""
        if isinstance(node, dict | list):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, dict):
                for k, v in node.items():
                    if not isinstance(k, str | int | float | bool) and k is not None:
                        return f"has a key of type {type(k).__name__}{at}"
                    stack.append((k, where))
                    stack.append((v, f"{where}.{k}" if where else str(k)))
            else:
                stack.extend((v, f"{where}.{i}" if where else str(i)) for i, v in enumerate(node))
        elif isinstance(node, float):
            if not math.isfinite(node):
                return f"holds {node!r}{at}, not a finite number"
        elif node is not None and not isinstance(node, str | int | bool):
            return f"holds a {type(node).__name__}{at} (only JSON's types: text, numbers, lists, mappings)"
    return None
