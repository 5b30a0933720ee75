"""Low-rank K/V without MLA's rope split: keys and values up-projected from one cached latent per token."""

from __future__ import annotations

import math
from dataclasses import dataclass

from archprobe.kinds.formulas import mla_cache
from archprobe.kinds.spec import CacheContext, Kind


def attrs(m, H):
    return {"ratio": round(m.kv_lora_rank / H, 4) if H and m.kv_lora_rank else None, "rank": m.kv_lora_rank,
            "cache_width_per_token": m.cache_width_per_token, "num_heads": m.num_heads}


def cache(m, c: CacheContext):
    index_dim = (m.indexer or {}).get("index_dim") or 0
    return m.kind, mla_cache(math.ceil(c.T / c.pad) * c.pad, m.cache_width_per_token, c.kv_b, index_dim)


@dataclass(frozen=True)
class Args:
    """archprobe.nn.kv_compression.LowRankKVAttention's arguments; toy defaults."""
    num_heads: int = 4
    num_kv_heads: int = 4
    head_dim: int = 16
    rank: int | None = None              # the cached latent's width; None: head_dim
    rope_theta: float | None = 10000.0


def fields(card, i, has, out):
    """Nothing from the card yet: the module runs on its arguments' defaults (no family ships it)."""


def build(a: Args, kind, model):
    from archprobe.nn.kv_compression import LowRankKVAttention

    return LowRankKVAttention(model.hidden_size, a.num_heads, a.num_kv_heads, a.head_dim, a.rank or a.head_dim,
                              a.rope_theta)


KINDS = [Kind("lowrank_kv", "mixer", "LowRankKV", "#b5651d", "attention.kv_compression", attrs,
              required=("cache_width_per_token",), cache=cache,
              eager_score_copies=2, nn_kind="lowrank_kv", args=Args, fields=fields, build=build, roles={})]
