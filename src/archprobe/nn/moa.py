"""Mixture of attention heads (MoA; JetMoE): each token routes to top-k attention experts; an expert is a
query projection and an output projection, the keys and values are shared.

For a token with chosen experts e_1..e_k and weights w_j (softmax over the top-k router logits):
q_j = Q[e_j] x (kv_heads heads of head_dim), k, v = split(kv_proj x); each q_j attends (causally, with
rope) over the shared k, v; y = sum_j w_j O[e_j] attn_j + o_bias. Stored as JetMoE stores it:
`q_experts` [E, kv_heads * head_dim, H], `o_experts` [E, H, kv_heads * head_dim], `router` [E, H],
`kv_proj` [2 * kv_heads * head_dim, H], `out.bias` [H].
"""

from __future__ import annotations

import torch
from torch import nn

from archprobe.nn.attention import sdpa
from archprobe.nn.cache import KVCache, causal_mask
from archprobe.nn.rope import Rope
from archprobe.ops.moe import moe_route


class MixtureOfAttention(nn.Module):
    def __init__(self, hidden: int, num_experts: int, top_k: int, kv_heads: int, head_dim: int, rope: Rope | None):
        super().__init__()
        X = kv_heads * head_dim
        self.num_experts, self.top_k, self.kv_heads, self.head_dim, self.rope = num_experts, top_k, kv_heads, \
            head_dim, rope
        self.router = nn.Linear(hidden, num_experts, bias=False)
        self.q_experts = nn.Parameter(torch.randn(num_experts, X, hidden) * hidden ** -0.5)
        self.o_experts = nn.Parameter(torch.randn(num_experts, hidden, X) * X ** -0.5)
        self.kv_proj = nn.Linear(hidden, 2 * X, bias=False)
        self.out = nn.Module()          # the output bias, stored apart (JetMoE's experts.bias)
        self.out.bias = nn.Parameter(torch.zeros(hidden))

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, use_cache: bool = False):
        B, T, H = x.shape
        K, G, d = self.top_k, self.kv_heads, self.head_dim
        weights, experts = moe_route(self.router(x.reshape(-1, H)).float(), K, score="softmax", renormalize=True)
        q = torch.einsum("nh,nkxh->nkx", x.reshape(-1, H), self.q_experts[experts])   # [B*T, K, X]
        q = q.reshape(B, T, K * G, d)                   # head j * G + g: slot j's kv-head-g query
        k, v = self.kv_proj(x).chunk(2, dim=-1)
        k, v = k.reshape(B, T, G, d), v.reshape(B, T, G, d)
        start = cache.pos if cache is not None else 0
        if self.rope is not None:
            pos = torch.arange(start, start + T, device=x.device)
            q, k = self.rope.apply(q, pos), self.rope.apply(k, pos)
        k_all, v_all = (torch.cat([cache.k, k], 1), torch.cat([cache.v, v], 1)) if cache is not None else (k, v)
        S = k_all.shape[1]
        # head j * G + g reads kv head g (JetMoE repeats the kv heads K times, it does not interleave them)
        o = sdpa(q, k_all.repeat(1, 1, K, 1), v_all.repeat(1, 1, K, 1), causal_mask(T, S, x.device), d ** -0.5)
        o = o.to(x.dtype).reshape(B * T, K, G * d)
        y = torch.einsum("nkx,nkhx->nkh", o, self.o_experts[experts])
        y = (y * weights.to(y.dtype).unsqueeze(-1)).sum(1) + self.out.bias
        new_cache = KVCache(k_all, v_all, start + T) if (use_cache or cache is not None) else None
        return y.reshape(B, T, H), new_cache
