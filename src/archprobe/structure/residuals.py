"""How a layer's sublayers meet the residual stream, from per-layer [1, H] / [H] parameters.

Attention Residuals: two (proj [1, H], norm [H]) pairs per layer (before attention and before the
FFN) plus one model-level pair before the final norm. Full and Block AttnRes look identical in the
weights; only `attn_res_block_size` in the config tells them apart. Gated residuals: scalar or
[H] gates/scales per branch, with no pseudo-query pairs. DenseFormer depth weights: a per-layer
vector whose length grows with depth.
"""

from __future__ import annotations

from archprobe.structure.config import ModelConfig
from archprobe.structure.evidence import cfg_ev, ev
from archprobe.structure.tensors import Entry, TensorTable

GATE_WORDS = ("gate", "scale", "alpha", "gamma", "lambda")


def pseudo_queries(loose: dict[str, Entry], H: int) -> list[Entry]:
    """[1, H] tensors sitting directly in a layer (not inside attention or FFN)."""
    return [e for e in loose.values() if e.shape == (1, H)]


def detect_attnres(table: TensorTable, loose_by_layer: dict[int, dict[str, Entry]], H: int,
                   cfg: ModelConfig) -> dict | None:
    per_layer = {i: pseudo_queries(g, H) for i, g in loose_by_layer.items()}
    layers = [i for i, qs in per_layer.items() if len(qs) >= 2]
    model_q = [e for e in table.model.values() if e.shape == (1, H)]
    if not layers or len(layers) < max(1, len(table.layers) // 2):
        return None
    block = cfg.get("attn_res_block_size")
    variant = "block" if isinstance(block, int) and block > 0 else "unknown"
    first = per_layer[layers[0]]
    evidence = [ev(first[0], "pseudo-query [1, H] before the attention sublayer"),
                ev(first[1], "pseudo-query [1, H] before the FFN sublayer")]
    norms = [e for e in loose_by_layer[layers[0]].values() if e.shape == (H,) and "res" in e.suffix]
    evidence += [ev(n, "RMS-norm weight paired with a pseudo-query") for n in norms[:2]]
    if model_q:
        evidence.append(ev(model_q[0], "model-level pseudo-query before the final norm"))
    if variant == "block":
        evidence.append(cfg_ev("attn_res_block_size", block, "Block AttnRes: softmax over block sums"))
    confidence = 0.95 if model_q else 0.75
    return {"id": "residual.attnres", "layers": layers, "confidence": confidence, "evidence": evidence,
            "attrs": {"variant": variant, "block_size": block if variant == "block" else None,
                      "sites_per_layer": 2, "output_site": bool(model_q)}}


def detect_gated(loose_by_layer: dict[int, dict[str, Entry]], H: int) -> dict | None:
    hits = {}
    for i, g in loose_by_layer.items():
        for r, e in g.items():
            leaf = r.lower()
            if "norm" in leaf or e.shape == (1, H):
                continue
            if len(e.shape) <= 1 and (e.shape in ((), (1,), (H,))) and any(w in leaf for w in GATE_WORDS):
                hits.setdefault(i, e)
    if not hits:
        return None
    first = next(iter(hits.values()))
    return {"id": "residual.gated", "layers": sorted(hits), "confidence": 0.7,
            "evidence": [ev(first, "per-layer learnable gate/scale on a residual branch")], "attrs": {}}


def detect_depth_weights(loose_by_layer: dict[int, dict[str, Entry]], table: TensorTable) -> dict | None:
    """A 1-D per-layer tensor whose length is i+1 or i+2 at layer i (DenseFormer DWA)."""
    by_suffix: dict[str, dict[int, Entry]] = {}
    for i, g in loose_by_layer.items():
        for r, e in g.items():
            if len(e.shape) == 1:
                by_suffix.setdefault(r, {})[i] = e
    for rows in by_suffix.values():
        if len(rows) >= 3:
            offsets = {e.shape[0] - i for i, e in rows.items()}
            if len(offsets) == 1 and offsets.pop() in (1, 2):
                first = rows[min(rows)]
                return {"id": "residual.depth_weights", "layers": sorted(rows), "confidence": 0.85,
                        "evidence": [ev(first, "static weights over earlier layers; length grows with depth")],
                        "attrs": {}}
    return None
