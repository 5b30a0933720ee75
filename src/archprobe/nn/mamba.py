"""Mamba (v1) selective state-space mixer, as Mamba, FalconMamba and Jamba lay it out.

Mamba, arXiv 2312.00752 (Algorithm 2, "S6"). Per token, channels c in [0, C), state n in [0, N):
  [x | z] = in_proj(h);  x = SiLU(causal depthwise conv(x) + bias)
  [dt_r | B | C] = x_proj(x)                       # dt_r: rank r, B and C: N each (shared by all channels)
  (FalconMamba / Jamba: dt_r, B, C each RMS-normalised first, with or without a gain)
  dt = softplus(dt_proj.weight dt_r + dt_proj.bias)        # [C]
  S_c = exp(dt_c A_c) * S_c + dt_c x_c B                   # state [C, N], float32; A = -exp(A_log) [C, N]
  y_c = <S_c, C> + D_c x_c
  out = out_proj(y * SiLU(z))
The scan is the plain token-by-token recurrence (the definition): validate's prompts are short, and a
decoded token is one step of it. Omitted: the fused CUDA kernels (same math).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from archprobe.nn.conv import DepthwiseConv, causal_conv
from archprobe.nn.norm import rms_normalise


@dataclass
class MambaCache:
    conv: torch.Tensor     # [B, C, kernel - 1] pre-conv inputs
    state: torch.Tensor    # [B, C, N] float32

    def nbytes(self) -> int:
        return self.conv.numel() * self.conv.element_size() + self.state.numel() * self.state.element_size()


def selective_scan(x_BTC, dt_BTC, A_CN, B_BTN, C_BTN, state_BCN=None):
    """The S6 recurrence in float32: (y [B, T, C], final state [B, C, N])."""
    Bsz, T, Ch = x_BTC.shape
    S = state_BCN.float() if state_BCN is not None else x_BTC.new_zeros(Bsz, Ch, A_CN.shape[1], dtype=torch.float32)
    x, dt, Bm, Cm = x_BTC.float(), dt_BTC.float(), B_BTN.float(), C_BTN.float()
    decay = torch.exp(dt.unsqueeze(-1) * A_CN.float())                      # [B, T, C, N]
    ys = []
    for t in range(T):
        S = decay[:, t] * S + (dt[:, t] * x[:, t]).unsqueeze(-1) * Bm[:, t, None, :]
        ys.append(torch.einsum("bcn,bn->bc", S, Cm[:, t]))
    return torch.stack(ys, dim=1), S


class MambaMixer(nn.Module):
    """Checkpoint names: in_proj, conv1d, x_proj, dt_proj (+ bias), A_log [C, N], D [C], out_proj; with
    `ssm_norms` "weighted" also dt_norm [r], b_norm [N], c_norm [N] (Jamba); "weightless": the same
    norms without gains (FalconMamba); None: no such norms (Mamba)."""

    def __init__(self, hidden: int, inner: int, state_size: int, dt_rank: int, conv_kernel: int = 4,
                 conv_bias: bool = True, proj_bias: bool = False, ssm_norms: str | None = None,
                 ssm_norm_eps: float = 1e-6):
        super().__init__()
        if ssm_norms not in (None, "weighted", "weightless"):
            raise ValueError(f"ssm_norms: {ssm_norms!r} is not None, 'weighted' or 'weightless'")
        self.inner, self.N, self.r = inner, state_size, dt_rank
        self.ssm_norms, self.ssm_norm_eps = ssm_norms, ssm_norm_eps
        self.in_proj = nn.Linear(hidden, 2 * inner, bias=proj_bias)
        self.conv1d = DepthwiseConv(inner, conv_kernel, conv_bias)
        self.x_proj = nn.Linear(inner, dt_rank + 2 * state_size, bias=False)
        self.dt_proj = nn.Linear(dt_rank, inner, bias=True)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, state_size + 1, dtype=torch.float32)).repeat(inner, 1))
        self.D = nn.Parameter(torch.ones(inner))
        self.out_proj = nn.Linear(inner, hidden, bias=proj_bias)
        if ssm_norms == "weighted":
            self.dt_norm = nn.Parameter(torch.ones(dt_rank))
            self.b_norm = nn.Parameter(torch.ones(state_size))
            self.c_norm = nn.Parameter(torch.ones(state_size))

    def _norm(self, x: torch.Tensor, gain: str) -> torch.Tensor:
        if self.ssm_norms is None:
            return x
        h = rms_normalise(x, self.ssm_norm_eps).to(x.dtype)
        return getattr(self, gain) * h if self.ssm_norms == "weighted" else h

    def forward(self, h: torch.Tensor, cache: MambaCache | None = None, use_cache: bool = False):
        x, z = self.in_proj(h).chunk(2, dim=-1)
        conv, conv_cache = causal_conv(x.transpose(1, 2), self.conv1d.weight, self.conv1d.bias,
                                       cache.conv if cache is not None else None)
        x = F.silu(conv).transpose(1, 2)                                          # [B, T, C]
        dt_r, Bm, Cm = self.x_proj(x).split([self.r, self.N, self.N], dim=-1)
        dt_r, Bm, Cm = self._norm(dt_r, "dt_norm"), self._norm(Bm, "b_norm"), self._norm(Cm, "c_norm")
        dt = F.softplus(dt_r @ self.dt_proj.weight.t() + self.dt_proj.bias.float())
        y, S = selective_scan(x, dt, -self.A_log.float().exp(), Bm, Cm, cache.state if cache is not None else None)
        y = (y + self.D.float() * x.float()) * F.silu(z.float())
        out = self.out_proj(y.to(h.dtype))
        return out, (MambaCache(conv_cache, S) if (use_cache or cache is not None) else None)
