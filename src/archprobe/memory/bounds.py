"""Upper bounds, labelled as bounds (never throughput): the bytes one decode token must read (active weights +
one sequence's cache) against the devices' memory bandwidth, and the FLOPs one prefill token costs against
their dense tensor FLOP/s. Real engines reach a fraction of either; the seed draws no throughput conclusions.
"""

from __future__ import annotations

ATTN = ("gqa", "mha", "mqa", "moa", "mla", "lowrank_kv")


def active_weight_bytes(doc: dict, card, weight_scale: float = 1.0) -> int:
    """Stored bytes one token reads: everything on the token path, routed experts at top_k / num_experts."""
    comps = doc["params"].get("stored_bytes_by_component") or {}
    share = 1.0
    moe = [layer.ffn for layer in card.layers if layer.ffn.kind in ("moe", "latent_moe") and layer.ffn.num_experts]
    if moe:
        share = min(1.0, (moe[0].top_k or 1) / moe[0].num_experts)
    total = 0.0
    for comp, b in comps.items():
        if comp in ("vision", "mtp"):
            continue
        total += b * (share if comp == "routed_experts" else 1.0)
    if comps.get("embedding") and not card.tie_word_embeddings:
        total -= comps["embedding"] * (1 - 1 / max(card.vocab_size or 1, 1))    # one embedding row, not the table
    return int(total * weight_scale)


def prefill_flops_per_token(doc: dict, card, context: int) -> float:
    """2 x active parameters + the attention score/value products at the average position (context / 2)."""
    flops = 2.0 * doc["params"]["active"]
    for layer in card.layers:
        m = layer.mixer
        if m.kind in ATTN and m.num_heads:
            t = min(context, m.sliding_window) if m.sliding_window else context
            qk = (m.nope_dim or m.head_dim or 0) + (m.rope_dim or 0) if m.kind == "mla" else (m.head_dim or 0)
            v = m.v_head_dim or m.head_dim or 0
            flops += 2.0 * m.num_heads * (qk + v) * t / 2
    return flops


def bounds(doc: dict, card, context: int, cache_bytes_per_sequence: float, device, layout, weight_scale=1.0,
           fp8: bool = False) -> dict:
    active = active_weight_bytes(doc, card, weight_scale)
    per_token = int(active + cache_bytes_per_sequence)
    out = {"decode_bytes_per_token": per_token, "active_weight_bytes": active,
           "prefill_flops_per_token": prefill_flops_per_token(doc, card, context),
           "note": "upper bounds from the data sheet, not throughput: one sequence's decode reads every active "
                   "weight and its whole cache per token; stages run one after another, TP ranks in parallel"}
    if device is not None:
        out["decode_tokens_per_s_max"] = round(layout.tp * device.bandwidth_bytes_per_s / per_token, 2)
        flops = device.fp8_flops if fp8 and device.fp8_flops else device.bf16_flops
        out["prefill_tokens_per_s_max"] = (round(layout.devices * flops / out["prefill_flops_per_token"], 1)
                                           if flops else None)
        if not flops:
            out["note"] += f"; {device.label} has no published tensor FLOP/s, so no compute bound"
    return out
