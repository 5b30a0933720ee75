"""Per-layer caches for incremental decoding. Each knows its exact size in bytes (memory planning
compares against these)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


def _nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


@dataclass
class KVCache:
    """Softmax attention: keys and values [B, S, kv_heads, d] (or a latent [B, S, r] in `k` alone).

    `pos` is the absolute position of the next token (a sliding window drops old keys, not positions);
    `index_keys` [B, S, d] is the DSA-style indexer's extra per-token key cache.
    """

    k: torch.Tensor
    v: torch.Tensor | None = None
    pos: int = 0
    index_keys: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return self.k.shape[1]

    def nbytes(self) -> int:
        return _nbytes(self.k, self.v, self.index_keys)


@dataclass
class MLACache:
    """The latent cache: normalised c_kv [B, S, r] and the shared rope key [B, S, R]."""

    ckv: torch.Tensor
    krope: torch.Tensor
    index_keys: torch.Tensor | None = None   # [B, S, d]: the DSA indexer's keys (DeepSeek-V3.2)

    @property
    def length(self) -> int:
        return self.ckv.shape[1]

    def nbytes(self) -> int:
        return _nbytes(self.ckv, self.krope, self.index_keys)


def causal_mask(T: int, S: int, device, window: int | None = None) -> torch.Tensor:
    """[T, S] boolean: query t (the last T of S positions) may see key s."""
    q_pos = torch.arange(S - T, S, device=device)[:, None]
    k_pos = torch.arange(S, device=device)[None, :]
    mask = k_pos <= q_pos
    if window is not None:
        mask &= k_pos > q_pos - window
    return mask
