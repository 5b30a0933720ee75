"""KV compression (the design notes' hypothesis (a)): a shared low-rank K/V projection.

c = kv_down x (r wide, shared by K and V); k = k_up c, v = v_up c per KV head. The cache stores c
only: r values per token instead of 2 * kv_heads * head_dim. RoPE is applied after the
up-projection at the key's absolute position, so caching the latent stays exact. MLA is the
refined form of the same idea (a latent norm, a decoupled rope key, absorbed decode).
"""

from __future__ import annotations

import torch
from torch import nn

from archprobe.nn.attention import sdpa
from archprobe.nn.cache import KVCache, causal_mask
from archprobe.nn.rope import apply_rope


class LowRankKVAttention(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, rank: int,
                 rope_theta: float | None = 10000.0):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.rank, self.rope_theta = heads, kv_heads, head_dim, rank, \
            rope_theta
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.kv_down = nn.Linear(hidden, rank, bias=False)
        self.k_up = nn.Linear(rank, kv_heads * head_dim, bias=False)
        self.v_up = nn.Linear(rank, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, use_cache: bool = False):
        B, T, _ = x.shape
        start = cache.pos if cache is not None else 0
        latent = self.kv_down(x)
        latent_all = torch.cat([cache.k, latent], 1) if cache is not None else latent
        S = latent_all.shape[1]
        q = self.q_proj(x).unflatten(-1, (self.heads, self.head_dim))
        k = self.k_up(latent_all).unflatten(-1, (self.kv_heads, self.head_dim))
        v = self.v_up(latent_all).unflatten(-1, (self.kv_heads, self.head_dim))
        if self.rope_theta is not None:
            q = apply_rope(q, torch.arange(start, start + T, device=x.device), self.rope_theta)
            k = apply_rope(k, torch.arange(start + T - S, start + T, device=x.device), self.rope_theta)
        o = sdpa(q, k, v, causal_mask(T, S, x.device), self.head_dim ** -0.5)
        new_cache = KVCache(latent_all, None, start + T) if (use_cache or cache is not None) else None
        return self.o_proj(o.to(x.dtype).flatten(-2)), new_cache
