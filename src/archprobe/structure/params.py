"""Parameter counts from the card's roles: `total` (logical, every tensor) and `active` (one token).

Logical means unpacked: a packed 4-bit byte holds two parameters; quantization metadata holds none
(its elements are reported apart as `quant_metadata_elements`, so a counter that includes them, like
older hub figures, can be reproduced). Active: routed experts scaled by top_k / num_experts per MoE
layer, everything else on the language model's token path in full; vision and MTP excluded.
"""

from __future__ import annotations

from archprobe.structure.card import Card
from archprobe.structure.tensors import TensorTable


def component_of_role(role: str) -> str:
    parts = role.split("#", 1)[0].split(".")
    if parts[0] == "layers":
        part, param = parts[2], ".".join(parts[3:])
        if part == "mixer":
            return "attention"
        if part == "ffn":
            if param.startswith("experts"):
                return "routed_experts"
            if param.startswith("shared"):
                return "shared_experts"
            if param.startswith("router"):
                return "router"
            if param.startswith("latent"):
                return "latent_projections"
            return "dense_ffn"
        if part == "norm":
            return "norms"
        if part == "residual":
            return "attn_res" if ".query" in role or ".norm" in role else "residual"
        return "other"
    return {"embed": "embedding", "pos_embed": "embedding", "head": "lm_head", "final_norm": "norms",
            "embed_norm": "norms", "output_residual": "attn_res"}.get(parts[0], "other")


def count_params(card: Card, table: TensorTable) -> dict:
    entries = {e.name: e for e in table.all_entries()}
    by: dict[str, int] = {}
    stored_by: dict[str, int] = {}          # stored bytes per component (memory's sharding rules read these)
    stored_layer: dict[int, dict] = {}      # stored bytes per decoder layer and component (pipeline stages)
    total = active = meta = 0
    for role, name in card.tensors.items():
        e = entries.get(name)
        if e is None:
            continue
        if e.role.metadata:
            meta += e.stored_elements
        comp = component_of_role(role)
        share = 1.0
        if comp == "routed_experts":
            layer = card.layers[int(role.split(".")[1])].ffn
            if layer.top_k and layer.num_experts:
                share = min(1.0, layer.top_k / layer.num_experts)
        by[comp] = by.get(comp, 0) + e.params
        stored_by[comp] = stored_by.get(comp, 0) + e.info.nbytes * e.count
        if role.startswith("layers."):
            li = int(role.split(".")[1])
            row = stored_layer.setdefault(li, {})
            row[comp] = row.get(comp, 0) + e.info.nbytes * e.count
        total += e.params
        active += int(round(e.params * share))
    for name in card.unexplained:
        e = entries.get(name)
        if e is not None:
            by["other"] = by.get("other", 0) + e.params
            stored_by["other"] = stored_by.get("other", 0) + e.info.nbytes * e.count
            total += e.params
            active += e.params
            meta += e.stored_elements if e.role.metadata else 0
    for kind in ("mtp", "vision"):
        for name in card.set_aside.get(kind, []):
            e = entries.get(name)
            if e is not None:
                by[kind] = by.get(kind, 0) + e.params
                stored_by[kind] = stored_by.get(kind, 0) + e.info.nbytes * e.count
                total += e.params
                meta += e.stored_elements if e.role.metadata else 0
    return {"total": total, "active": active, "quant_metadata_elements": meta,
            "by_component": dict(sorted(by.items(), key=lambda kv: -kv[1])),
            "stored_bytes_by_component": dict(sorted(stored_by.items(), key=lambda kv: -kv[1])),
            "stored_bytes_by_layer": [stored_layer.get(i, {}) for i in range(len(card.layers))]}
