"""Gather the documents a report shows; each is exactly what the matching command prints with --json."""

from __future__ import annotations

from archprobe.errors import ArchprobeError

SCHEMA = "archprobe.report/1"


def sweep_contexts(max_context: int | None, target: int) -> list[int]:
    top = max(target, min(max_context or 1 << 20, 1 << 21))
    out, c = [], 1024
    while c <= top:
        out.append(c)
        c *= 2
    return sorted(set(out + [target]))


def collect(source: str | None, context: str = "32k", batch: int = 1, budget: str | None = None,
            run_validate: bool = False, validate_json: str | None = None, progress=None, card=None,
            ecosystem=None, observe_json: str | None = None) -> dict:
    from archprobe.memory.plan import largest_fitting_context, parse_bytes, parse_tokens, plan_memory
    from archprobe.structure.checkpoint import open_checkpoint
    from archprobe.structure.inspect import document

    # read before the long work: a bad document fails in a second, not after the whole report
    validation = _read_validate_json(validate_json) if validate_json else None
    observation = _read_json(observe_json, "archprobe.observe/1", "the observe document") if observe_json else None
    # opened and derived once (the user's card applied): the page, memory, adapt and validate read it
    ck = open_checkpoint(source, card, progress)
    doc = document(ck.raw, ck.derived)
    target = parse_tokens(context)
    limit = parse_bytes(budget) if budget else None
    plan = plan_memory(doc, target, batch=batch)
    sweep = [plan_memory(doc, c, batch=batch) for c in
             sweep_contexts(doc["architecture"].get("max_position_embeddings"), target)]
    fits = largest_fitting_context(doc, limit, batch=batch) if limit else None
    try:
        from archprobe.adapt.adapt import adapt_checkpoint

        adaptation = adapt_checkpoint(ck, doc, ecosystem=ecosystem)   # ecosystem: released versions
    except ArchprobeError as exc:
        adaptation = {"error": exc.message}
    if validation is None and run_validate:
        from archprobe.validate import validate

        validation = validate(ck)
    return {"schema": SCHEMA, "source": ck.source, "inspect": doc, "memory": plan, "sweep": sweep,
            "budget_bytes": limit, "largest_fitting_context": fits, "adapt": adaptation, "validate": validation,
            "observe": observation}


def _read_validate_json(validate_json: str) -> dict:
    """A validate document someone else may have written: a regular file (no FIFO), capped, strict JSON."""
    return _read_json(validate_json, "archprobe.validate/1", "the validate document")


def _read_json(path: str, schema: str, what: str) -> dict:
    """A command's --json document from a file: a regular file (no FIFO), capped, strict JSON, its schema."""
    import os

    from archprobe.formats.jsontext import load_strict
    from archprobe.formats.limits import MAX_VALIDATE_DOC_BYTES
    from archprobe.formats.localfiles import read_capped

    folder = os.path.dirname(os.path.abspath(path))
    raw = read_capped(folder, path, MAX_VALIDATE_DOC_BYTES, what)
    doc = load_strict(raw, path, what, MAX_VALIDATE_DOC_BYTES)
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        found = doc.get("schema") if isinstance(doc, dict) else None
        raise ArchprobeError(f"{path}: schema {found!r}, expected {schema}")
    return doc
