"""Card feature -> the code symbols that show a framework's model code handles it.

A release's model file (or, for llama.cpp, its gguf tensor kinds) "mentions" a feature when one of these
names occurs in it as a whole identifier part. This is evidence, not proof: a mention can be a
comment or a check that refuses the feature; its absence, in the file that implements the model, is a
strong sign the feature is not handled there. Features without symbols stay unverified.
"""

from __future__ import annotations

import re

from archprobe.adapt.coverage import HANDLED, MISSING, UNVERIFIED

SYMBOLS: dict[str, tuple[str, ...]] = {
    "attention.mla": ("kv_lora_rank", "q_lora_rank", "MLA", "MultiLatentAttention", "kv_a_proj_with_mqa",
                      "ATTN_KV_A_MQA"),
    "attention.kv_compression": ("kv_lora_rank", "kv_a_proj_with_mqa", "kv_a_layernorm", "ATTN_KV_A_MQA"),
    "attention.gqa": ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "ATTN_K"),
    "attention.mha": ("num_attention_heads", "num_heads", "ATTN_Q", "ATTN_QKV"),
    "attention.mqa": ("multi_query", "num_key_value_heads", "num_kv_heads"),
    "attention.nope": ("nope", "NoPE", "no_rope", "use_rope", "use_nope"),
    "attention.output_gate": ("output_gate", "o_gate", "attn_output_gate", "g_proj", "gate_proj_attn"),
    "attention.head_gate": ("head_gate", "headwise_attn_output_gate", "headwise_gate"),
    "attention.sinks": ("sinks", "attention_sink", "attn_sinks", "ATTN_SINKS"),
    "attention.sliding_window": ("sliding_window", "sliding_window_pattern", "swa"),
    "attention.sparse_indexer": ("indexer", "Indexer", "index_topk", "index_n_heads"),
    "linear_attention.kda": ("KimiDeltaAttention", "kda", "chunk_kda", "fused_kda", "fused_recurrent_kda"),
    "linear_attention.gated_deltanet": ("GatedDeltaNet", "gated_delta_rule", "chunk_gated_delta_rule",
                                        "linear_attn"),
    "linear_attention.lightning": ("lightning", "LightningAttention", "lightning_attention"),
    "ssm.mamba2": ("Mamba2", "mamba2", "MambaMixer2", "mamba_chunk_scan", "SSM_D"),
    "ssm.mamba": ("MambaMixer", "selective_scan", "selective_scan_fn", "SSM_A", "SSM_D"),
    "conv.short": ("ShortConv", "short_conv", "conv_L_cache", "SHORTCONV_CONV"),
    "recurrent.rg_lru": ("RGLRU", "rg_lru", "RecurrentBlock"),
    "moe.routed": ("FusedMoE", "n_routed_experts", "num_experts", "num_local_experts", "SparseMoe",
                   "FFN_GATE_EXP", "FFN_GATE_INP"),
    "moe.shared_experts": ("shared_experts", "shared_expert", "n_shared_experts", "FFN_GATE_SHEXP"),
    "moe.router_bias": ("e_score_correction_bias", "router_bias", "expert_bias", "FFN_EXP_PROBS_B"),
    "moe.latent": ("latent_moe", "moe_latent", "moe_latent_size", "latent_size"),
    "mtp": ("mtp", "MTP", "nextn", "num_nextn_predict_layers", "NEXTN_EH_PROJ"),
    "mixer.parallel": ("parallel_mixer", "parallel_attn", "hybrid_head"),
    "multimodal.vision": ("vision_tower", "vision_model", "VisionModel", "vision_config", "pixel_values"),
    "residual.attnres": ("attn_res", "attnres", "AttnRes", "attention_residual", "block_attn_res"),
    "residual.hyper": ("hyper_connection", "HyperConnection", "hc_mult", "mhc"),
}


def _pattern(symbols: tuple[str, ...], ignore_case: bool = False) -> re.Pattern:
    words = "|".join(re.escape(s) for s in sorted(symbols, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9])(?:{words})(?![a-z0-9])", re.IGNORECASE if ignore_case else 0)


def symbols_for(feature: dict) -> tuple[tuple[str, ...], bool] | None:
    """(symbols, case-insensitive?) for one card feature, or None when the table has none."""
    fid = feature["id"]
    if fid.startswith("quant."):
        return (fid.split(".", 1)[1],), True
    if fid == "ffn.activation":
        name = (feature.get("attrs") or {}).get("name")
        return ((str(name),), False) if isinstance(name, str) and name else None
    if fid in SYMBOLS:
        return SYMBOLS[fid], False
    if fid.startswith("residual.") and fid != "residual.attnres":
        return SYMBOLS["residual.hyper"], False
    return None


def feature_rows(features: list[dict], code: dict[str, str], members: list[str]) -> list[dict]:
    """One row per card feature: does the code read for this release mention it?

    `code` is {file: text} of the model's own code; `members` the archive's file names (a quant scheme
    counts as handled when the framework ships a quantization module named after it)."""
    rows = []
    shown = ", ".join(sorted(code)[:3]) or "no file"
    for f in features:
        found = symbols_for(f)
        if found is None:
            rows.append({"feature": f["id"], "status": UNVERIFIED, "why": "no code symbol is known for this feature"})
            continue
        symbols, fold = found
        if f["id"].startswith("quant."):
            scheme = symbols[0].lower()
            module = next((m for m in members if "quantiz" in m.lower() and scheme in m.lower().rsplit("/", 1)[-1]),
                          None)
            if module:
                rows.append({"feature": f["id"], "status": HANDLED, "why": f"quantization module {module}"})
                continue
        if not code:
            rows.append({"feature": f["id"], "status": UNVERIFIED, "why": "no model code was read for this release"})
            continue
        pattern = _pattern(symbols, fold)
        hit = next(((name, m.group(0)) for name, text in code.items() if (m := pattern.search(text))), None)
        if hit:
            rows.append({"feature": f["id"], "status": HANDLED, "why": f"{hit[0]} mentions {hit[1]!r}"})
        else:
            rows.append({"feature": f["id"], "status": MISSING,
                         "why": f"none of {', '.join(symbols[:4])} in {shown}"})
    return rows
