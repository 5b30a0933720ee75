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


def detect(mods, H, cfg):
    """A shared low-rank K/V without MLA's latent norm and rope key: a down-projection [r, H] (r <= H/4, no
    norm of width r) read back by one [X, r] up-projection (or a k / v pair). Tried after MLA, whose latent
    norm settles a rank bottleneck first; no depthwise convs (a layer with them is the conv kinds')."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import bind_roles, depthwise_convs
    from archprobe.structure.names import rank, says

    if depthwise_convs(mods):
        return None
    mats = [m for m in mods if len(m.shape) == 2 and not says(m.path, "indexer")]
    vecs = [m for m in mods if len(m.shape) == 1 and not says(m.path, "indexer")]
    cands = []
    for down in mats:
        r = down.shape[0]
        if down.shape[1] != H or r > H // 4 or any(n.shape == (r,) for n in vecs):
            continue
        ups = [u for u in mats if u is not down and u.shape[1] == r and u.shape[0] != H]
        if ups:
            cands.append((r, down.path, down, ups))
    if not cands:
        return None
    _, _, down, ups = min(cands, key=lambda c: c[:2])
    pool = list(mods)
    r = down.shape[0]
    nh = cfg.first_int("num_attention_heads", "n_heads", "num_heads")
    mixer = Mixer("lowrank_kv", num_heads=nh, kv_lora_rank=r, cache_width_per_token=r, confidence=0.75)
    mixer.evidence = [ev(down, f"shared K/V down-projection H={H} -> {r}: cache width {r} vs hidden {H}"),
                      ev(ups[0], f"up-projection from the {r}-wide latent")]
    b = Bound(mixer)
    writer = next((m for m in pool if len(m.shape) == 2 and m.shape[0] == H and m.shape[1] != r), None)
    q = next((m for m in pool if len(m.shape) == 2 and m.shape[1] == H and m not in (down, writer)), None)
    up_roles = [("kv_b", ups[0])] if len(ups) == 1 else list(zip(("k_b", "v_b"), rank(ups, "kv_up_k", "kv_up_v"),
                                                                                   strict=False))
    if q is not None and writer is not None:
        hd = cfg.first_int("head_dim") or (writer.shape[1] // nh if nh else None)
        mixer.head_dim = hd
        if hd and ups[0].shape[0] % hd == 0:
            mixer.num_kv_heads = ups[0].shape[0] // hd // (2 if len(ups) == 1 else 1)
    bind_roles(b, pool, (("kv_a", down), *up_roles, ("q", q), ("o", writer)))
    b.leftover = pool
    return b


KINDS = [Kind("lowrank_kv", "mixer", "LowRankKV", "#b5651d", "attention.kv_compression", attrs,
              required=("cache_width_per_token",), cache=cache,
              eager_score_copies=2, nn_kind="lowrank_kv", args=Args, fields=fields, build=build, roles={},
              detect=detect, detect_order=120)]
