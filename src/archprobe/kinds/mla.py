"""Multi-head latent attention (DeepSeek-V2/V3, Kimi): one normalised latent c_kv plus a shared rope key
cached per token, up-projected to every head's keys and values; optionally a DSA top-k indexer."""

from __future__ import annotations

import math
from dataclasses import dataclass

from archprobe.kinds.formulas import mla_cache
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"q": "q_proj", "q_a": "q_a_proj", "q_a_norm": "q_a_layernorm", "q_b": "q_b_proj",
         "kv_a": "kv_a_proj_with_mqa", "kv_a_norm": "kv_a_layernorm", "kv_b": "kv_b_proj", "o": "o_proj",
         "g": "g_proj", "head_gate": "head_gate_proj",
         **{f"indexer.{n}": f"indexer.{n}" for n in ("wq_b", "wk", "k_norm", "weights_proj")}}


def attrs(m, H):
    return {"kv_lora_rank": m.kv_lora_rank, "q_lora_rank": m.q_lora_rank, "rope_dim": m.rope_dim,
            "cache_width_per_token": m.cache_width_per_token, "num_heads": m.num_heads}


def cache(m, c: CacheContext):
    """The latent (kv_lora_rank + rope_dim) per token, plus a DSA indexer's own key."""
    index_dim = (m.indexer or {}).get("index_dim") or 0
    return m.kind, mla_cache(math.ceil(c.T / c.pad) * c.pad, m.cache_width_per_token, c.kv_b, index_dim)


@dataclass(frozen=True)
class Args:
    """archprobe.nn.mla.MultiHeadLatentAttention's arguments (and its DSA indexer's); toy defaults."""
    num_heads: int = 4
    q_lora_rank: int | None = None
    kv_lora_rank: int = 16
    nope_dim: int = 16
    rope_dim: int = 8
    v_head_dim: int = 16
    use_nope: bool = True                # no rope at all (Kimi, K3)
    rope_theta: float | None = 10000.0
    rope: object = None                  # a Rope for the rope_dim channels; None: rope_theta, default
    rope_interleaved: bool = False
    output_gate: bool = False
    head_gate_act: str | None = None     # Ling 3: o *= sigmoid(head_gate_proj x) per head
    form: str = "naive"                  # naive | absorbed (ops/mla.py)
    scale: float | None = None           # softmax scale; None: (nope_dim + rope_dim) ** -0.5
    indexer: bool = False                # DSA: the indexer reads the q-LoRA latent (DeepSeek-V3.2, GLM-5)
    index_n_heads: int = 2
    index_head_dim: int = 16
    index_topk: int = 8
    index_rope_interleaved: bool = False


def fields(card, i, has, out):
    from archprobe.validate.plan import Unsupported, card_rope, head_gate_kind, need_field, yarn_mscale

    m = card.layers[i].mixer
    p = f"layers.{i}"
    heads = need_field(m.num_heads, f"{p}.mixer.num_heads")
    rope_dim = need_field(m.rope_dim, f"{p}.mixer.rope_dim")
    nope = need_field(m.nope_dim, f"{p}.mixer.nope_dim")
    out.update(num_heads=heads, q_lora_rank=m.q_lora_rank,
               kv_lora_rank=need_field(m.kv_lora_rank, f"{p}.mixer.kv_lora_rank"), nope_dim=nope,
               rope_dim=rope_dim, v_head_dim=need_field(m.v_head_dim, f"{p}.mixer.v_head_dim"),
               output_gate=m.output_gate is not None and has("mixer.g"),
               head_gate_act=head_gate_kind(m, p) if has("mixer.head_gate") else None)
    if m.rope is False:
        out.update(use_nope=True, rope=None)
    else:
        out.update(use_nope=False, rope=card_rope(card, None, rope_dim, layer=i))
    scale = getattr(m, "scale", None)
    out["scale"] = scale if scale is not None else (nope + rope_dim) ** -0.5 * yarn_mscale(card)
    if m.indexer is not None:      # DSA: each query reads only its top-k keys by the indexer's scores
        ix, ip = m.indexer, f"{p}.mixer.indexer"
        if ix.get("shared"):
            raise Unsupported(f"{ip}.shared: a layer reusing the previous layer's top-k selection")
        if not m.q_lora_rank or m.rope is False:
            raise Unsupported(f"{ip}: an indexer without the q-LoRA latent or without rope")
        out.update(indexer=True, index_topk=need_field(ix.get("index_topk"), f"{ip}.index_topk"),
                   index_n_heads=need_field(ix.get("index_heads"), f"{ip}.index_heads"),
                   index_head_dim=need_field(ix.get("index_dim"), f"{ip}.index_dim"),
                   index_rope_interleaved=need_field(ix.get("rope_interleaved"), f"{ip}.rope_interleaved",
                                                     "true: neighbour pairs, false: halves"))


def build(a: Args, kind, model):
    from dataclasses import replace

    from archprobe.nn.dynamic import Indexer
    from archprobe.nn.mla import MultiHeadLatentAttention
    from archprobe.nn.rope import Rope

    H = model.hidden_size
    indexer = None
    if a.indexer:
        rope = a.rope if a.rope is not None else Rope(a.rope_theta, a.rope_dim)
        indexer = Indexer(H, a.index_n_heads, a.index_head_dim, a.index_topk, query_dim=a.q_lora_rank,
                          rope=replace(rope, interleaved=a.index_rope_interleaved), eps=1e-6, tie_break="topk")
    return MultiHeadLatentAttention(H, a.num_heads, kv_lora_rank=a.kv_lora_rank, q_lora_rank=a.q_lora_rank,
                                    nope_dim=a.nope_dim, rope_dim=a.rope_dim, v_dim=a.v_head_dim,
                                    rope_theta=None if a.use_nope else a.rope_theta,
                                    rope_interleaved=a.rope_interleaved, output_gate=a.output_gate,
                                    form=a.form, softmax_scale=a.scale, rope=None if a.use_nope else a.rope,
                                    indexer=indexer, head_gate_act=a.head_gate_act)


ROPE_MAX = 256     # the widest decoupled rope key a KV down-projection may carry beside its latent


def detect(mods, H, cfg):
    """A rank bottleneck: a KV down-projection [w, H] (w <= H/2) whose latent [r] has a norm and is read back
    by an [X, r] up-projection; w - r is the decoupled rope key; optionally a q-LoRA pair [r_q, H] -> [X, r_q].
    No depthwise convs (a layer with them is the conv kinds'). Names break ties only between candidates of the
    same shape (kv vs q down-projections, the output vs an output gate)."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import bind_roles, depthwise_convs, gates_and_indexer, output_projection, take
    from archprobe.structure.names import says

    if depthwise_convs(mods):
        return None
    mats = [m for m in mods if len(m.shape) == 2 and not says(m.path, "indexer")]
    vecs = [m for m in mods if len(m.shape) == 1 and not says(m.path, "indexer")]
    kvs, qs = [], []
    for down in mats:
        w, inp = down.shape
        if inp != H or w > H // 2:
            continue
        for up in mats:
            if up is down:
                continue
            r = up.shape[1]
            norm = next((n for n in vecs if n.shape == (r,)), None)
            if r < w <= r + ROPE_MAX and up.shape[0] > r and norm is not None:
                kvs.append((w - r, not says(down.path, "mla_kv_down"), down.path,
                            (down, norm, up)))
            elif r == w and up.shape[0] > w and up.shape[1] != H:
                qs.append((not says(down.path, "mla_q_down"), down.path, (down, norm, up)))
    if not kvs:
        return None
    kv = min(kvs, key=lambda t: t[:3])[3]
    qs = [q for q in qs if q[2][0] is not kv[0] and q[2][2] is not kv[2]]
    q_lora = min(qs, key=lambda t: t[:2])[2] if qs else None
    pool = list(mods)
    down, norm, up = kv
    r, rope = up.shape[1], down.shape[0] - up.shape[1]
    taken = (down, up, *(q_lora[0::2] if q_lora else ()))    # the q-LoRA up [heads * d, r] may be [H, r] too
    writer = output_projection([m for m in mats if m.shape[0] == H and all(m is not t for t in taken)])
    nh = cfg.first_int("num_attention_heads", "n_heads", "num_heads")
    v_dim = writer.shape[1] // nh if writer is not None and nh else cfg.first_int("v_head_dim")
    nope = up.shape[0] // nh - v_dim if nh and v_dim else cfg.first_int("qk_nope_head_dim")
    mixer = Mixer("mla", num_heads=nh, kv_lora_rank=r, rope_dim=rope, nope_dim=nope, v_head_dim=v_dim,
                  q_lora_rank=q_lora[2].shape[1] if q_lora else None, cache_width_per_token=down.shape[0],
                  head_dim=(nope + rope) if nope is not None else None)
    mixer.evidence = [ev(down, f"KV down-projection H={H} -> {down.shape[0]} = latent {r} + rope {rope}"),
                      ev(norm, f"norm on the {r}-wide latent"),
                      ev(up, f"up-projection from the {r}-wide latent to K/V of all heads")]
    b = Bound(mixer)
    roles = [("kv_a", down), ("kv_a_norm", norm), ("kv_b", up), ("o", writer)]
    if q_lora is not None:
        roles += [("q_a", q_lora[0]), ("q_a_norm", q_lora[1]), ("q_b", q_lora[2])]
        mixer.evidence.append(ev(q_lora[0], f"query low-rank down-projection (q-LoRA {q_lora[2].shape[1]})"))
    else:
        q = next((m for m in mats if m.shape[1] == H and m not in (down, writer) and m.shape[0] > down.shape[0]), None)
        roles.append(("q", q))
    bind_roles(b, pool, roles)
    rope_norm = next((m for m in pool if m.shape == (rope,) and not says(m.path, "indexer")), None) if rope else None
    if rope_norm is not None:                 # a norm on the decoupled rope key alone (dots)
        b.roles["k_rope_norm"] = take(pool, rope_norm)
    gates_and_indexer(b, pool, H, nh, writer)
    mixer.confidence = 0.95
    b.leftover = pool
    return b


# tensor parallel: one latent per token shared by all heads, so every device keeps all of it
KINDS = [Kind("mla", "mixer", "MLA", "#d5793a", "attention.mla", attrs,
              required=("kv_lora_rank", "rope_dim", "cache_width_per_token"), cache=cache, tp_replicated=True,
              act_width=lambda m: (m.num_heads or 0) * 3 * 192, eager_score_copies=3, nn_kind="mla", args=Args,
              fields=fields, build=build, roles=ROLES,
              detect=detect, detect_order=110)]
