"""Dynamic allocation (the design notes' hypothesis (b)): input-dependent choice of heads or of KV
entries.

* `HeadGate`: `head_gate` [heads, H]; per token and head a sigmoid gate. `mode="soft"` scales each
  head's output by it; `mode="hard"` keeps the `keep_heads` highest-scoring heads per token at full
  strength and switches the others off (all heads kept = the dense baseline, exactly).
* `Indexer`: a DeepSeek-DSA-style learned selector (arXiv 2512.02556, DeepSeek-V3.2): index score
  I(t, s) = sum_j w_j(t) ReLU(q_j(t) . k(s)) / sqrt(d); each query attends only to its `topk`
  best causal keys. Names follow DSA (`wq_b`, `wk`, `k_norm`, `weights_proj`); the query comes from
  the hidden state here (DSA reads the q-LoRA latent). topk >= sequence length = dense attention.
"""

from __future__ import annotations

import torch
from torch import nn


class HeadGate(nn.Module):
    def __init__(self, hidden: int, heads: int, mode: str = "soft", keep_heads: int | None = None):
        super().__init__()
        if mode not in ("soft", "hard"):
            raise ValueError(f"mode must be 'soft' or 'hard', not {mode!r}")
        self.head_gate = nn.Linear(hidden, heads, bias=True)
        self.mode, self.keep_heads = mode, keep_heads or heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Per-token, per-head multipliers [B, T, heads]."""
        scores = torch.sigmoid(self.head_gate(x).float())
        if self.mode == "soft":
            return scores
        keep = scores.topk(self.keep_heads, dim=-1).indices
        return torch.zeros_like(scores).scatter_(-1, keep, 1.0)


class Indexer(nn.Module):
    def __init__(self, hidden: int, index_heads: int, index_dim: int, topk: int):
        super().__init__()
        self.heads, self.dim, self.topk = index_heads, index_dim, topk
        self.wq_b = nn.Linear(hidden, index_heads * index_dim, bias=False)
        self.wk = nn.Linear(hidden, index_dim, bias=False)
        self.k_norm = nn.LayerNorm(index_dim)
        self.weights_proj = nn.Linear(hidden, index_heads, bias=False)

    def keys(self, x: torch.Tensor) -> torch.Tensor:
        """Index keys [B, S, d] (the extra per-token cache DSA keeps)."""
        return self.k_norm(self.wk(x))

    def select(self, x: torch.Tensor, keys_BSd: torch.Tensor, causal_TS: torch.Tensor) -> torch.Tensor:
        """Boolean [B, T, S]: which keys each query may read (its top-k causal keys)."""
        q = self.wq_b(x).unflatten(-1, (self.heads, self.dim)).float()
        w = self.weights_proj(x).float() * self.heads ** -0.5
        score = torch.einsum("bthd,bsd->bths", q, keys_BSd.float()).relu() * self.dim ** -0.5
        score = torch.einsum("bths,bth->bts", score, w).masked_fill(~causal_TS, float("-inf"))
        k = min(self.topk, score.shape[-1])
        # a stable sort breaks ties (ReLU zeros) by key position, so prefill and decode choose alike
        chosen = torch.sort(score, dim=-1, descending=True, stable=True).indices[..., :k]
        picked = torch.zeros_like(score, dtype=torch.bool).scatter_(-1, chosen, True)
        return picked & causal_TS
