"""Softmax attention with grouped K/V heads: GQA, and its two ends MHA (one K/V head per query head) and
MQA (one K/V head for all). One module, archprobe.nn.attention.Attention, runs all three."""

from __future__ import annotations

import math

from archprobe.kinds.formulas import kv_cache
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "q_norm": "q_norm",
         "k_norm": "k_norm", "sinks": "sinks", "g": "g_proj", "head_gate": "head_gate_proj",
         "sub_norm": "sub_norm",
         **{f"lambda_{x}": f"lambda_{x}" for x in ("q1", "k1", "q2", "k2")}}


def attrs(m, H):
    return {"num_heads": m.num_heads, "num_kv_heads": m.num_kv_heads, "head_dim": m.head_dim}


def cache(m, c: CacheContext):
    """Keys + values per token; a sliding window bounds the tokens held."""
    window = m.sliding_window
    t = min(c.T, window) if window else c.T
    label = "sliding_window" if window else m.kind
    pages = math.ceil(t / c.pad) + (1 if window and c.swa_extra_block and c.T > window else 0)
    return label, kv_cache(pages * c.pad, m.num_kv_heads, m.head_dim, c.kv_b)


def act_width(m):
    return 2 * (m.num_heads or 0) * (m.head_dim or 0) + 2 * (m.num_kv_heads or 0) * (m.head_dim or 0)


def fields(card, i, has, out):
    from archprobe.validate.plan import Unsupported, card_rope, head_gate_kind, need_field

    layer = card.layers[i]
    m = layer.mixer
    p = f"layers.{i}"
    heads = need_field(m.num_heads, f"{p}.mixer.num_heads")
    out.update(num_attention_heads=heads, num_key_value_heads=need_field(m.num_kv_heads, f"{p}.mixer.num_kv_heads"),
               head_dim=need_field(m.head_dim, f"{p}.mixer.head_dim"))
    bias = m.bias or {}
    qkv_b = has("mixer.q.bias") or has("mixer.qkv.bias") or bool(bias.get("q"))
    out.update(attention_bias=qkv_b, attention_out_bias=has("mixer.o.bias") or bool(bias.get("o")))
    if qkv_b and not (has("mixer.k.bias") or has("mixer.qkv.bias")):
        raise Unsupported(f"{p}.mixer: a q bias without k/v biases")
    out["sliding_window"] = m.sliding_window
    out["mixer"] = "swa" if m.sliding_window else "gqa"
    qk = {"per_head": "head", "full": "full", "per_head_weights": "per_head_weights", "weightless": "weightless",
          None: False}
    if m.qk_norm not in qk:
        raise Unsupported(f"{p}.mixer.qk_norm {m.qk_norm!r}")
    out["qk_norm"] = qk[m.qk_norm]
    q_norm_name = card.tensors.get(f"{p}.mixer.q_norm", "")
    if m.qk_norm and "*" in q_norm_name:      # one stored norm per head: gains [heads, head_dim]
        out["qk_norm"] = "per_head_weights"
    if m.qk_norm:   # q/k norms of the layer norms' kind, biased only when the checkpoint stores biases
        kind = next((n.kind for n in layer.norm.values() if n.kind), None) or card.final_norm.kind
        if kind == "layer" and has("mixer.q_norm"):
            out["qk_norm_style"] = "layer" if has("mixer.q_norm.bias") else "layer_nobias"
    out["attn_softcap"] = m.logit_soft_cap
    out["clip_qkv"] = getattr(m, "clip_qkv", None)
    out["attn_sub_norm"] = has("mixer.sub_norm")
    out["attn_sinks"] = bool(m.sinks) or has("mixer.sinks")
    out["attn_head_gate"] = head_gate_kind(m, p) if has("mixer.head_gate") else None
    if (m.layout or {}).get("differential"):   # lambda_init per layer depth (arXiv:2410.05258, DiffLlama)
        out["attn_differential"] = 0.8 - 0.6 * math.exp(-0.3 * i)
    out["alibi"] = bool(m.alibi)
    out["alibi_scaled"] = bool(m.alibi) and bool(getattr(m, "alibi_scaled", None))
    gate = m.output_gate
    if gate not in (None, "sigmoid_g_proj", "fused_in_q_proj"):
        raise Unsupported(f"{p}.mixer.output_gate {gate!r} on softmax attention")
    out["attn_output_gate"] = gate == "sigmoid_g_proj"
    out["attn_gate_in_q"] = gate == "fused_in_q_proj"
    out["attn_scale"] = getattr(m, "scale", None)
    if m.v_head_dim and m.v_head_dim != out["head_dim"]:
        out["attn_v_head_dim"] = m.v_head_dim
    out["attn_value_scale"] = (m.layout or {}).get("value_scale")
    out["qk_norm_after_rope"] = bool(getattr(m, "qk_norm_after_rope", None))
    out["attn_query_scale"] = getattr(m, "query_scale", None)
    no_rope = m.rope is False or m.alibi or card.embed.pos_kind in ("learned", "alibi", "none", "sinusoidal")
    out["rope"] = None if no_rope else card_rope(card, out["head_dim"], layer=i)
    out["attn_chunk_size"] = m.chunk_size
    out["rope_theta"] = None if out["rope"] is None else out["rope"].theta


def build(cfg, kind):
    """`gqa`, `swa` (a window), `gqa_headgate` (a dynamic head gate), `gqa_indexer` (top-k keys)."""
    from archprobe.nn.attention import Attention
    from archprobe.nn.dynamic import HeadGate, Indexer

    H = cfg.hidden_size
    heads, kvh, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    gate = HeadGate(H, heads, cfg.head_gate_mode, cfg.head_gate_keep) if kind == "gqa_headgate" else None
    idx = Indexer(H, cfg.index_n_heads, cfg.index_head_dim, cfg.index_topk) if kind == "gqa_indexer" else None
    window = cfg.sliding_window if kind == "swa" else None
    return Attention(H, heads, kvh, d, rope_theta=cfg.rope_theta, window=window,
                     qk_norm=cfg.qk_norm, output_gate=cfg.attn_output_gate, head_gate=gate, indexer=idx,
                     norm_eps=cfg.rms_norm_eps, gate_in_q=cfg.attn_gate_in_q,
                     rotary_dim=int(d * cfg.partial_rotary_factor), norm_style=cfg.norm_style, rope=cfg.rope,
                     qkv_bias=cfg.attention_bias, o_bias=cfg.attention_out_bias, scale=cfg.attn_scale,
                     softcap=cfg.attn_softcap, sinks=cfg.attn_sinks, alibi=cfg.alibi,
                     qk_norm_after_rope=cfg.qk_norm_after_rope, differential=cfg.attn_differential,
                     query_scale=cfg.attn_query_scale, clip_qkv=cfg.clip_qkv,
                     sub_norm=cfg.attn_sub_norm, alibi_scaled=cfg.alibi_scaled,
                     chunk=cfg.attn_chunk_size, head_gate_act=cfg.attn_head_gate,
                     qk_norm_style=cfg.qk_norm_style, v_head_dim=cfg.attn_v_head_dim,
                     value_scale=cfg.attn_value_scale)


_COMMON = dict(attrs=attrs, required=("num_heads", "num_kv_heads", "head_dim"), cache=cache, act_width=act_width,
               eager_score_copies=2, nn_kind="gqa", fields=fields, build=build, roles=ROLES)
KINDS = [
    Kind("gqa", "mixer", "GQA", "#e0a35a", "attention.gqa", nn_variants=("swa", "gqa_headgate", "gqa_indexer"),
         **_COMMON),
    Kind("mha", "mixer", "MHA", "#c96f2d", "attention.mha", **_COMMON),
    Kind("mqa", "mixer", "MQA", "#e8b77d", "attention.mqa", **_COMMON),
]
