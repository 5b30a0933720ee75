"""Absolute sinusoidal positions (computed, never stored), added to the token embeddings.

Two formulas are in use, both [sin | cos] halves over d/2 frequencies w_i:
  * `vaswani` (Attention Is All You Need, arXiv:1706.03762; CTRL): w_i = 1 / 10000^(2i / d);
  * `tensor2tensor` (fairseq, XGLM, M2M-100): w_i = exp(-i ln(10000) / (d/2 - 1)), so the last
    frequency is exactly 1/10000; an odd d gets a zero last channel.
Facts read from transformers' modeling_ctrl.py (`positional_encoding`) and modeling_xglm.py
(`XGLMSinusoidalPositionalEmbedding.get_embedding`). The position offset (XGLM reads row t + 2) is
the caller's.
"""

from __future__ import annotations

import math

import torch

SINUSOIDS = ("vaswani", "tensor2tensor")


def sinusoidal_positions(positions: torch.Tensor, dim: int, form: str) -> torch.Tensor:
    """[T, dim] float32 table rows at `positions` [T] (already offset)."""
    if form not in SINUSOIDS:
        raise ValueError(f"sinusoidal form {form!r} is not one of {SINUSOIDS}")
    half = dim // 2
    i = torch.arange(half, dtype=torch.int64).float()
    if form == "vaswani":
        freqs = 1.0 / torch.pow(torch.tensor(10000.0), 2 * i / dim)
    else:
        freqs = torch.exp(i * -(math.log(10000) / (half - 1)))
    angles = positions.float()[:, None] * freqs[None, :]
    table = torch.cat([angles.sin(), angles.cos()], dim=-1)
    if dim % 2:
        table = torch.cat([table, torch.zeros(len(positions), 1)], dim=-1)
    return table
