"""Rotary position embedding (rotate-half convention), applied at absolute positions so cached
keys and new queries agree. `interleaved=True` reads pairs (0,1),(2,3),... as DeepSeek checkpoints do."""

from __future__ import annotations

import torch


def rope_cos_sin(positions: torch.Tensor, dim: int, theta: float):
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device) / dim))
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x_BTHD: torch.Tensor, positions: torch.Tensor, theta: float, interleaved: bool = False):
    """Rotate the last dim of x [B, T, H, D] by the angles of `positions` [T]."""
    D = x_BTHD.shape[-1]
    h = x_BTHD.float()
    if interleaved:
        h = torch.cat([h[..., 0::2], h[..., 1::2]], dim=-1)
    cos, sin = rope_cos_sin(positions, D, theta)
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    half = torch.cat([-h[..., D // 2:], h[..., : D // 2]], dim=-1)
    return (h * cos + half * sin).to(x_BTHD.dtype)
