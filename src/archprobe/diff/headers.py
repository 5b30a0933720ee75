"""`archprobe diff A B`: two checkpoints compared from their headers, as inspect reads them.

Pure functions over two opened sides (the inspect document plus the card's tensor table): the cards field by
field, config keys, tensors added / removed / renamed (a rename is a tensor bound to the same card role under
another name; tensors no role explains fall back to identical shape and dtype within the same layer index),
dtype and quant-scheme changes per tensor family, and parameter and byte deltas per component. Two
architectures are compared as far as their structures match: every walk tolerates missing or differently
typed fields, so nothing here raises on a well-formed pair of inspect documents.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass

from archprobe.formats.dtypes import FLOATS, INTEGERS
from archprobe.formats.gguf import ggml_type

SCHEMA = "archprobe.diff/1"
LIMIT = 200                      # entries kept per list; the rest are counted in `left_out`
CARD_SKIP = ("origins", "warnings", "set_aside")   # provenance, notes and tensor names (compared as tensors)
EVIDENCE = "evidence"            # per-field evidence quotes tensor names and dtypes: the tensor section says those
_LAYER = re.compile(r"(?:^|\.)(\d+)\.")
SHORT_LIST = 16                  # longer lists (layer_types, per-layer widths) are compared element by element
LONG_TEXT = 400                  # longer values are shown cut
PLAIN = FLOATS | INTEGERS
MISSING = object()               # a field one side does not have (distinct from a stored null)


@dataclass
class Side:
    """One opened checkpoint: its inspect document and every (folded) tensor with its role."""

    doc: dict
    config: dict
    tensors: dict            # stored name -> {"role", "shape", "dtype", "scheme", "count", "params", "bytes"}


def open_side(source: str | os.PathLike, progress=None) -> Side:
    """Open `source` once (as report/collect does) and keep what the comparison needs; a PathLike is
    read as its path (the readers below match suffixes and hub ids on text)."""
    from archprobe.structure.checkpoint import open_checkpoint
    from archprobe.structure.inspect import document

    ck = open_checkpoint(os.fspath(source), progress=progress)
    return side_of(ck.raw, ck.derived, document(ck.raw, ck.derived))


def side_of(raw, derived, doc: dict) -> Side:
    from archprobe.structure.params import component_of_role

    card = derived.card
    roles = card.role_of()
    aside = {n: kind for kind in ("vision", "mtp") for n in card.set_aside.get(kind, [])}
    tensors = {}
    for e in derived.table.all_entries():
        role = roles.get(e.name)
        tensors[e.name] = {"role": role, "component": component_of_role(role) if role else aside.get(e.name, "other"),
                           "shape": list(e.shape), "dtype": _plain_dtype(e.dtype),
                           "scheme": e.role.scheme, "count": e.count, "params": e.params,
                           "bytes": e.info.nbytes * e.count}
    return Side(doc=doc, config=raw.config if isinstance(raw.config, dict) else {}, tensors=tensors)


def _plain_dtype(dtype: str) -> str:
    """GGUF's unquantized types are the same bytes as safetensors' (`GGUF_F32` is F32): named alike, so a
    conversion is not a re-type; quantized GGUF types keep their names (`GGUF_Q4_K`)."""
    rest = ggml_type(dtype)
    return rest if rest in PLAIN else dtype


def diff_sources(a: str | os.PathLike, b: str | os.PathLike, progress=None, limit: int = LIMIT) -> dict:
    """The `archprobe.diff/1` document for two sources (paths as str or PathLike, or hub ids)."""
    return diff_sides(open_side(a, progress), open_side(b, progress), limit)


def diff_sides(a: Side, b: Side, limit: int = LIMIT) -> dict:
    """The `archprobe.diff/1` document for two opened sides."""
    card = _bounded(list(walk(_card(a.doc), _card(b.doc), skip_evidence=True)), limit)
    config = config_diff(a.config, b.config, limit)
    tensors = tensor_diff(a.tensors, b.tensors, limit)
    sizes = size_diff(a, b)
    different = bool(card["total"] or config["total"] or tensors["total"])
    return {
        "schema": SCHEMA,
        "a": _label(a.doc), "b": _label(b.doc),
        "identical": not different,
        "summary": {"card_fields": card["total"], "config_keys": config["total"],
                    "tensors_added": tensors["added"]["total"], "tensors_removed": tensors["removed"]["total"],
                    "tensors_renamed": tensors["renamed"]["total"], "tensors_changed": tensors["changed"]["total"],
                    "params_delta": sizes["params"]["delta"], "bytes_delta": sizes["bytes"]["delta"]},
        "card": card, "config": config, "tensors": tensors, "sizes": sizes,
    }


def _label(doc: dict) -> dict:
    src = doc.get("source") or {}
    return {"location": src.get("location"), "kind": src.get("kind"), "revision": src.get("revision"),
            "model_type": doc.get("model_type")}


def _card(doc: dict) -> dict:
    return {k: v for k, v in (doc.get("card") or {}).items() if k not in CARD_SKIP}


# --- field-by-field -----------------------------------------------------------------------------------------
def walk(a, b, path: str = "", skip_evidence: bool = False):
    """(path, a value, b value) for every leaf that differs; a side that lacks the field gives MISSING."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k == EVIDENCE and skip_evidence:
                continue
            sub = f"{path}.{k}" if path else str(k)
            yield from walk(a.get(k, MISSING), b.get(k, MISSING), sub, skip_evidence)
    elif isinstance(a, list) and isinstance(b, list) and not (_is_leaf_list(a) and _is_leaf_list(b)
                                                              and max(len(a), len(b)) <= SHORT_LIST):
        for i in range(max(len(a), len(b))):
            sub = f"{path}.{i}" if path else str(i)
            yield from walk(a[i] if i < len(a) else MISSING, b[i] if i < len(b) else MISSING, sub,
                            skip_evidence)
    elif _same_number(a, b):
        return
    elif a != b or type(a) is not type(b):
        yield path, a, b


def _shown(v):
    """A value as the document shows it: MISSING as null, a long string cut (a diff is not a copy)."""
    if v is MISSING:
        return None
    if isinstance(v, str) and len(v) > LONG_TEXT:
        return f"{v[:LONG_TEXT]}... ({len(v):,} chars)"
    if isinstance(v, dict | list) and len(repr(v)) > LONG_TEXT:
        return f"{type(v).__name__} of {len(v):,} entries"
    return v


def _is_leaf_list(v: list) -> bool:
    return all(not isinstance(x, dict | list) for x in v)


def _same_number(a, b) -> bool:
    """Numbers equal to float32 precision: GGUF stores eps and rope bases as float32 (1e-5 reads back as
    9.99999974e-06), which is not a change of the model."""
    import math

    return isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool) \
        and not isinstance(b, bool) and math.isclose(a, b, rel_tol=1e-6, abs_tol=0.0)


def _bounded(changes: list, limit: int) -> dict:
    rows = [{"path": p, "a": _shown(x), "b": _shown(y)} for p, x, y in changes]
    return {"total": len(rows), "items": rows[:limit], "left_out": max(0, len(rows) - limit)}


def config_diff(a: dict, b: dict, limit: int = LIMIT) -> dict:
    """Config keys added / removed / changed; nested mappings (text_config, rope_scaling) by dotted key."""
    added, removed, changed = [], [], []
    for path, x, y in walk(a, b):
        (added if x is MISSING else removed if y is MISSING else changed).append(
            {"key": path, "a": _shown(x), "b": _shown(y)})
    out = {"total": len(added) + len(removed) + len(changed)}
    for name, rows in (("added", added), ("removed", removed), ("changed", changed)):
        out[name] = {"total": len(rows), "items": rows[:limit], "left_out": max(0, len(rows) - limit)}
    return out


# --- tensors ------------------------------------------------------------------------------------------------
def _layer_of(name: str):
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def _kind(t: dict) -> str:
    """dtype with the quantization scheme that reads it (`U8 (mxfp4)`), so a re-quantization shows."""
    return f"{t['dtype']} ({t['scheme']})" if t.get("scheme") else t["dtype"]


def match_renames(a: dict, b: dict) -> list[dict]:
    """Pairs (A-only name, B-only name): same card role first, then unbound tensors with identical shape and
    dtype in the same layer index (only where exactly one candidate exists on each side)."""
    only_a = [n for n in a if n not in b]
    only_b = [n for n in b if n not in a]
    pairs = []
    by_role_b: dict = {}
    for n in only_b:
        if b[n]["role"] is not None:
            by_role_b.setdefault(b[n]["role"], []).append(n)
    used_a, used_b = set(), set()
    for n in only_a:
        cands = by_role_b.get(a[n]["role"], []) if a[n]["role"] is not None else []
        cands = [c for c in cands if c not in used_b]
        if len(cands) == 1:
            pairs.append({"a": n, "b": cands[0], "by": "role", "role": a[n]["role"]})
            used_a.add(n)
            used_b.add(cands[0])
    key = lambda t, n: (_layer_of(n), tuple(t[n]["shape"]), t[n]["dtype"], t[n]["count"])  # noqa: E731
    left_a = Counter(key(a, n) for n in only_a if n not in used_a)
    left_b = Counter(key(b, n) for n in only_b if n not in used_b)
    rest_b = {key(b, n): n for n in only_b if n not in used_b}
    for n in only_a:
        if n in used_a:
            continue
        k = key(a, n)
        if left_a[k] == 1 and left_b.get(k) == 1:
            pairs.append({"a": n, "b": rest_b[k], "by": "shape+dtype in layer"
                          if k[0] is not None else "shape+dtype", "role": a[n]["role"] or b[rest_b[k]]["role"]})
            used_a.add(n)
            used_b.add(rest_b[k])
    return pairs


def _family(t: dict, name: str) -> str:
    base = t["role"] or name
    return re.sub(r"(^|\.)\d+(\.|$)", r"\1{N}\2", base)


def tensor_diff(a: dict, b: dict, limit: int = LIMIT) -> dict:
    """Tensors added / removed / renamed, per-tensor dtype or shape changes, and dtype changes per family."""
    renames = match_renames(a, b)
    renamed_a = {p["a"] for p in renames}
    renamed_b = {p["b"] for p in renames}
    removed = [{"name": n, "role": a[n]["role"], "shape": a[n]["shape"], "dtype": _kind(a[n]), "count": a[n]["count"]}
               for n in a if n not in b and n not in renamed_a]
    added = [{"name": n, "role": b[n]["role"], "shape": b[n]["shape"], "dtype": _kind(b[n]), "count": b[n]["count"]}
             for n in b if n not in a and n not in renamed_b]
    pairs = [(n, n) for n in a if n in b] + [(p["a"], p["b"]) for p in renames]
    changed, families = [], {}
    for na, nb in pairs:
        ta, tb = a[na], b[nb]
        what = {f: {"a": _kind(ta) if f == "dtype" else ta[f], "b": _kind(tb) if f == "dtype" else tb[f]}
                for f in ("dtype", "shape", "count")
                if (_kind(ta) != _kind(tb) if f == "dtype" else ta[f] != tb[f])}
        if what:
            changed.append({"a": na, "b": nb, "role": ta["role"] or tb["role"], **what})
        if "dtype" in what:
            fam = (_family(ta, na), _kind(ta), _kind(tb))
            row = families.setdefault(fam, {"family": fam[0], "a": fam[1], "b": fam[2], "tensors": 0,
                                            "bytes_a": 0, "bytes_b": 0})
            row["tensors"] += ta["count"]
            row["bytes_a"] += ta["bytes"]
            row["bytes_b"] += tb["bytes"]
    fallback = sum(1 for p in renames if p["by"] != "role")
    rows = {"added": added, "removed": removed, "renamed": renames, "changed": changed}
    out = {name: {"total": len(r), "items": r[:limit], "left_out": max(0, len(r) - limit)} for name, r in rows.items()}
    out["renamed"]["by_shape_fallback"] = fallback
    out["dtype_families"] = list(families.values())
    out["total"] = len(added) + len(removed) + len(renames) + len(changed)
    return out


# --- sizes --------------------------------------------------------------------------------------------------
def _bytes_by_component(side: Side) -> dict:
    out: dict[str, int] = {}
    for t in side.tensors.values():
        out[t["component"]] = out.get(t["component"], 0) + t["bytes"]
    return out


def _delta(a: dict, b: dict) -> list[dict]:
    return [{"component": k, "a": a.get(k, 0), "b": b.get(k, 0), "delta": b.get(k, 0) - a.get(k, 0)}
            for k in list(a) + [k for k in b if k not in a] if a.get(k, 0) != b.get(k, 0)]


def size_diff(a: Side, b: Side) -> dict:
    """Parameter deltas (inspect's totals and per component) and stored-byte deltas per component."""
    pa, pb = a.doc.get("params") or {}, b.doc.get("params") or {}
    ba, bb = _bytes_by_component(a), _bytes_by_component(b)
    ta, tb = sum(ba.values()), sum(bb.values())
    return {
        "params": {"a": pa.get("total", 0), "b": pb.get("total", 0), "delta": pb.get("total", 0) - pa.get("total", 0),
                   "active_delta": pb.get("active", 0) - pa.get("active", 0),
                   "by_component": _delta(pa.get("by_component") or {}, pb.get("by_component") or {})},
        "bytes": {"a": ta, "b": tb, "delta": tb - ta, "by_component": _delta(ba, bb)},
    }
