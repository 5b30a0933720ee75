"""observe's driver: source -> weights scan and/or recorded streamed forward -> archprobe.observe/1."""

from __future__ import annotations

import os
import resource

from archprobe.errors import ArchprobeError

SCHEMA = "archprobe.observe/1"
DEFINITIONS = {
    "horizon": "half-life in tokens: ln 2 / -g, the steps after which a linear-attention state decayed by "
               "exp(g) per step keeps half of what it held; g is the head's mean log-decay over its channels "
               "and the sample's tokens ('tokens'), or at zero gate input from the weights ('tokens_at_rest')",
    "cosine_in_out": "mean over tokens of cos(residual stream before the layer, after it)",
    "update_ratio": "mean over tokens of |after - before| / |before|",
    "switch_rate": "share of consecutive token pairs (within one text) whose top-k expert sets differ",
    "share_kept": "indexer: kept KV entries over causal ones; head gate: mean per-head multiplier",
}


def _local(source: str | None) -> tuple[str | None, dict | None]:
    """A local folder or GGUF file (None: the demo, opened as every command opens it), or a hub repo's
    fetched one."""
    if source is None or os.path.isdir(source) or (os.path.isfile(source) and source.lower().endswith(".gguf")):
        return source, None
    if os.path.exists(source):
        from archprobe.errors import SourceError

        raise SourceError(f"{source}: observe reads a checkpoint folder (config.json + safetensors shards), a "
                          "GGUF file or a hub repo id")
    from archprobe.validate.pipeline import fetch_source

    return fetch_source(source, None, None)


def _reader(ck):
    """(tensor reader, config) of an opened local safetensors folder or GGUF file, read without the card: the
    weights scan needs none, so it runs on checkpoints no card explains."""
    from archprobe.errors import SourceError
    from archprobe.validate.load import TensorReader

    raw = ck.raw
    base = raw.location if os.path.isdir(raw.location) else os.path.dirname(raw.location)
    if raw.kind == "gguf" and os.path.exists(raw.location):
        from archprobe.validate.gguf_reader import GGUFTensorReader

        return GGUFTensorReader(base, raw.headers, raw.gguf_metadata or {}, raw.config or {}), raw.config
    if raw.kind != "local" or raw.gguf_metadata is not None:
        raise SourceError(f"{ck.source}: observe reads safetensors and GGUF checkpoints (this is {raw.kind})")
    return TensorReader(base, raw.headers), raw.config


def weights_section(source, progress=None) -> dict:
    """The weights scan of an opened checkpoint (structure/checkpoint.py) or of a local folder."""
    from archprobe.observe.weights import scan
    from archprobe.structure.checkpoint import as_checkpoint

    reader, config = _reader(as_checkpoint(source))
    return scan(reader, config, progress)


def observe(source: str | None = None, texts: list[str] | None = None, prompt_ids: list[int] | None = None, *,
            weights_only: bool = False, weights: bool = True, card=None, dtype: str = "float32",
            progress=None) -> dict:
    """The archprobe.observe/1 document. `source` None: the embedded demo. `texts` default to the built-in
    sample; `prompt_ids` replace them. `weights=False` skips the weights scan (forward only). `card`: a user
    Card laid over the derived one; the checkpoint is opened and its card derived once for both parts."""
    from archprobe.observe.findings import findings
    from archprobe.structure.checkpoint import open_checkpoint

    folder, fetched = _local(source)
    ck = open_checkpoint(folder, card)
    doc: dict = {"schema": SCHEMA, "source": ck.source, "tokens": 0, "weights": None, "routing": [], "depth": [],
                 "attnres": [], "horizons": [], "mla": [], "residual_weights": [], "gates": [], "warnings": [],
                 "definitions": DEFINITIONS}
    if fetched:
        doc["fetched"] = fetched
    if weights_only:
        doc["weights"] = weights_section(ck, progress)
    else:      # the weights scan rides the forward's reads; what the forward never read is scanned after
        scan = _forward(doc, ck, texts, prompt_ids, dtype, progress, weights)
        if scan is not None:
            doc["weights"] = scan.finish(progress)
    doc["findings"] = findings(doc)
    doc["warnings"] = [f["message"] for f in doc["findings"] if f["severity"] == "warning"]
    doc["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return doc


def _forward(doc: dict, ck, texts, prompt_ids, dtype: str, progress, weights: bool):
    """Run the recorded forward into `doc`; with `weights`, the Scan that watched its reads."""
    import torch

    from archprobe.observe.recorder import Recorder
    from archprobe.observe.sample import SAMPLE, encode_texts
    from archprobe.observe.weights import Scan
    from archprobe.validate.build import blueprint
    from archprobe.validate.load import load
    from archprobe.validate.norm_gains import check_norm_gains
    from archprobe.validate.pipeline import DTYPES
    from archprobe.validate.plan import Unsupported
    from archprobe.validate.stream import stream_forward

    if dtype not in DTYPES:
        raise ArchprobeError(f"--dtype {dtype!r}: use float32 or bfloat16")
    loaded = load(ck)
    scan = Scan(loaded.reader, loaded.config) if weights else None
    reader = scan.watching(loaded.reader) if scan else loaded.reader
    with reader.session() as get:
        loaded.card, _ = check_norm_gains(loaded.card, get)
    n = len(loaded.card.layers)
    try:
        bp = blueprint(loaded.card, loaded.reader.all_shapes(loaded.card.tensors.values()), n)
    except Unsupported as exc:
        doc["forward"] = {"status": "unsupported", "reason": exc.message}
        return scan
    vocab = bp.config.vocab_size
    if prompt_ids:
        ids, starts, how = list(prompt_ids), [0], "--prompt-ids"
    else:
        ids, starts, how = encode_texts(loaded.folder, texts or list(SAMPLE), vocab)
    if not ids or max(ids) >= vocab:
        raise ArchprobeError(f"token ids must lie in [0, {vocab})")
    limit = bp.config.learned_positions and bp.config.learned_positions - (bp.config.position_offset or 0)
    if limit and len(ids) > limit:     # learned positions end there: the rest of the texts is left out
        doc["truncated_to"] = limit
        ids, starts = ids[:limit], [s for s in starts if s < limit]
    rec = Recorder(starts)
    result = stream_forward(bp, reader, torch.tensor([ids]), DTYPES[dtype], n, progress=progress,
                            observer=rec)
    result.hidden.close()
    rec.finish()
    doc["tokens"], doc["tokenized_with"], doc["texts"] = len(ids), how, len(starts)
    doc["forward"] = {"status": "ran" if not result.problems else "incomplete", "problems": result.problems,
                      "layers_run": len(result.layers)}
    doc["layers_nonfinite"] = [{"layer": s["index"]} for s in result.layers if not s["finite"]]
    doc["routing"], doc["depth"], doc["attnres"] = rec.routing, rec.depth, rec.attnres
    doc["horizons"], doc["mla"], doc["residual_weights"] = rec.horizons, rec.mla, rec.residual_weights
    doc["gates"] = rec.gates
    return scan
