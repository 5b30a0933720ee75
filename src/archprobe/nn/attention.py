"""Softmax attention: MHA / GQA / MQA with a KV cache, and the seed's variants built on it.

Options: RoPE (rotate-half, absolute positions) or none; a sliding window; q/k RMSNorm (Qwen3); a
sigmoid output gate `g_proj` (gated attention); dynamic allocation by `HeadGate` or `Indexer`
(archprobe.nn.dynamic). With a window the cache keeps only the last `window` keys.
"""

from __future__ import annotations

import torch
from torch import nn

from archprobe.nn.cache import KVCache, causal_mask
from archprobe.nn.dynamic import HeadGate, Indexer
from archprobe.nn.norm import make_norm
from archprobe.nn.rope import apply_rope


def sdpa(q_BTHD, k_BSGD, v_BSGD, mask, scale: float):
    """Grouped attention in float32; mask [T, S] or [B, T, S] boolean."""
    H, G = q_BTHD.shape[2], k_BSGD.shape[2]
    k = k_BSGD.float().repeat_interleave(H // G, dim=2)
    v = v_BSGD.float().repeat_interleave(H // G, dim=2)
    scores = torch.einsum("bthd,bshd->bhts", q_BTHD.float(), k) * scale
    m = mask[:, None] if mask.dim() == 3 else mask
    scores = scores.masked_fill(~m, float("-inf"))
    return torch.einsum("bhts,bshd->bthd", torch.softmax(scores, dim=-1), v)


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, *, rope_theta: float | None = 10000.0,
                 window: int | None = None, qk_norm: bool = False, output_gate: bool = False,
                 head_gate: HeadGate | None = None, indexer: Indexer | None = None, norm_eps: float = 1e-6,
                 gate_in_q: bool = False, rotary_dim: int | None = None, norm_style: str = "standard"):
        """`gate_in_q`: Qwen3-Next's gated attention, q_proj emits [q | gate] per head (no g_proj).
        `rotary_dim`: rotate only the first rotary_dim channels of each head (partial RoPE)."""
        super().__init__()
        if heads % kv_heads:
            raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.rope_theta, self.window = rope_theta, window
        self.gate_in_q = gate_in_q
        self.rotary_dim = rotary_dim or head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim * (2 if gate_in_q else 1), bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        if qk_norm:
            self.q_norm = make_norm(norm_style, head_dim, norm_eps)
            self.k_norm = make_norm(norm_style, head_dim, norm_eps)
        if output_gate:
            self.g_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.gate = head_gate
        self.indexer = indexer

    def _rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        r = self.rotary_dim
        if r >= self.head_dim:
            return apply_rope(x, pos, self.rope_theta)
        return torch.cat([apply_rope(x[..., :r], pos, self.rope_theta), x[..., r:]], dim=-1)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, use_cache: bool = False):
        B, T, _ = x.shape
        q_gate = None
        if self.gate_in_q:
            q, q_gate = self.q_proj(x).unflatten(-1, (self.heads, 2 * self.head_dim)).chunk(2, dim=-1)
        else:
            q = self.q_proj(x).unflatten(-1, (self.heads, self.head_dim))
        k = self.k_proj(x).unflatten(-1, (self.kv_heads, self.head_dim))
        v = self.v_proj(x).unflatten(-1, (self.kv_heads, self.head_dim))
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        start = cache.pos if cache is not None else 0
        if self.rope_theta is not None:
            pos = torch.arange(start, start + T, device=x.device)
            q, k = self._rope(q, pos), self._rope(k, pos)
        keys_idx = self.indexer.keys(x) if self.indexer is not None else None
        if cache is not None:
            k_all, v_all = torch.cat([cache.k, k], 1), torch.cat([cache.v, v], 1)
            if keys_idx is not None:
                keys_idx = torch.cat([cache.index_keys, keys_idx], 1)
        else:
            k_all, v_all = k, v
        S = k_all.shape[1]
        mask = causal_mask(T, S, x.device, self.window)
        if self.indexer is not None:
            mask = self.indexer.select(x, keys_idx, mask)
        o = sdpa(q, k_all, v_all, mask, self.head_dim ** -0.5)
        if self.gate is not None:
            o = o * self.gate(x).unsqueeze(-1)
        if q_gate is not None:
            o = o * torch.sigmoid(q_gate.float())
        if hasattr(self, "g_proj"):
            o = o * torch.sigmoid(self.g_proj(x).float()).unflatten(-1, (self.heads, self.head_dim))
        new_cache = None
        if use_cache or cache is not None:
            keep = slice(-self.window, None) if self.window else slice(None)
            new_cache = KVCache(k_all[:, keep], v_all[:, keep], start + T,
                                keys_idx[:, keep] if keys_idx is not None else None)
        return self.o_proj(o.to(x.dtype).flatten(-2)), new_cache
