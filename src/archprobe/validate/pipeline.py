"""`validate`: load (checkpoint + card), stream (archprobe.nn, one layer at a time), compare.

The status never claims more than was checked: `ran` means every tensor the card binds loaded into
the module the card describes and every layer's output is finite, and nothing was compared; `pass`
means that and, in addition, that a reference's logits agree within the fp32 gate (relative max |diff|
<= 1e-4 and KL <= 1e-6); `checked` lists what was. A reference that disagrees, or cannot run when asked
for, is `fail`; a bfloat16 comparison is reported but not gated, so it stays `ran`. A card that describes what
archprobe.nn cannot run is `unsupported` with the one missing piece; a field validate needs that the
card leaves unknown is a one-line error naming it (NeedsField).
"""

from __future__ import annotations

import os
import resource

import torch

from archprobe.errors import ArchprobeError, SourceError
from archprobe.formats.limits import MAX_GENERATE
from archprobe.validate.prompt import decode_text, top_tokens
from archprobe.validate.reference import Reference

SCHEMA = "archprobe.validate/1"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
GATE = {"rel_max_abs_diff": 1e-4, "kl": 1e-6}   # fp32: the correctness gate (conventions 5)


def _parse_layers(spec: str | None, n: int) -> int:
    """'0-3' -> run layers 0..3 (returns the count); None -> all."""
    if not spec:
        return n
    try:
        lo, _, hi = spec.partition("-")
        lo, hi = int(lo), int(hi or lo)
    except ValueError:
        raise ArchprobeError(f"--layers {spec!r}: use a range like 0-3") from None
    if lo != 0 or not 0 <= hi < n:
        raise ArchprobeError(f"--layers {spec!r}: layers run from 0, and the model has {n}")
    return hi + 1


def fetch_source(source: str, layers: str | None, fetch_progress):
    """A hub repo id downloaded into the cache (only the shards of the layers that run; a GGUF repo: the
    model its tag names, sha256-verified); anything else that is not a local checkpoint is a one-line
    SourceError."""
    from archprobe.formats.sources import HUB_SOURCE

    if not (HUB_SOURCE.match(source) and not source.startswith((".", "/", "~")) and not os.path.exists(source)):
        raise SourceError(f"{source}: validate needs a local checkpoint folder or .gguf file, or a hub repo id "
                          "(org/name[@revision][:GGUF_TAG])")
    from archprobe.formats.hub import list_hashes
    from archprobe.validate.fetch import fetch_gguf, fetch_layers, is_gguf_repo
    from archprobe.validate.mapping import text_config

    repo_id, _, revision = source.partition(":")[0].partition("@")
    hashes = list_hashes(repo_id, revision or "main")
    if is_gguf_repo(source, hashes):
        return fetch_gguf(source, progress=fetch_progress, hashes=hashes)

    return fetch_layers(source, lambda cfg: _parse_layers(layers, int(text_config(cfg).get("num_hidden_layers")
                                                                      or 0)), progress=fetch_progress)


def _generation(loaded, prompt: list[int], n: int, dtype, ref) -> dict:
    """`n` greedy tokens through the cached decode path (validate/decode.py), beside the reference's."""
    from archprobe.validate.decode import LazyModel
    from archprobe.validate.plan import Unsupported

    out: dict = {"new_tokens": n, "reference": None, "first_difference": None}
    try:
        model = LazyModel(loaded.folder, dtype, loaded=loaded)
    except Unsupported as exc:
        out["ours"] = {"error": exc.message}
        return out
    try:
        ours = [r["next_token"] for r in model.generate(prompt, n - 1)][:n]
    finally:
        model.close()
    out["ours"] = {"ids": ours, "text": decode_text(loaded.folder, ours)}
    if ref is not None and ref.generated is not None:
        theirs = ref.generated[:n]
        out["reference"] = {"ids": theirs, "text": decode_text(loaded.folder, theirs)}
        out["first_difference"] = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False))
                                        if a != b),
                                       None if len(ours) == len(theirs) else min(len(ours), len(theirs)))
    return out


def within_gate(ref: dict, dtype: str) -> bool | None:
    """True / False against the fp32 gate; None where no gate applies (bf16 is reported, not gated)."""
    if dtype != "float32" or ref.get("error"):
        return None
    scale = max(ref["logit_scale"], 1e-30)
    return ref["max_abs_diff"] <= GATE["rel_max_abs_diff"] * scale and abs(ref["kl"]) <= GATE["kl"]


def validate(source: str, prompt_ids: list[int] | None = None, reference: str = "none", dtype: str = "float32",
             layers: str | None = None, save_logits: str | None = None, progress=None, *, prompt: str | None = None,
             pin_routing: bool = False, offload_dir: str | None = None, fetch_progress=None,
             card=None, generate: int = 0) -> dict:
    """The `archprobe.validate/1` document for a local checkpoint folder or a hub repo.

    `progress`, if given, wraps the iterable of layer indices (the CLI passes a rich progress bar).
    A hub source downloads only the shards holding the layers that run. `pin_routing` runs the
    transformers reference first and makes every MoE block choose its experts from the input the
    reference's block saw. `offload_dir` keeps each layer's output on disk instead of in memory.
    `source` may be an opened `Checkpoint` (structure/checkpoint.py: its card is the one validated, derived
    once); else `card` (a Card) overrides the derived card's fields. `generate` > 0 also decodes
    that many tokens greedily (ours through the cached decode path, and the reference's)."""
    from archprobe.validate.build import blueprint
    from archprobe.validate.load import load
    from archprobe.validate.norm_gains import check_norm_gains
    from archprobe.validate.plan import Unsupported
    from archprobe.validate.stream import stream_forward

    if dtype not in DTYPES:
        raise ArchprobeError(f"--dtype {dtype!r}: use float32 or bfloat16")
    if pin_routing and reference != "transformers":
        raise ArchprobeError("--pin-routing pins to the reference's choices", hint="add --reference transformers")
    if generate < 0 or generate > MAX_GENERATE:
        raise ArchprobeError(f"--generate {generate}: give 0 to {MAX_GENERATE} tokens")
    if generate and layers:
        raise ArchprobeError("--generate decodes through every layer", hint="drop --layers")
    from archprobe.structure.checkpoint import Checkpoint

    fetched = None
    if isinstance(source, Checkpoint) and not os.path.exists(source.raw.location):   # a hub checkpoint
        source, card = source.source, source.user_card
    if not isinstance(source, Checkpoint) and not os.path.isdir(source) and not (
            source.endswith(".gguf") and os.path.isfile(source)):
        source, fetched = fetch_source(source, layers, fetch_progress)   # the shards that run, then opened
    loaded = load(source, card)
    with loaded.reader.session() as get:   # norms nobody said w or (1 + w) for: the whole model's gains decide
        loaded.card, assumptions = check_norm_gains(loaded.card, get)
    if prompt is not None:
        from archprobe.validate.prompt import encode

        prompt_ids = encode(loaded.folder, prompt)
    doc: dict = {"schema": SCHEMA, "status": "ran", "checked": [], "mapped_tensors": 0, "unmapped_tensors": [],
                 "missing_tensors": [], "layers": [], "reference": None, "peak_rss_bytes": 0}
    if fetched:
        doc["fetched"] = fetched
    if assumptions:
        doc["assumptions"] = assumptions
    n_run = _parse_layers(layers, len(loaded.card.layers))
    try:
        bp = blueprint(loaded.card, loaded.reader.all_shapes(loaded.card.tensors.values()), n_run)
    except Unsupported as exc:
        doc.update(status="unsupported", reasons=[exc.message],
                   unmapped_tensors=sorted(loaded.card.tensors.values())[:50])
        return doc
    cfg = bp.config
    doc["unmapped_tensors"] = bp.unmapped
    ids = torch.tensor([prompt_ids or [1, 2, 3, 4, 5, 6, 7, 8]])
    if int(ids.max()) >= cfg.vocab_size or int(ids.min()) < 0:
        raise ArchprobeError(f"--prompt-ids must lie in [0, {cfg.vocab_size})")
    ref = None
    if reference == "transformers" and pin_routing:   # the reference runs first: its choices pin ours
        from archprobe.validate.reference import run_transformers

        ref = run_transformers(loaded.folder, loaded.config, ids, capture_moe=True,
                               gguf_file=loaded.gguf_file, generate=generate)
        if isinstance(ref, dict):
            raise ArchprobeError(f"--pin-routing: {ref['error']}")
    result = stream_forward(bp, loaded.reader, ids, DTYPES[dtype], n_run, progress=progress,
                            offload_dir=offload_dir, routing_pins=ref.moe_inputs if ref is not None else None)
    doc["layers"], doc["mapped_tensors"] = result.layers, result.mapped
    doc["missing_tensors"] = sorted(set(result.problems))
    if result.problems or not all(layer["finite"] for layer in result.layers):
        doc["status"] = "fail"
    else:
        doc["checked"] += ["every bound tensor loaded", "outputs finite"]
    if offload_dir:
        doc["offload"] = {"dir": offload_dir, "bytes": result.hidden.bytes_on_disk, "layers": len(result.hidden)}
    if pin_routing:
        doc["routing_pinned"] = {"layers": len(result.flips), "tokens_flipped": sum(result.flips.values()),
                                 "per_layer": {str(k): v for k, v in sorted(result.flips.items())}}
    if result.logits is not None:
        doc["next_tokens"] = top_tokens(loaded.folder, result.logits)
        if save_logits:
            from safetensors.torch import save_file

            save_file({"logits": result.logits.contiguous()}, save_logits)
        if reference == "transformers":
            from archprobe.validate.reference import compare, run_transformers

            if ref is None:
                ref = run_transformers(loaded.folder, loaded.config, ids, gguf_file=loaded.gguf_file,
                                       generate=generate)
            doc["reference"] = ref if isinstance(ref, dict) else compare(ref, result.logits, result.hidden.get)
            if not isinstance(ref, dict):
                doc["reference"]["next_tokens"] = top_tokens(loaded.folder, ref.logits)
            ok = within_gate(doc["reference"], dtype)
            doc["reference"]["within_gate"] = ok
            if doc["reference"].get("error") or ok is False:
                doc["status"] = "fail" if doc["status"] == "ran" else doc["status"]
            elif ok:
                doc["status"] = "pass" if doc["status"] == "ran" else doc["status"]
                doc["checked"].append("logits within the fp32 gate of the reference")
    result.hidden.close()
    if generate and result.logits is not None:
        doc["generation"] = _generation(loaded, ids[0].tolist(), generate, DTYPES[dtype],
                                        ref if isinstance(ref, Reference) else None)
    doc["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return doc
