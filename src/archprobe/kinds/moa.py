"""JetMoE's mixture of attention heads: routed query/output experts over one shared set of keys and values."""

from __future__ import annotations

from archprobe.kinds.attention import cache as kv_cache
from archprobe.kinds.spec import Kind

ROLES = {"router": "router", "experts.q": "q_experts", "experts.o": "o_experts", "kv": "kv_proj", "out": "out"}


def attrs(m, H):
    return {"num_experts": m.num_experts, "top_k": m.top_k, "num_heads": m.num_heads,
            "num_kv_heads": m.num_kv_heads, "head_dim": m.head_dim}


def fields(card, i, has, out):
    from archprobe.validate.plan import card_rope, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    hd = need_field(m.head_dim, f"{p}.mixer.head_dim")
    out.update(moa_num_experts=need_field(m.num_experts, f"{p}.mixer.num_experts"),
               moa_top_k=need_field(m.top_k, f"{p}.mixer.top_k"), moa_head_dim=hd,
               moa_kv_heads=need_field(m.num_kv_heads, f"{p}.mixer.num_kv_heads"), rope=card_rope(card, hd, layer=i))
    out["rope_theta"] = out["rope"].theta


def build(cfg, kind):
    from archprobe.nn.moa import MixtureOfAttention
    from archprobe.nn.rope import Rope

    rope = cfg.rope if cfg.rope is not None else Rope(cfg.rope_theta, cfg.moa_head_dim)
    return MixtureOfAttention(cfg.hidden_size, cfg.moa_num_experts, cfg.moa_top_k, cfg.moa_kv_heads,
                              cfg.moa_head_dim, rope)


# not in spec/contracts.md's vocabulary yet, so an id of its own; the experts share one K/V cache
KINDS = [Kind("moa", "mixer", "MoA", "#a0522d", "attention.moa", attrs,
              required=("num_experts", "top_k", "num_kv_heads", "head_dim"), cache=kv_cache, nn_kind="moa",
              fields=fields, build=build, roles=ROLES)]
