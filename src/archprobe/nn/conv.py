"""The short causal depthwise convolution of linear-attention and SSM mixers, with its decode cache.

The cache keeps the last (kernel - 1) *pre-conv* inputs, so a prefill and a token-by-token run see
exactly the same left context.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class DepthwiseConv(nn.Module):
    """Weight [channels, 1, kernel] (checkpoint name `*.weight`), optional bias [channels]."""

    def __init__(self, channels: int, kernel: int, bias: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels, 1, kernel) / kernel)
        self.bias = nn.Parameter(torch.zeros(channels)) if bias else None


def causal_conv(x_BCT: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, prev_BCK: torch.Tensor | None):
    """(conv output [B, C, T] in the weight's dtype, the new cache [B, C, kernel - 1])."""
    B, C, T = x_BCT.shape
    k = weight.shape[-1]
    prev = prev_BCK if prev_BCK is not None else x_BCT.new_zeros(B, C, k - 1)
    full = torch.cat([prev.to(x_BCT.dtype), x_BCT], dim=-1)
    out = F.conv1d(full.to(weight.dtype), weight, bias, groups=C)[..., -T:]
    return out, full[..., -(k - 1):]
