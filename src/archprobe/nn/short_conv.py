"""The gated short-convolution mixer of LFM2 (Liquid AI): a depthwise causal conv on the hidden width,
gated before and after by input projections.

  [b | c | x] = in_proj(h)                 # three [T, H] streams (in that order)
  y = c * causal depthwise conv(b * x)     # conv weight [H, 1, K] (+ bias)
  out = out_proj(y)
No state beyond the conv's last (K - 1) inputs, so decoding caches only those (pre-conv b * x).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from archprobe.nn.conv import DepthwiseConv, causal_conv


@dataclass
class ShortConvCache:
    conv: torch.Tensor     # [B, H, kernel - 1] pre-conv b * x

    def nbytes(self) -> int:
        return self.conv.numel() * self.conv.element_size()


class ShortConv(nn.Module):
    """Checkpoint names: in_proj [3H, H], conv1d [H, 1, K], out_proj [H, H]; `bias` on all three or none."""

    def __init__(self, hidden: int, conv_kernel: int = 3, bias: bool = False):
        super().__init__()
        self.in_proj = nn.Linear(hidden, 3 * hidden, bias=bias)
        self.conv1d = DepthwiseConv(hidden, conv_kernel, bias)
        self.out_proj = nn.Linear(hidden, hidden, bias=bias)

    def forward(self, h: torch.Tensor, cache: ShortConvCache | None = None, use_cache: bool = False):
        b, c, x = self.in_proj(h).chunk(3, dim=-1)
        y, conv_cache = causal_conv((b * x).transpose(1, 2), self.conv1d.weight, self.conv1d.bias,
                                    cache.conv if cache is not None else None)
        out = self.out_proj(c * y.transpose(1, 2).to(h.dtype))
        return out, (ShortConvCache(conv_cache) if (use_cache or cache is not None) else None)
