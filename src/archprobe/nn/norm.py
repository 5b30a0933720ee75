"""The norms a decoder uses, picked by `make_norm(kind, ...)`: RMSNorm (Llama-style: normalise in
float32, cast back, then the gain), the zero-centred RMSNorm whose gain is (1 + w) (Gemma, Qwen3-Next),
LayerNorm with or without a bias (GPT-2, Phi, Cohere); and the head-wise gated RMSNorm of KDA
(`o_norm`: float32 throughout, times sigmoid(gate))."""

from __future__ import annotations

import torch
from torch import nn


def rms_normalise(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / rms(x) over the last dim, in float32 (eps inside the root); the gain is the caller's."""
    h = x.float()
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    """`dim` may be a shape such as (heads, head_dim): one gain per head (normalised over the last dim)."""

    def __init__(self, dim: int | tuple[int, ...], eps: float = 1e-6):
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


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * gain [+ bias], in float32. `bias=False` for bias-free forms,
    `offset=True` for the (1 + w) gain (Nemotron's LayerNorm1P), `affine=False` for no parameters (OLMo)."""

    def __init__(self, dim: int | tuple[int, ...], eps: float = 1e-5, bias: bool = True, offset: bool = False,
                 affine: bool = True):
        """`dim` may be a shape such as (heads, head_dim): per-head gains (Cohere's q/k norms)."""
        super().__init__()
        if affine:
            self.weight = nn.Parameter(torch.zeros(dim) if offset else torch.ones(dim))
            if bias:
                self.bias = nn.Parameter(torch.zeros(dim))
        self.eps, self.offset = eps, offset
        self.last = dim if isinstance(dim, int) else dim[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = getattr(self, "weight", None), getattr(self, "bias", None)
        h = torch.nn.functional.layer_norm(x.float(), (self.last,), None, None, self.eps)
        if w is not None:
            h = h * (w.float() + 1.0 if self.offset else w.float())
        if b is not None:
            h = h + b.float()
        return h.to(x.dtype)


class PlainRMSNorm(nn.Module):
    """RMSNorm without a gain (nanochat): x / rms(x)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_normalise(x, self.eps).to(x.dtype)


NORMS = ("rms", "zero_centered", "layer", "layer_nobias", "layer_offset", "rms_noweight", "layer_noweight")


def make_norm(kind: str, dim: int | tuple[int, ...], eps: float) -> nn.Module:
    """`rms` (also `standard`), `zero_centered` ((1 + w) gain), `layer` (LayerNorm with bias),
    `layer_nobias`, `layer_offset` ((1 + w) gain and a bias), `rms_noweight`, `layer_noweight`."""
    if kind == "zero_centered":
        return ZeroCenteredRMSNorm(dim, eps)
    if kind.startswith("layer"):
        if kind not in NORMS:
            raise ValueError(f"norm kind {kind!r} is not one of {NORMS}")
        return LayerNorm(dim, eps, bias=kind in ("layer", "layer_offset"), offset=kind == "layer_offset",
                         affine=kind != "layer_noweight")
    if kind == "rms_noweight":
        return PlainRMSNorm(dim, eps)
    if kind not in ("rms", "standard"):
        raise ValueError(f"norm kind {kind!r} is not one of {NORMS}")
    return RMSNorm(dim, eps)


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
