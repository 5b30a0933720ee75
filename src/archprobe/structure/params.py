"""Parameter counts: `total` (logical, every tensor) and `active` (what one token touches).

Logical means unpacked: a packed 4-bit byte holds two parameters, quantization metadata holds none.
Active: routed experts scaled by top_k / num_experts per MoE layer, everything else on the language
model's token path in full (embeddings and head included); vision towers and MTP layers excluded.
"""

from __future__ import annotations

from archprobe.structure.layers import LayerPlan
from archprobe.structure.tensors import Entry, TensorTable


def _component(entry: Entry, in_mixer: bool, in_ffn: bool) -> str:
    s = entry.suffix
    if in_ffn:
        if ".experts." in "." + s and "shared_expert" not in s:
            return "routed_experts"
        if "shared_expert" in s:
            return "shared_experts"
        if "gate.weight" in s or "router" in s or "correction_bias" in s or "expert_bias" in s:
            return "router"
        if "latent" in s or "routed_expert_" in s:
            return "latent_projections"
        return "ffn_other" if len(entry.shape) < 2 else "dense_ffn"
    if in_mixer:
        return "attention"
    if "res_proj" in s or "res_norm" in s or "attn_res" in s:
        return "attn_res"
    return "norms" if len(entry.shape) <= 1 else "other"


def count_params(table: TensorTable, plans: list[LayerPlan], top_k: int | None) -> dict:
    by: dict[str, int] = {}
    active = 0
    total = 0

    def add(comp: str, n: int, act: float) -> None:
        nonlocal active, total
        by[comp] = by.get(comp, 0) + n
        total += n
        active += int(round(act))

    for name, e in table.model.items():
        low = name.lower()
        comp = ("embedding" if "embed" in low or "wte" in low else "lm_head" if "lm_head" in low or low.startswith(
            "output.") else "attn_res" if "attn_res" in low else "norms" if len(e.shape) <= 1 else "other")
        add(comp, e.params, e.params)
    for plan in plans:
        layer = table.layers.get(plan.index, {})
        mixer_names = plan.mixer.claimed if plan.mixer else set()
        ffn_names = plan.ffn.claimed if plan.ffn else set()
        n_exp = plan.ffn.num_experts if plan.ffn else 0
        for e in layer.values():
            comp = _component(e, e.suffix in mixer_names, e.suffix in ffn_names)
            share = 1.0
            if comp == "routed_experts" and n_exp and top_k:
                share = min(1.0, top_k / n_exp)
            add(comp, e.params, e.params * share)
    for layer in table.mtp.values():
        for e in layer.values():
            add("mtp", e.params, 0)
    for e in table.vision:
        add("vision", e.params, 0)
    return {"total": total, "active": active, "by_component": dict(sorted(by.items(), key=lambda kv: -kv[1]))}
