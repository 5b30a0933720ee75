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
    from archprobe.validate.build import Unsupported, card_rope, head_gate_kind, need_field, yarn_mscale

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


# tensor parallel: one latent per token shared by all heads, so every device keeps all of it
KINDS = [Kind("mla", "mixer", "MLA", "#d5793a", "attention.mla", attrs,
              required=("kv_lora_rank", "rope_dim", "cache_width_per_token"), cache=cache, tp_replicated=True,
              act_width=lambda m: (m.num_heads or 0) * 3 * 192, eager_score_copies=3, nn_kind="mla", args=Args,
              fields=fields, build=build, roles=ROLES)]
