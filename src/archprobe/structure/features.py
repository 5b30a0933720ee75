"""The card read out as inspect's feature list (spec/contracts.md): one row per id, the layers that have
it, the card's evidence, and the attrs the contract names. Nothing here looks at tensors or names: a
feature is a view of card fields, so every command that reads the card agrees with inspect.
"""

from __future__ import annotations

from archprobe.kinds import MIXERS
from archprobe.structure.card import Card

MIXER_IDS = {name: k.feature for name, k in MIXERS.items()}   # kinds/: one registry of kinds
ATTENTION = ("gqa", "mha", "mqa", "mla", "lowrank_kv")


def _cfg_ev(key: str, value, why: str) -> dict:
    return {"tensor": f"config:{key}", "shape": None, "dtype": None, "why": f"{key} = {value!r}: {why}"}


class FeatureSet:
    def __init__(self) -> None:
        self.by_id: dict[str, dict] = {}

    def add(self, fid: str, layer: int | None, attrs: dict, evidence: list[dict], confidence: float | None) -> dict:
        f = self.by_id.get(fid)
        conf = 0.9 if confidence is None else confidence
        if f is None:
            f = self.by_id[fid] = {"id": fid, "layers": [], "confidence": conf,
                                   "evidence": list(evidence) or [{"tensor": "card", "shape": None, "dtype": None,
                                                                   "why": "from the card"}],
                                   "attrs": dict(attrs)}
        else:
            f["confidence"] = min(f["confidence"], conf)
        if layer is not None:
            f["layers"].append(layer)
        return f

    def ordered(self) -> list[dict]:
        return sorted(self.by_id.values(), key=lambda f: f["id"])


def _mixer_attrs(m, H: int | None) -> dict:
    k = MIXERS.get(m.kind)
    return k.attrs(m, H) if k and k.attrs else {}


def features(card: Card, table=None) -> list[dict]:
    fs = FeatureSet()
    H = card.hidden_size
    for i, layer in enumerate(card.layers):
        m, f = layer.mixer, layer.ffn
        fid = MIXER_IDS.get(m.kind)
        if fid:
            fs.add(fid, i, _mixer_attrs(m, H), m.evidence, m.confidence)
        pm = layer.parallel_mixer
        if pm is not None and MIXER_IDS.get(pm.kind):
            fs.add(MIXER_IDS[pm.kind], i, _mixer_attrs(pm, H), pm.evidence, pm.confidence)
            fs.add("mixer.parallel", i, {"kinds": [m.kind, pm.kind]}, pm.evidence[:1], pm.confidence)
        if m.kind == "mla":
            fs.add("attention.kv_compression", i,
                   {"ratio": round(m.cache_width_per_token / H, 4) if H and m.cache_width_per_token else None},
                   m.evidence[:1], m.confidence)
        if m.output_gate in ("sigmoid_g_proj", "fused_in_q_proj") and m.kind in ATTENTION:
            fs.add("attention.output_gate", i, {"form": m.output_gate}, m.evidence[-1:], m.confidence)
        if m.layout.get("head_gate"):
            fs.add("attention.head_gate", i, {"gate_shape": m.layout["head_gate"]}, m.evidence[:1], 0.8)
        if m.indexer:
            fs.add("attention.sparse_indexer", i, dict(m.indexer), m.evidence[:1], 0.9)
        if m.sinks:
            fs.add("attention.sinks", i, {}, m.evidence[:1], 0.9)
        if f.kind in ("moe", "latent_moe"):
            fs.add("moe.routed", i, {"num_experts": f.num_experts, "top_k": f.top_k, "expert_width": f.expert_width,
                                     "router": f.router.scoring,
                                     "router_source": card.origin(f"layers.{i}.ffn.router.scoring")},
                   f.evidence[:2], f.confidence)
            if f.router.selection_bias:
                fs.add("moe.router_bias", i, {}, [e for e in f.evidence if "selection" in e["why"]], 0.9)
            if f.shared is not None:
                fs.add("moe.shared_experts", i, {"count": f.shared.count, "width": f.shared.width,
                                                 **({"gated": True} if f.shared.gated else {})},
                       [e for e in f.evidence if "always-on" in e["why"]], 0.9)
            if f.kind == "latent_moe":
                fs.add("moe.latent", i, {"latent_size": f.latent_size, "routing_space": f.router.input or "unknown",
                                         "latent_norm": bool(f.latent_norm)},
                       [e for e in f.evidence if "latent" in e["why"]], 0.95)
    _model_features(fs, card)
    return fs.ordered()


def _layers_where(card: Card, pred) -> list[int]:
    return [i for i, layer in enumerate(card.layers) if pred(layer)]


def _model_features(fs: FeatureSet, card: Card) -> None:
    sw = _layers_where(card, lambda layer: layer.mixer.sliding_window)
    if sw:
        w = card.layers[sw[0]].mixer.sliding_window
        origin = card.origin(f"layers.{sw[0]}.mixer.sliding_window")
        key = origin.split(":", 1)[1] if origin.startswith("config:") else "sliding_window"
        why = f"{len(sw)} layers see a bounded window" + ("" if origin.startswith("config:") else f" ({origin})")
        f = fs.add("attention.sliding_window", None, {"window": w, "layers": sw, "origin": origin},
                   [_cfg_ev(key, w, why)], 0.8 if origin != "assumed" else 0.6)
        f["layers"] = sw
    nope = _layers_where(card, lambda layer: layer.mixer.rope is False)
    if nope:
        origin = card.origin(f"layers.{nope[0]}.mixer.rope")
        f = fs.add("attention.nope", None, {}, [_cfg_ev(origin.split(":", 1)[-1], False, "no rotary embedding")], 0.8)
        f["layers"] = nope
    acts = [(i, layer.ffn) for i, layer in enumerate(card.layers) if layer.ffn.activation]
    if acts:
        i, ffn = acts[0]
        gated = any(f.gated for _, f in acts)
        a = ffn.activation
        name = {"silu": "swiglu" if gated else "silu", "swish": "swiglu" if gated else "silu",
                "gelu": "geglu" if gated else "gelu", "gelu_pytorch_tanh": "geglu" if gated else "gelu",
                "relu2": "relu2", "situ": "situ"}.get(a, a)
        origin = card.origin(f"layers.{i}.ffn.activation").split(":", 1)[-1]
        fs.add("ffn.activation", None, {"name": name}, [_cfg_ev(origin, a, f"FFN activation "
                                                                        f"({'gated' if gated else 'plain'})")], 0.9)
    res = {}
    for i, layer in enumerate(card.layers):
        if layer.residual.kind != "identity":
            res.setdefault(layer.residual.kind, []).append(i)
    for kind, layers in res.items():
        if kind == "attnres":
            block = card.layers[layers[0]].residual.block_size
            out_site = "output_residual.query" in card.tensors
            first = f"layers.{layers[0]}.residual.pre_mixer.query"
            evidence = [{"tensor": card.tensors.get(first, first), "shape": [1, card.hidden_size], "dtype": None,
                         "why": "pseudo-query [1, H] before the attention sublayer"}]
            if block:
                evidence.append(_cfg_ev("attn_res_block_size", block, "Block AttnRes: softmax over block sums"))
            f = fs.add("residual.attnres", None, {"variant": "block" if block else "unknown", "block_size": block,
                                                  "sites_per_layer": 2, "output_site": out_site},
                       evidence, 0.95 if out_site else 0.75)
        else:
            f = fs.add(f"residual.{kind}", None, {}, [], 0.7)
        f["layers"] = layers
    for row in card.quantization:
        f = fs.add(f"quant.{row['scheme']}", None, {"tensors": row["tensors"], "bits": row["bits"],
                                                    "group_size": row["group_size"]}, [], 0.95)
    if card.set_aside.get("mtp"):
        fs.add("mtp", None, {"layers": []}, [{"tensor": card.set_aside["mtp"][0], "shape": None, "dtype": None,
                                              "why": "multi-token-prediction layer shipped beside the decoder"}], 0.9)
    if card.set_aside.get("vision"):
        fs.add("multimodal.vision", None, {}, [{"tensor": card.set_aside["vision"][0], "shape": None, "dtype": None,
                                                "why": "vision tower / projector tensors"}], 0.95)
