"""Lightning attention (MiniMax-01): linear attention with a fixed per-head decay, gated and normed.

MiniMax-01, arXiv 2501.08313 (section 2.2, Lightning Attention). Per head h with slope s_h:
  [q | k | v] = SiLU(qkv_proj x)                 # per head [q_h | k_h | v_h], each head_dim wide
  S_t = exp(-s_h) S_{t-1} + k_t^T v_t            # state [d, d], float32
  o_t = q_t S_t                                   # = sum_{j<=t} exp(-s_h (t - j)) (q_t . k_j) v_j
  out = out_proj(sigmoid(output_gate x) * RMSNorm(o))   # the norm over all heads together
The slopes are the checkpoint's `slope_rate` buffer [heads, 1, 1] (MiniMax derives them from the head index
and the layer depth); its precomputed block-decay buffers are functions of the slopes and are not needed by
this token-by-token form (the definition; the block form is an algorithm for long prompts).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from archprobe.nn.norm import RMSNorm


@dataclass
class LightningCache:
    state: torch.Tensor    # [B, heads, d, d] float32

    def nbytes(self) -> int:
        return self.state.numel() * self.state.element_size()


class LightningAttention(nn.Module):
    """Checkpoint names: qkv_proj [3 heads d, H], output_gate [heads d, H], norm [heads d], out_proj,
    slope_rate [heads, 1, 1]."""

    def __init__(self, hidden: int, heads: int, head_dim: int, norm_eps: float = 1e-6):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        inner = heads * head_dim
        self.qkv_proj = nn.Linear(hidden, 3 * inner, bias=False)
        self.output_gate = nn.Linear(hidden, inner, bias=False)
        self.norm = RMSNorm(inner, eps=norm_eps)
        self.out_proj = nn.Linear(inner, hidden, bias=False)
        self.slope_rate = nn.Parameter(torch.ones(heads, 1, 1))

    def forward(self, x: torch.Tensor, cache: LightningCache | None = None, use_cache: bool = False):
        B, T, _ = x.shape
        q, k, v = F.silu(self.qkv_proj(x)).float().unflatten(-1, (self.heads, 3 * self.head_dim)).chunk(3, dim=-1)
        decay = torch.exp(-self.slope_rate.float().reshape(1, self.heads, 1, 1))
        S = cache.state if cache is not None else x.new_zeros(B, self.heads, self.head_dim, self.head_dim,
                                                              dtype=torch.float32)
        outs = []
        for t in range(T):
            S = decay * S + torch.einsum("bhk,bhv->bhkv", k[:, t], v[:, t])
            outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
        o = torch.stack(outs, dim=1).flatten(-2).to(x.dtype)
        o = torch.sigmoid(self.output_gate(x)) * self.norm(o)
        return self.out_proj(o), (LightningCache(S) if (use_cache or cache is not None) else None)
