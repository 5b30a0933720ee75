"""JetMoE's mixture of attention heads: routed query/output experts over one shared set of keys and values."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.attention import cache as kv_cache
from archprobe.kinds.spec import Kind

ROLES = {"router": "router", "experts.q": "q_experts", "experts.o": "o_experts", "kv": "kv_proj", "out": "out"}


def attrs(m, H):
    return {"num_experts": m.num_experts, "top_k": m.top_k, "num_heads": m.num_heads,
            "num_kv_heads": m.num_kv_heads, "head_dim": m.head_dim}


@dataclass(frozen=True)
class Args:
    """archprobe.nn.moa.MixtureOfAttention's arguments; toy defaults."""
    num_experts: int = 4
    top_k: int = 2
    num_kv_heads: int = 2
    head_dim: int = 16
    rope_theta: float | None = 10000.0
    rope: object = None                  # a Rope; None: rope_theta, default


def fields(card, i, has, out):
    from archprobe.validate.build import card_rope, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    hd = need_field(m.head_dim, f"{p}.mixer.head_dim")
    out.update(num_experts=need_field(m.num_experts, f"{p}.mixer.num_experts"),
               top_k=need_field(m.top_k, f"{p}.mixer.top_k"), head_dim=hd,
               num_kv_heads=need_field(m.num_kv_heads, f"{p}.mixer.num_kv_heads"), rope=card_rope(card, hd, layer=i))
    out["rope_theta"] = out["rope"].theta


def build(a: Args, kind, model):
    from archprobe.nn.moa import MixtureOfAttention
    from archprobe.nn.rope import Rope

    rope = a.rope if a.rope is not None else Rope(a.rope_theta, a.head_dim)
    return MixtureOfAttention(model.hidden_size, a.num_experts, a.top_k, a.num_kv_heads, a.head_dim, rope)


# not in spec/contracts.md's vocabulary yet, so an id of its own; the experts share one K/V cache
KINDS = [Kind("moa", "mixer", "MoA", "#a0522d", "attention.moa", attrs,
              required=("num_experts", "top_k", "num_kv_heads", "head_dim"), cache=kv_cache, nn_kind="moa", args=Args,
              fields=fields, build=build, roles=ROLES)]
