"""Softmax attention with grouped K/V heads: GQA, and its two ends MHA (one K/V head per query head) and
MQA (one K/V head for all). One module, archprobe.nn.attention.Attention, runs all three."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from archprobe.kinds.formulas import kv_cache
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "q_norm": "q_norm",
         "k_norm": "k_norm", "sinks": "sinks", "g": "g_proj", "head_gate": "head_gate_proj",
         "sub_norm": "sub_norm",
         **{f"lambda_{x}": f"lambda_{x}" for x in ("q1", "k1", "q2", "k2")}}
# roles stored as a bare Parameter (no `.weight` leaf)
BARE_ROLES = ("sinks", "lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")


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
    from archprobe.validate.plan import Unsupported, card_rope, head_gate_kind, need_field

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


def _value_heads_apart(readers, Wo, nh):
    """(q, k, v) where the value heads differ in width from the q/k heads (MiMo-V2-Flash: 192 vs 128):
    q = nh dqk, k = kvh dqk, v = kvh dv and o reads nh dv, so Wq / Wk = Wo / Wv with Wv != Wk. Three widths:
    the one assignment that fits (the widest of q and k being q). Two equal widths wider than the third, the
    third being o's own width: q and k of as many heads (names order them) and the values (kvh = nh); the usual
    layout has its equal pair (k, v) no wider than q. None otherwise."""
    from archprobe.structure.names import rank

    if not nh or len(readers) != 3 or Wo % nh:
        return None
    widths = {w for _, w in readers}
    if len(widths) == 3:
        fits = [(q, k, v) for q, wq in readers for k, wk in readers for v, wv in readers
                if len({id(q), id(k), id(v)}) == 3 and wq > wk and wq * wv == wk * Wo and wv != wk
                and wq % nh == 0 and wk % (wq // nh) == 0]
        return fits[0] if len(fits) == 1 else None
    pair_w = max(widths)
    pair = [m for m, w in readers if w == pair_w]
    odd = [(m, w) for m, w in readers if w != pair_w]
    if len(pair) != 2 or len(odd) != 1 or odd[0][1] != Wo or pair_w % nh:
        return None
    q, k = rank(pair, "q", "k")
    return q, k, odd[0][0]


def detect(mods, H, cfg):
    """Softmax attention: one writer [H, Wo] and readers [Wq | Wk | Wv, H] (or one fused reader; Conv1D
    checkpoints store them transposed, biases or the config say which); Wk < Wq means fewer K/V heads, so the
    kind is gqa, mha or mqa by the head counts. Per-head [hd] vectors are q/k norms (four: differential
    attention's lambdas), an [nh] vector the attention sinks. Tried last: the most general reading of
    matrices, and no depthwise convs (a layer with them is the conv kinds'). Names break ties only between
    same-shaped tensors (q vs k vs v)."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import bind_roles, depthwise_convs, gates_and_indexer
    from archprobe.structure.names import rank, says
    from archprobe.structure.widths import bias_says_transposed, split_io

    if depthwise_convs(mods):
        return None
    mats = [m for m in mods if len(m.shape) == 2 and not says(m.path, "indexer") and m.shape != (1, H)]
    if not mats:
        return None
    hint = bias_says_transposed(mats)
    if hint is None:
        hint = cfg.default("conv1d_transposed")
    for transposed in ([hint] if hint is not None else [False, True]):
        readers, writers = split_io(mats, H, transposed)
        if len(writers) == 1 and readers:
            break
    else:
        return None
    o, Wo = writers[0]
    nh = cfg.first_int("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads",
                       "decoder_attention_heads")
    hd = cfg.first_int("head_dim", "kv_channels", "attention_head_size")
    kvh = cfg.first_int("num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num",
                        "n_head_kv", "num_kv")
    pool = list(mods)
    vecs = [m for m in pool if len(m.shape) == 1]
    mixer = Mixer("gqa")
    if transposed:
        mixer.layout["transposed"] = True
    b = Bound(mixer)
    roles = [("o", o)]
    if not nh and hd:
        nh = Wo // hd
    per_head = [v for v in vecs if hd and v.shape == (hd,)] or [v for v in vecs if nh and v.shape[0] * nh == Wo]
    if not hd and nh and Wo % nh == 0:
        hd = Wo // nh
    if not nh and per_head:
        hd = per_head[0].shape[0]
        nh = Wo // hd if Wo % hd == 0 else None
    if len(readers) == 1:
        qkv, W = readers[0]
        if nh and hd and (not kvh or (nh + 2 * kvh) * hd != W) and W > nh * hd and (W - nh * hd) % (2 * hd) == 0:
            kvh = (W - nh * hd) // (2 * hd)    # the shape over the config (Falcon's multi_query keeps num_kv_heads)
        if not (nh and hd and kvh and (nh + 2 * kvh) * hd == W) and W == 3 * Wo:
            kvh = nh
        mixer.fused_qkv = True
        if nh and hd and kvh:
            mixer.layout["qkv_split"] = [nh * hd, kvh * hd, kvh * hd]
            layout = cfg.default("qkv_layout") or (cfg.default("qkv_layout_mha") if kvh == nh else None)
            if not layout and kvh == nh and cfg.get("use_parallel_residual") is not None:
                layout = "per_head"   # GPT-NeoX's own key: its lineage fuses qkv per head (a tie-break, no row)
            if layout:
                mixer.layout["qkv_interleaved"] = layout
        roles.append(("qkv", qkv))
        mixer.evidence = [ev(qkv, f"fused QKV projection [{W}, H]")]
        Wq = Wo
    else:
        by_width: dict[int, list] = {}
        for m, w in readers:
            by_width.setdefault(w, []).append(m)
        kv_w = next((w for w, ms in sorted(by_width.items()) if len(ms) == 2 and w != Wo and w != 2 * Wo), None)
        qkv_v = _value_heads_apart(readers, Wo, nh)
        if qkv_v is not None:         # value heads of another width than q/k heads (MiMo-V2-Flash)
            q, k, v = qkv_v
            hd = (q.shape[1] if transposed else q.shape[0]) // nh
            mixer.v_head_dim = Wo // nh
            kv_w = k.shape[1] if transposed else k.shape[0]
            rest = [m for m, w in readers if m not in qkv_v]
        elif kv_w is not None:
            k, v = rank(by_width[kv_w], "k", "v")
            rest = [m for m, w in readers if m not in (k, v)]
            q = next(iter(rank(rest, "q")), None)
            rest = [m for m in rest if m is not q]
        else:
            same = rank([m for m, w in readers if w == Wo], "q", "k", "v")
            rest = [m for m, w in readers if w != Wo]
            q = next(iter(rank([m for m, w in readers if w == 2 * Wo], "q")), None)
            if q is not None:
                rest.remove(q)
                k, v = (same + [None, None])[:2]
                rest += same[2:]
            else:
                q, k, v = (same + [None] * 3)[:3]
                rest += same[3:]
            kv_w = k.shape[0] if k is not None and not transposed else (k.shape[1] if k is not None else None)
        Wq = (q.shape[1] if transposed else q.shape[0]) if q is not None else Wo
        if kv_w and hd and not cfg.first_int("num_key_value_heads", "n_kv_heads", "num_kv_heads",
                                              "multi_query_group_num", "n_head_kv"):
            kvh = kv_w // hd if kv_w % hd == 0 else None
        elif kv_w and hd:
            kvh = kv_w // hd if kv_w % hd == 0 else kvh
        roles += [("q", q), ("k", k), ("v", v)]
        if Wq == 2 * Wo and qkv_v is None:   # q twice o's input: a gate in q, unless v's heads explain o
            mixer.output_gate = "fused_in_q_proj"
        gate = next((m for m in rest if (m.shape[0] if not transposed else m.shape[1]) == Wo), None)
        if gate is not None:
            roles.append(("g", gate))
            mixer.output_gate = "sigmoid_g_proj"
        if q is not None and k is not None:
            mixer.evidence = [ev(q, f"query projection {list(q.shape)}"),
                              ev(k, f"key projection {list(k.shape)}: {kvh} KV heads of {hd}")]
    mixer.num_heads, mixer.head_dim, mixer.num_kv_heads = nh, hd, kvh
    if kvh and nh:
        mixer.kind = "mqa" if kvh == 1 and nh > 1 else "mha" if kvh == nh else "gqa"
    mixer.bias = {r: (m.bias is not None) for r, m in roles if m is not None}
    # q/k norms: per head [hd] or full [nh*hd] / [kvh*hd]
    norms = [v for v in vecs if v.shape[0] in {x for x in (hd, (nh or 0) * (hd or 0), (kvh or 0) * (hd or 0)) if x}]
    if len(norms) == 4 and all(v.shape == (hd,) for v in norms) and all(v.bias is None for v in norms):
        # differential attention: lambda_q1, lambda_k1, lambda_q2, lambda_k2 re-weight two softmax maps
        # (the pair a vector belongs to changes lambda's sign, so only its name can say: `q1`, `k2`, ...; a name
        # that does not say keeps its leaf as role, which validate refuses rather than guess)
        for v in sorted(norms, key=lambda v: v.path):
            tag = re.search(r"([qk])_?([12])$", v.leaf)
            roles.append((f"lambda_{tag.group(1)}{tag.group(2)}" if tag else f"lambda.{v.leaf}", v))
        mixer.layout["differential"] = True
        norms = []
    if len(norms) >= 2:
        qn, kn = rank(norms, "q_norm", "k_norm")[:2]
        if nh and kvh and nh != kvh and qn.shape[0] == (kvh or 0) * (hd or 0) and kn.shape[0] == nh * hd:
            qn, kn = kn, qn
        if qn.shape[0] != hd and nh and kvh and hd and (qn.shape[0], kn.shape[0]) != (nh * hd, kvh * hd):
            norms = []    # two [H] vectors that do not fit q and k (DBRX keeps its layer norms in here)
        else:
            roles += [("q_norm", qn), ("k_norm", kn)]
            mixer.qk_norm = "per_head" if qn.shape[0] == hd else "full"
    if len(norms) < 2 and nh and hd:        # per-head norm weights stored [heads, hd] (Cohere's qk LayerNorm)
        grid = [m for m in pool if len(m.shape) == 2 and m.shape[1] == hd and m.shape[0] in (nh, kvh)
                and m not in [r[1] for r in roles]]
        if len(grid) >= 2:
            qn = next((m for m in grid if m.shape[0] == nh), grid[0])
            kn = next((m for m in grid if m is not qn), None)
            roles += [("q_norm", qn), ("k_norm", kn)]
            mixer.qk_norm = "per_head_weights"
    sinks = next((v for v in vecs if nh and v.shape == (nh,) and v not in [r[1] for r in roles]), None)
    if sinks is not None:
        roles.append(("sinks", sinks))
        mixer.sinks = True
    v_mod = next((m for r, m in roles if r == "v"), None)
    if v_mod is not None and kvh:       # a dynamic mask from the values: dt [kv heads, Wv] and A [kv heads] (Doge)
        vw = v_mod.shape[1] if transposed else v_mod.shape[0]
        dt = next((m for m in pool if len(m.shape) == 2 and m.shape == (kvh, vw)), None)
        a_vec = next((m for m in pool if m.shape == (kvh,)), None)
        if dt is not None and a_vec is not None:
            roles += [("mask_dt", dt), ("mask_A", a_vec)]
            mixer.layout["dynamic_mask"] = True
    bind_roles(b, pool, roles)
    gates_and_indexer(b, pool, H, nh, o)
    mixer.evidence.append(ev(o, f"output projection [H, {Wo}]"))
    mixer.confidence = 0.9 if nh and hd and kvh else 0.6
    b.leftover = pool
    return b


_COMMON = dict(attrs=attrs, required=("num_heads", "num_kv_heads", "head_dim"), cache=cache, act_width=act_width,
               eager_score_copies=2, nn_kind="gqa", args=Args, fields=fields, build=build, roles=ROLES,
              bare_roles=BARE_ROLES,
               detect=detect, detect_order=140)
KINDS = [
    Kind("gqa", "mixer", "GQA", "#e0a35a", "attention.gqa", nn_variants=("swa", "gqa_headgate", "gqa_indexer"),
         **_COMMON),
    Kind("mha", "mixer", "MHA", "#c96f2d", "attention.mha", **_COMMON),
    Kind("mqa", "mixer", "MQA", "#e8b77d", "attention.mqa", **_COMMON),
]
