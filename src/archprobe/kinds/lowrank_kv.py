"""Low-rank K/V without MLA's rope split: keys and values up-projected from one cached latent per token."""

from __future__ import annotations

import math

from archprobe.kinds.formulas import mla_cache
from archprobe.kinds.spec import CacheContext, Kind


def attrs(m, H):
    return {"ratio": round(m.kv_lora_rank / H, 4) if H and m.kv_lora_rank else None, "rank": m.kv_lora_rank,
            "cache_width_per_token": m.cache_width_per_token, "num_heads": m.num_heads}


def cache(m, c: CacheContext):
    index_dim = (m.indexer or {}).get("index_dim") or 0
    return m.kind, mla_cache(math.ceil(c.T / c.pad) * c.pad, m.cache_width_per_token, c.kv_b, index_dim)


def fields(card, i, has, out):
    """Nothing beyond the model's fields: the module reads heads and rank from its HybridConfig."""


def build(cfg, kind):
    from archprobe.nn.kv_compression import LowRankKVAttention

    d = cfg.head_dim
    return LowRankKVAttention(cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, d,
                              cfg.kv_compression_rank or d, cfg.rope_theta)


KINDS = [Kind("lowrank_kv", "mixer", "LowRankKV", "#b5651d", "attention.kv_compression", attrs,
              required=("cache_width_per_token",), cache=cache,
              eager_score_copies=2, nn_kind="lowrank_kv", fields=fields, build=build, roles={})]
