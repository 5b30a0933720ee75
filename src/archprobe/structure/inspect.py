"""`inspect_checkpoint`: config.json + headers -> the `archprobe.inspect/1` document.

Reads only headers (local files, GGUF, or hub Range requests). Nothing from the checkpoint is
executed: `auto_map` is noted and ignored.
"""

from __future__ import annotations

import re
from collections import Counter

from archprobe.formats.quant import classify, summarize
from archprobe.formats.sources import Progress, RawCheckpoint, open_source
from archprobe.structure.config import ModelConfig, normalize_config
from archprobe.structure.features import assemble
from archprobe.structure.layers import LayerPlan, analyse_layer
from archprobe.structure.params import count_params
from archprobe.structure.residuals import detect_attnres, detect_depth_weights, detect_gated
from archprobe.structure.tensors import TensorTable, build_table

SCHEMA = "archprobe.inspect/1"
MODEL_LEVEL_KNOWN = re.compile(r"(embed|wte|wpe|lm_head|^output\.|(^|\.)norm(_f)?\.|final_layernorm|ln_f|"
                               r"attn_res|rotary|inv_freq)")


def _hidden_size(cfg: ModelConfig, table: TensorTable) -> int:
    if cfg.hidden_size:
        return cfg.hidden_size
    for name, e in table.model.items():
        if "embed" in name and len(e.shape) == 2:
            return e.shape[1]
    widths = Counter(e.shape[0] for layer in table.layers.values() for e in layer.values() if len(e.shape) == 1)
    return widths.most_common(1)[0][0] if widths else 0


def _family(name: str) -> str:
    return re.sub(r"\.\d+\.", ".{N}.", name)


def _unrecognized(plans: list[LayerPlan], table: TensorTable, residual_layers: set[int]) -> list[dict]:
    fams: Counter = Counter()
    for p in plans:
        for e in p.unexplained:
            fams[_family(e.name)] += e.count
        for r, e in p.loose.items():
            known = ("norm" in r or r.endswith(("ln_1.weight", "ln_2.weight")) or
                     (p.index in residual_layers and ("res_" in r or e.shape[:1] == (1,))))
            if not known:
                fams[_family(e.name)] += e.count
    for name, e in table.model.items():
        if not MODEL_LEVEL_KNOWN.search(name):
            fams[_family(e.name)] += e.count
    return [{"pattern": k, "tensors": v} for k, v in sorted(fams.items())]


def analyse(raw: RawCheckpoint) -> dict:
    """The inspect document for an already opened checkpoint."""
    cfg = normalize_config(raw.config)
    warnings = list(raw.warnings)
    if raw.config is None:
        warnings.append("no config.json: structure from tensor shapes only")
    if cfg.remote_code:
        warnings.append("config.json declares auto_map (custom modeling code); archprobe never runs it")
    tensors = [t for h in raw.headers for t in h.tensors]
    roles = classify(tensors, cfg.quantization_config)
    table = build_table(tensors, roles, cfg.num_layers, gguf=raw.kind == "gguf")
    H = _hidden_size(cfg, table)
    plans = [analyse_layer(i, layer, H, cfg) for i, layer in table.layers.items()]
    loose = {p.index: p.loose for p in plans}
    residual = [f for f in (detect_attnres(table, loose, H, cfg), detect_gated(loose, H),
                            detect_depth_weights(loose, table)) if f]
    attnres_layers = set(next((f["layers"] for f in residual if f["id"] == "residual.attnres"), []))
    gated_layers = set(next((f["layers"] for f in residual if f["id"] == "residual.gated"), []))
    features = assemble(plans, table, cfg, roles, residual, warnings)
    params = count_params(table, plans, cfg.top_k)
    unknown_dtypes = sorted({t.dtype for t in tensors if roles[t.name].scheme is None
                             and not t.dtype.startswith("GGUF_") and _bits(t.dtype) is None})
    if unknown_dtypes:
        n = sum(t.count for t in tensors if t.dtype in unknown_dtypes)
        warnings.append(f"unknown dtype(s) {', '.join(unknown_dtypes)} on {n} tensor(s): counted by shape")
    if cfg.num_layers is not None and table.layers and len(table.layers) != cfg.num_layers:
        warnings.append(f"config says {cfg.num_layers} layers, the checkpoint has tensors for {len(table.layers)}")
    moe = next((p.ffn for p in plans if p.ffn and p.ffn.kind in ("moe", "latent_moe")), None)
    mixers = Counter(p.mixer_kind for p in plans)
    ffns = Counter(p.ffn_kind for p in plans)
    arch = {
        "num_layers": len(table.layers) or cfg.num_layers, "hidden_size": H or None,
        "vocab_size": cfg.vocab_size or _vocab(table), "num_heads": cfg.num_heads,
        "num_kv_heads": cfg.num_kv_heads, "head_dim": cfg.head_dim,
        "num_experts": moe.num_experts if moe else cfg.num_experts, "top_k": cfg.top_k,
        "num_shared_experts": cfg.num_shared_experts if moe else None,
        "max_position_embeddings": cfg.max_position_embeddings, "intermediate_size": cfg.intermediate_size,
        "moe_intermediate_size": (moe.attrs.get("expert_width") if moe else None) or cfg.moe_intermediate_size,
        "kv_lora_rank": cfg.kv_lora_rank, "q_lora_rank": cfg.q_lora_rank,
        "latent_size": moe.attrs.get("latent_size") if moe else None,
        "mixers": dict(mixers), "ffns": dict(ffns),
    }
    layers = [{"index": p.index, "mixer": p.mixer_kind, "ffn": p.ffn_kind,
               "residual": "attnres" if p.index in attnres_layers else "gated" if p.index in gated_layers
               else "prenorm"} for p in plans]
    dtypes: dict[str, int] = {}
    for t in tensors:
        dtypes[t.dtype] = dtypes.get(t.dtype, 0) + t.nbytes * t.count
    header_bytes = raw.bytes_fetched if raw.bytes_fetched is not None else sum(h.header_bytes for h in raw.headers)
    return {
        "schema": SCHEMA,
        "source": {"kind": raw.kind, "location": raw.location, "revision": raw.revision},
        "model_type": cfg.model_type,
        "wrapper_model_type": cfg.wrapper_model_type,
        "architectures": cfg.architectures,
        "architecture": arch,
        "layers": layers,
        "params": params,
        "storage": {"files": len(raw.headers), "bytes": sum(max(h.file_bytes, 0) for h in raw.headers),
                    "tensors": sum(h.num_tensors for h in raw.headers), "header_bytes_read": header_bytes,
                    "dtypes": dict(sorted(dtypes.items(), key=lambda kv: -kv[1]))},
        "quantization": summarize(tensors, roles),
        "features": features,
        "unrecognized": _unrecognized(plans, table, attnres_layers | gated_layers),
        "warnings": warnings,
    }


def _bits(dtype: str):
    from archprobe.formats.dtypes import DTYPE_BITS

    return DTYPE_BITS.get(dtype)


def _vocab(table: TensorTable) -> int | None:
    for name, e in table.model.items():
        if "embed" in name and len(e.shape) == 2:
            return e.shape[0]
    return None


def inspect_checkpoint(source: str | None = None, progress: Progress | None = None) -> dict:
    """Inspect `source` (folder, .safetensors/.gguf file, or hub `org/name[@rev]`); None: the demo."""
    if source is None:
        from archprobe.demo import demo_checkpoint

        source = str(demo_checkpoint())
    return analyse(open_source(source, progress))
