"""Gated DeltaNet as Qwen3-Next lays it out: the gated delta rule with ONE decay per head.

Checkpoint names: `in_proj_qkvz` [2*nk*dk + 2*nv*dv, H] (grouped per key head: q, k, v-group,
z-group), `in_proj_ba` [2*nv, H] (per key head: b-group, a-group), `conv1d.weight` [conv, 1, K]
over the concatenated (q, k, v), `A_log` [nv], `dt_bias` [nv], `norm.weight` [dv] (RMSNorm, then
times silu(z)), `out_proj`. Value heads outnumber key heads (nv = r * nk); each key head serves r
consecutive value heads. The recurrence is KDA's with the head's decay repeated over the key
channels, so it runs on archprobe.ops.kda (chunked for prefill, the recurrence for one decoded token).
Its decode cache is KDA's: the last (kernel - 1) pre-conv q|k|v projections and the float32 state.

`layout="split"` (Qwen3.5, Lara, OLMo-hybrid): separate `in_proj_qkv` [2*nk*dk + nv*dv, H] in blocks
(all q, all k, all v), `in_proj_z` [nv*dv, H], `in_proj_b` and `in_proj_a` [nv, H]; the math is the
same. `beta_scale` 2 lets the write strength reach [0, 2] (OLMo-hybrid's allow_neg_eigval).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from archprobe.nn.conv import DepthwiseConv, causal_conv
from archprobe.nn.kda import KDACache, run_delta_rule
from archprobe.nn.norm import SiluGatedRMSNorm, l2norm


class GatedDeltaNet(nn.Module):
    def __init__(self, hidden: int, key_heads: int, value_heads: int, key_dim: int, value_dim: int,
                 conv_kernel: int = 4, norm_eps: float = 1e-6, chunk_size: int | None = None, layout: str = "grouped",
                 beta_scale: float = 1.0):
        super().__init__()
        if value_heads % key_heads:
            raise ValueError(f"value heads ({value_heads}) must be a multiple of key heads ({key_heads})")
        if layout not in ("grouped", "split"):
            raise ValueError(f"layout: {layout!r} is not 'grouped' or 'split'")
        self.nk, self.nv, self.dk, self.dv = key_heads, value_heads, key_dim, value_dim
        self.chunk_size, self.layout, self.beta_scale = chunk_size, layout, beta_scale
        if layout == "grouped":
            self.in_proj_qkvz = nn.Linear(hidden, 2 * key_heads * key_dim + 2 * value_heads * value_dim, bias=False)
            self.in_proj_ba = nn.Linear(hidden, 2 * value_heads, bias=False)
        else:
            self.in_proj_qkv = nn.Linear(hidden, 2 * key_heads * key_dim + value_heads * value_dim, bias=False)
            self.in_proj_z = nn.Linear(hidden, value_heads * value_dim, bias=False)
            self.in_proj_b = nn.Linear(hidden, value_heads, bias=False)
            self.in_proj_a = nn.Linear(hidden, value_heads, bias=False)
        self.conv1d = DepthwiseConv(2 * key_heads * key_dim + value_heads * value_dim, conv_kernel)
        self.A_log = nn.Parameter(torch.zeros(value_heads))
        self.dt_bias = nn.Parameter(torch.ones(value_heads))
        self.norm = SiluGatedRMSNorm(value_dim, norm_eps)
        self.out_proj = nn.Linear(value_heads * value_dim, hidden, bias=False)

    def _split(self, x: torch.Tensor):
        """The per-key-head grouped layout of in_proj_qkvz / in_proj_ba into q, k, v, z, b, a."""
        B, T, _ = x.shape
        if self.layout == "split":
            q, k, v = torch.split(self.in_proj_qkv(x), [self.nk * self.dk, self.nk * self.dk, self.nv * self.dv], -1)
            return q, k, v, self.in_proj_z(x).view(B, T, self.nv, self.dv), self.in_proj_b(x), self.in_proj_a(x)
        r = self.nv // self.nk
        qkvz = self.in_proj_qkvz(x).view(B, T, self.nk, 2 * self.dk + 2 * r * self.dv)
        q, k, v, z = torch.split(qkvz, [self.dk, self.dk, r * self.dv, r * self.dv], dim=-1)
        b, a = torch.split(self.in_proj_ba(x).view(B, T, self.nk, 2 * r), [r, r], dim=-1)
        return (q.reshape(B, T, -1), k.reshape(B, T, -1), v.reshape(B, T, -1), z.reshape(B, T, self.nv, self.dv),
                b.reshape(B, T, self.nv), a.reshape(B, T, self.nv))

    def forward(self, x: torch.Tensor, cache: KDACache | None = None, use_cache: bool = False):
        B, T, _ = x.shape
        q, k, v, z, b, a = self._split(x)
        mixed = torch.cat([q, k, v], dim=-1).transpose(1, 2)
        mixed, conv_cache = causal_conv(mixed, self.conv1d.weight, self.conv1d.bias,
                                        cache.conv if cache is not None else None)
        mixed = F.silu(mixed).transpose(1, 2)
        q, k, v = torch.split(mixed, [self.nk * self.dk, self.nk * self.dk, self.nv * self.dv], dim=-1)
        r = self.nv // self.nk
        q = l2norm(q.reshape(B, T, self.nk, self.dk)).repeat_interleave(r, dim=2)
        k = l2norm(k.reshape(B, T, self.nk, self.dk)).repeat_interleave(r, dim=2)
        v = v.reshape(B, T, self.nv, self.dv).float()
        beta = torch.sigmoid(b.float()) * self.beta_scale
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias.float())   # [B, T, nv]
        g = g.unsqueeze(-1).expand(B, T, self.nv, self.dk)
        o, new_state = run_delta_rule(q, k, v, g, beta, cache.state if cache is not None else None,
                                      self.chunk_size, scale=self.dk ** -0.5)
        o = self.norm(o.to(x.dtype), z)
        new_cache = KDACache(conv_cache, new_state) if (use_cache or cache is not None) else None
        return self.out_proj(o.reshape(B, T, -1)), new_cache
