"""RMSNorm (Llama-style: normalise in float32, cast back, then the gain) and the head-wise gated
RMSNorm of KDA (`o_norm`: float32 throughout, times sigmoid(gate))."""

from __future__ import annotations

import torch
from torch import nn


def rms_normalise(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / rms(x) over the last dim, in float32 (eps inside the root); the gain is the caller's."""
    h = x.float()
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = rms_normalise(x, self.eps)
        return self.weight * h.to(x.dtype)


class ZeroCenteredRMSNorm(nn.Module):
    """Qwen3-Next's RMSNorm: the gain is (1 + weight), weight stored around 0; float32 until the end."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = rms_normalise(x, self.eps)
        return (h * (1.0 + self.weight.float())).to(x.dtype)


def make_norm(style: str, dim: int, eps: float) -> nn.Module:
    return ZeroCenteredRMSNorm(dim, eps) if style == "zero_centered" else RMSNorm(dim, eps)


class GatedRMSNorm(nn.Module):
    """o = RMSNorm(x) * sigmoid(gate), one weight [d] shared by all heads (x, gate: [..., heads, d])."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        h = rms_normalise(x, self.eps) * self.weight.float()
        return (h * torch.sigmoid(gate.float())).to(x.dtype)


class SiluGatedRMSNorm(RMSNorm):
    """Gated DeltaNet's output norm (Qwen3-Next): RMSNorm(x) * weight, then times silu(z)."""

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return (super().forward(x) * torch.nn.functional.silu(z.float())).to(x.dtype)


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(sum x^2 + eps) in float32 (the FLA convention: eps inside the root)."""
    x = x.float()
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps)
