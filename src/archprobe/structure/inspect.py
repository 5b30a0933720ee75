"""`inspect_checkpoint`: config.json + headers -> the card -> the `archprobe.inspect/1` document.

Reads only headers (local files, GGUF, or hub Range requests). Nothing from the checkpoint is
executed: `auto_map` is noted and ignored. Every field of the document is a view of the card (built
once, by structure/checkpoint.py), so inspect, memory, adapt and report cannot disagree about the model.
"""

from __future__ import annotations

import re
from collections import Counter

from archprobe.formats.checkpoint import Progress, RawCheckpoint
from archprobe.formats.gguf import is_gguf_dtype
from archprobe.structure.card import Card
from archprobe.structure.checkpoint import Checkpoint, as_checkpoint, build_card
from archprobe.structure.derive import Derived
from archprobe.structure.features import features
from archprobe.structure.params import count_params

SCHEMA = "archprobe.inspect/1"


def _family(name: str) -> str:
    return re.sub(r"\.\d+\.", ".{N}.", name)


def analyse(raw: RawCheckpoint, card: Card | None = None, derived: Derived | None = None) -> dict:
    """The inspect document for an already opened checkpoint (from `derived` when given)."""
    d = derived or build_card(raw, card)
    return document(raw, d)


def document(raw: RawCheckpoint, d: Derived) -> dict:
    card, table, cfg = d.card, d.table, d.cfg
    warnings = list(raw.warnings)
    if raw.config is None:
        warnings.append("no config.json: structure from tensor shapes only")
    if cfg.remote_code:
        warnings.append("config.json declares auto_map (custom modeling code); archprobe never runs it")
    warnings += card.warnings
    tensors = d.tensors
    unknown_dtypes = sorted({t.dtype for t in tensors if d.roles[t.name].scheme is None
                             and not d.roles[t.name].metadata and not is_gguf_dtype(t.dtype)
                             and _bits(t.dtype) is None})
    if unknown_dtypes:
        n = sum(t.count for t in tensors if t.dtype in unknown_dtypes)
        warnings.append(f"unknown dtype(s) {', '.join(unknown_dtypes)} on {n} tensor(s): counted by shape")
    feats = features(card)
    _table_evidence(feats, d)
    moe = next((layer.ffn for layer in card.layers if layer.ffn.kind in ("moe", "latent_moe")), None)
    attn = next((layer.mixer for layer in card.layers if layer.mixer.kind in ("gqa", "mha", "mqa", "mla")), None)
    dense = next((layer.ffn for layer in card.layers if layer.ffn.kind == "dense"), None)
    arch = {
        "num_layers": card.num_layers, "hidden_size": card.hidden_size, "vocab_size": card.vocab_size,
        "num_heads": attn.num_heads if attn else cfg.first_int("num_attention_heads"),
        "num_kv_heads": attn.num_kv_heads if attn else None, "head_dim": attn.head_dim if attn else None,
        "num_experts": moe.num_experts if moe else None, "top_k": moe.top_k if moe else None,
        "num_shared_experts": (moe.shared.count if moe and moe.shared else None),
        "max_position_embeddings": card.max_position_embeddings,
        "intermediate_size": dense.width if dense else cfg.first_int("intermediate_size"),
        "moe_intermediate_size": moe.expert_width if moe else None,
        "kv_lora_rank": attn.kv_lora_rank if attn else None, "q_lora_rank": attn.q_lora_rank if attn else None,
        "latent_size": moe.latent_size if moe else None,
        "mixers": dict(Counter(layer.mixer.kind for layer in card.layers)),
        "ffns": dict(Counter(layer.ffn.kind for layer in card.layers)),
    }
    layers = [{"index": i, "mixer": layer.mixer.kind, "ffn": layer.ffn.kind,
               "residual": layer.residual.kind if layer.residual.kind != "identity" else "prenorm",
               **({"parallel_mixer": layer.parallel_mixer.kind} if layer.parallel_mixer is not None else {})}
              for i, layer in enumerate(card.layers)]
    dtypes: dict[str, int] = {}
    for t in tensors:
        dtypes[t.dtype] = dtypes.get(t.dtype, 0) + t.nbytes * t.count
    header_bytes = raw.bytes_fetched if raw.bytes_fetched is not None else sum(h.header_bytes for h in raw.headers)
    fams: Counter = Counter()
    counts = {e.name: e.count for e in table.all_entries()}
    for name in card.unexplained:
        fams[_family(name)] += counts.get(name, 1)
    return {
        "schema": SCHEMA,
        "source": {"kind": raw.kind, "location": raw.location, "revision": raw.revision},
        "model_type": cfg.model_type,
        "wrapper_model_type": cfg.wrapper_model_type,
        "architectures": cfg.architectures,
        "architecture": arch,
        "layers": layers,
        "params": count_params(card, table),
        "storage": {"files": len(raw.headers), "bytes": sum(max(h.file_bytes, 0) for h in raw.headers),
                    "tensors": sum(h.num_tensors for h in raw.headers), "header_bytes_read": header_bytes,
                    "dtypes": dict(sorted(dtypes.items(), key=lambda kv: -kv[1]))},
        "quantization": card.quantization,
        "features": feats,
        "unrecognized": [{"pattern": k, "tensors": v} for k, v in sorted(fams.items())],
        "unknown_fields": card.unknown_fields(),
        "card": {k: v for k, v in card.to_dict().items() if k not in ("tensors", "unexplained")},
        "warnings": warnings,
    }


def _table_evidence(feats: list[dict], d: Derived) -> None:
    """Quantization, MTP and vision rows get their evidence and sizes from the tensors themselves."""
    by_id = {f["id"]: f for f in feats}
    per: dict[str, dict] = {}
    for i, layer in d.table.layers.items():
        for e in layer.values():
            if e.role.scheme and not e.role.metadata:
                row = per.setdefault(e.role.scheme, {"first": e, "layers": set()})
                row["layers"].add(i)
    for e in d.table.all_entries():
        if e.role.scheme and not e.role.metadata:
            per.setdefault(e.role.scheme, {"first": e, "layers": set()})
    for scheme, row in per.items():
        f = by_id.get(f"quant.{scheme}")
        if f is None:
            continue
        e = row["first"]
        a = f["attrs"]
        why = f"{e.dtype} storing {a['bits']}-bit values" + (f" in groups of {a['group_size']}" if a["group_size"]
                                                              else "")
        f["evidence"] = [{"tensor": e.name, "shape": list(e.info.shape), "dtype": e.dtype, "why": why}]
        positions = {idx: pos for pos, idx in enumerate(d.table.layers)}
        f["layers"] = sorted(positions[i] for i in row["layers"])
    if "mtp" in by_id:
        by_id["mtp"]["attrs"]["layers"] = sorted(i for i in d.table.mtp if i >= 0) or [0]
    if "multimodal.vision" in by_id:
        by_id["multimodal.vision"]["attrs"]["params"] = sum(e.params for e in d.table.vision)
        by_id["multimodal.vision"]["evidence"][0]["why"] += f" ({len(d.table.vision)} families)"


def _bits(dtype: str):
    from archprobe.formats.dtypes import DTYPE_BITS

    return DTYPE_BITS.get(dtype)


def inspect_checkpoint(source: str | Checkpoint | None = None, progress: Progress | None = None,
                       card: Card | None = None) -> dict:
    """Inspect `source` (folder, .safetensors/.gguf file, hub `org/name[@rev]`, or an opened `Checkpoint`);
    None: the demo.

    `card`: a user card (`archprobe card` output, edited) that overrides what the derivation guessed.
    """
    ck = as_checkpoint(source, card, progress)
    return document(ck.raw, ck.derived)
