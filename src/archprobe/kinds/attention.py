"""Softmax attention with grouped K/V heads: GQA, and its two ends MHA (one K/V head per query head) and
MQA (one K/V head for all). One module, archprobe.nn.attention.Attention, runs all three."""

from __future__ import annotations

import math
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Args:
    """archprobe.nn.attention.Attention's arguments; the defaults are the presets' toy sizes."""
    num_heads: int = 4
    num_kv_heads: int = 4
    head_dim: int = 16
    rope_theta: float | None = 10000.0
    rope: object = None                  # a Rope (scaled / partial / interleaved); None: rope_theta, default
    partial_rotary_factor: float = 1.0   # with `rope` None: the rotated share of each head
    sliding_window: int | None = None    # read on `swa` layers only
    qk_norm: bool | str = False          # True / "head": per head; "full"; "per_head_weights"; "weightless"
    qk_norm_style: str | None = None     # the q/k norms' kind when it differs from the layer norms' (StableLM 2)
    qk_norm_after_rope: bool = False
    v_head_dim: int | None = None        # value heads of another width than q/k heads (MiMo-V2-Flash)
    value_scale: float | None = None     # values scaled before attention (MiMo-V2-Flash attention_value_scale)
    output_gate: bool = False            # o *= sigmoid(g_proj x)
    gate_in_q: bool = False              # Qwen3-Next: q_proj emits [q | gate] per head
    qkv_bias: bool = False
    o_bias: bool = False
    scale: float | None = None           # softmax scale; None: head_dim ** -0.5
    softcap: float | None = None
    clip_qkv: float | None = None        # OLMo, DBRX: q, k, v clamped to [-c, c]
    sub_norm: bool = False               # BitNet: a norm on the heads' output before o_proj
    sinks: bool = False
    head_gate_act: str | None = None     # o *= act(head_gate_proj x) per head: sigmoid (LFM3) / softplus (Laguna)
    differential: float | None = None    # differential attention: this layer's lambda_init (DiffLlama)
    alibi: bool = False
    alibi_scaled: bool = False           # Falcon: ALiBi added before the softmax scale
    query_scale: dict | None = None      # position-dependent query multiplier (Attention's query_scale)
    chunk: int | None = None             # chunked attention (Llama 4's chunked_attention layers)
    # `gqa_headgate`: a dynamic head gate; `gqa_indexer`: top-k keys (archprobe.nn.dynamic)
    head_gate_mode: str = "hard"
    head_gate_keep: int | None = None
    index_n_heads: int = 2
    index_head_dim: int = 16
    index_topk: int = 8


def fields(card, i, has, out):
    """Runs as `swa` where the card gives the layer a window."""
    from archprobe.validate.build import Unsupported, card_rope, head_gate_kind, need_field

    layer = card.layers[i]
    m = layer.mixer
    p = f"layers.{i}"
    heads = need_field(m.num_heads, f"{p}.mixer.num_heads")
    out.update(num_heads=heads, num_kv_heads=need_field(m.num_kv_heads, f"{p}.mixer.num_kv_heads"),
               head_dim=need_field(m.head_dim, f"{p}.mixer.head_dim"))
    bias = m.bias or {}
    qkv_b = has("mixer.q.bias") or has("mixer.qkv.bias") or bool(bias.get("q"))
    out.update(qkv_bias=qkv_b, o_bias=has("mixer.o.bias") or bool(bias.get("o")))
    if qkv_b and not (has("mixer.k.bias") or has("mixer.qkv.bias")):
        raise Unsupported(f"{p}.mixer: a q bias without k/v biases")
    out["sliding_window"] = m.sliding_window
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
    out["softcap"] = m.logit_soft_cap
    out["clip_qkv"] = getattr(m, "clip_qkv", None)
    out["sub_norm"] = has("mixer.sub_norm")
    out["sinks"] = bool(m.sinks) or has("mixer.sinks")
    out["head_gate_act"] = head_gate_kind(m, p) if has("mixer.head_gate") else None
    if (m.layout or {}).get("differential"):   # lambda_init per layer depth (arXiv:2410.05258, DiffLlama)
        out["differential"] = 0.8 - 0.6 * math.exp(-0.3 * i)
    out["alibi"] = bool(m.alibi)
    out["alibi_scaled"] = bool(m.alibi) and bool(getattr(m, "alibi_scaled", None))
    gate = m.output_gate
    if gate not in (None, "sigmoid_g_proj", "fused_in_q_proj"):
        raise Unsupported(f"{p}.mixer.output_gate {gate!r} on softmax attention")
    out["output_gate"] = gate == "sigmoid_g_proj"
    out["gate_in_q"] = gate == "fused_in_q_proj"
    out["scale"] = getattr(m, "scale", None)
    if m.v_head_dim and m.v_head_dim != out["head_dim"]:
        out["v_head_dim"] = m.v_head_dim
    out["value_scale"] = (m.layout or {}).get("value_scale")
    out["qk_norm_after_rope"] = bool(getattr(m, "qk_norm_after_rope", None))
    out["query_scale"] = getattr(m, "query_scale", None)
    no_rope = m.rope is False or m.alibi or card.embed.pos_kind in ("learned", "alibi", "none", "sinusoidal")
    out["rope"] = None if no_rope else card_rope(card, out["head_dim"], layer=i)
    out["chunk"] = m.chunk_size
    out["rope_theta"] = None if out["rope"] is None else out["rope"].theta
    return "swa" if m.sliding_window else "gqa"


def build(a: Args, kind, model):
    """`gqa`, `swa` (a window), `gqa_headgate` (a dynamic head gate), `gqa_indexer` (top-k keys)."""
    from archprobe.nn.attention import Attention
    from archprobe.nn.dynamic import HeadGate, Indexer

    H, heads, d = model.hidden_size, a.num_heads, a.head_dim
    gate = HeadGate(H, heads, a.head_gate_mode, a.head_gate_keep) if kind == "gqa_headgate" else None
    idx = Indexer(H, a.index_n_heads, a.index_head_dim, a.index_topk) if kind == "gqa_indexer" else None
    window = a.sliding_window if kind == "swa" else None
    return Attention(H, heads, a.num_kv_heads, d, rope_theta=a.rope_theta, window=window,
                     qk_norm=a.qk_norm, output_gate=a.output_gate, head_gate=gate, indexer=idx,
                     norm_eps=model.norm_eps, gate_in_q=a.gate_in_q,
                     rotary_dim=int(d * a.partial_rotary_factor), norm_style=model.norm_style, rope=a.rope,
                     qkv_bias=a.qkv_bias, o_bias=a.o_bias, scale=a.scale, softcap=a.softcap, sinks=a.sinks,
                     alibi=a.alibi, qk_norm_after_rope=a.qk_norm_after_rope, differential=a.differential,
                     query_scale=a.query_scale, clip_qkv=a.clip_qkv, sub_norm=a.sub_norm,
                     alibi_scaled=a.alibi_scaled, chunk=a.chunk, head_gate_act=a.head_gate_act,
                     qk_norm_style=a.qk_norm_style, v_head_dim=a.v_head_dim, value_scale=a.value_scale)


_COMMON = dict(attrs=attrs, required=("num_heads", "num_kv_heads", "head_dim"), cache=cache, act_width=act_width,
               eager_score_copies=2, nn_kind="gqa", args=Args, fields=fields, build=build, roles=ROLES)
KINDS = [
    Kind("gqa", "mixer", "GQA", "#e0a35a", "attention.gqa", nn_variants=("swa", "gqa_headgate", "gqa_indexer"),
         **_COMMON),
    Kind("mha", "mixer", "MHA", "#c96f2d", "attention.mha", **_COMMON),
    Kind("mqa", "mixer", "MQA", "#e8b77d", "attention.mqa", **_COMMON),
]
