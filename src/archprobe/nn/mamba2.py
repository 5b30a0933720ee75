"""Mamba-2 mixer (the SSD state-space layer), as Nemotron-H uses it.

Mamba-2, arXiv 2405.21060. Per token, with heads h (head dim P), groups g (state N), h -> g = h // (H/G):
  [z | xBC | dt] = in_proj(x);  xBC = SiLU(causal depthwise conv(xBC) + bias);  [x | B | C] = xBC
  dt = max(softplus(dt + dt_bias), dt_min);  A = -exp(A_log)
  S_h = exp(dt_h A_h) S_h + dt_h x_h B_g^T          # state [P, N], float32
  y_h = S_h C_g + D_h x_h
  out = out_proj(GroupRMSNorm(y * SiLU(z)))         # gate before the norm (norm_before_gate=False)
  (`norm=False`: out = out_proj(y * SiLU(z)), Falcon-H1's mamba_rms_norm false)
The recurrence runs on archprobe.ops.ssd: chunked for a prefill, token by token for one decoded token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from archprobe.nn.conv import DepthwiseConv, causal_conv
from archprobe.nn.norm import rms_normalise
from archprobe.ops.ssd import ssd_chunked, ssd_recurrent


@dataclass
class Mamba2Cache:
    conv: torch.Tensor     # [B, conv_dim, kernel - 1] pre-conv inputs
    state: torch.Tensor    # [B, H, P, N] float32

    def nbytes(self) -> int:
        return self.conv.numel() * self.conv.element_size() + self.state.numel() * self.state.element_size()


class GroupGatedRMSNorm(nn.Module):
    def __init__(self, dim: int, groups: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.groups, self.eps = groups, eps

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        h = y.float() * F.silu(z.float())
        g = h.unflatten(-1, (self.groups, -1))
        return self.weight * rms_normalise(g, self.eps).flatten(-2).to(y.dtype)


class Mamba2Mixer(nn.Module):
    def __init__(self, hidden: int, heads: int, head_dim: int, state_size: int, groups: int = 1, conv_kernel: int = 4,
                 conv_bias: bool = True, dt_min: float = 0.0, norm_eps: float = 1e-5, norm: bool = True):
        super().__init__()
        self.heads, self.head_dim, self.state = heads, head_dim, state_size
        self.groups = groups
        self.d_inner = heads * head_dim
        self.conv_dim = self.d_inner + 2 * groups * state_size
        self.dt_min = dt_min
        self.in_proj = nn.Linear(hidden, self.d_inner + self.conv_dim + heads, bias=False)
        self.conv1d = DepthwiseConv(self.conv_dim, conv_kernel, conv_bias)
        self.dt_bias = nn.Parameter(torch.ones(heads))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, heads + 1, dtype=torch.float32)))
        self.D = nn.Parameter(torch.ones(heads))
        self.norm = GroupGatedRMSNorm(self.d_inner, groups, norm_eps) if norm else None
        self.out_proj = nn.Linear(self.d_inner, hidden, bias=False)

    def forward(self, x: torch.Tensor, cache: Mamba2Cache | None = None, use_cache: bool = False):
        Bsz, T, _ = x.shape
        H, P, N, G = self.heads, self.head_dim, self.state, self.groups
        z, xbc, dt = self.in_proj(x).split([self.d_inner, self.conv_dim, H], dim=-1)
        conv, conv_cache = causal_conv(xbc.transpose(1, 2), self.conv1d.weight, self.conv1d.bias,
                                       cache.conv if cache is not None else None)
        xs, Bm, Cm = F.silu(conv).transpose(1, 2).split([self.d_inner, G * N, G * N], dim=-1)
        dt = F.softplus(dt.float() + self.dt_bias.float()).clamp(min=self.dt_min)          # [B, T, H]
        A = -self.A_log.float().exp()
        xs = xs.float().unflatten(-1, (H, P))
        Bm = Bm.float().unflatten(-1, (G, N)).repeat_interleave(H // G, dim=2)             # [B, T, H, N]
        Cm = Cm.float().unflatten(-1, (G, N)).repeat_interleave(H // G, dim=2)
        state = cache.state if cache is not None else None
        run = ssd_recurrent if (T == 1 and state is not None) else ssd_chunked
        y, S = run(xs, dt, A, Bm, Cm, initial_state=state, output_final_state=True)
        y = (y + self.D.float()[:, None] * xs).flatten(-2).to(x.dtype)
        out = self.out_proj(self.norm(y, z) if self.norm is not None else (y.float() * F.silu(z.float())).to(y.dtype))
        new_cache = Mamba2Cache(conv_cache, S) if (use_cache or cache is not None) else None
        return out, new_cache
