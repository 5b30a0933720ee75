"""Dynamic allocation (the design notes' hypothesis (b)): input-dependent choice of heads or of KV
entries.

* `HeadGate`: `head_gate` [heads, H]; per token and head a sigmoid gate. `mode="soft"` scales each
  head's output by it; `mode="hard"` keeps the `keep_heads` highest-scoring heads per token at full
  strength and switches the others off (all heads kept = the dense baseline, exactly).
* `Indexer`: a DeepSeek-DSA-style learned selector (arXiv 2512.02556, DeepSeek-V3.2): index score
  I(t, s) = sum_j w_j(t) ReLU(q_j(t) . k(s)) / sqrt(d); each query attends only to its `topk`
  best causal keys. Names follow DSA (`wq_b`, `wk`, `k_norm`, `weights_proj`); the query comes from
  the hidden state here; with `query_dim` it reads the q-LoRA latent and with `rope` rotates the first
  rope channels of q and k (DeepSeek-V3.2 and GLM-5's MLA indexer). topk >= sequence length = dense
  attention. Ties (ReLU zeros) break by key position (`tie_break="stable"`, prefill and decode choose
  alike) or as torch.topk does (`"topk"`, what the DSA reference and transformers run).
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
    def __init__(self, hidden: int, index_heads: int, index_dim: int, topk: int, *, query_dim: int | None = None,
                 rope=None, eps: float = 1e-5, tie_break: str = "stable"):
        super().__init__()
        if tie_break not in ("stable", "topk"):
            raise ValueError(f"tie_break must be 'stable' or 'topk', not {tie_break!r}")
        self.heads, self.dim, self.topk, self.rope, self.tie_break = index_heads, index_dim, topk, rope, tie_break
        self.wq_b = nn.Linear(query_dim or hidden, index_heads * index_dim, bias=False)
        self.wk = nn.Linear(hidden, index_dim, bias=False)
        self.k_norm = nn.LayerNorm(index_dim, eps=eps)
        self.weights_proj = nn.Linear(hidden, index_heads, bias=False)

    def keys(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Index keys [B, S, d] (the extra per-token cache DSA keeps), rotated at `positions` with a rope."""
        k = self.k_norm(self.wk(x))
        if self.rope is not None:
            k = self.rope.apply(k.unsqueeze(2), positions).squeeze(2).to(k.dtype)
        return k

    def select(self, x: torch.Tensor, keys_BSd: torch.Tensor, causal_TS: torch.Tensor, q_in: torch.Tensor | None = None,
               positions: torch.Tensor | None = None) -> torch.Tensor:
        """Boolean [B, T, S]: which keys each query may read (its top-k causal keys); the index query
        reads `q_in` (the q-LoRA latent) when given, else x."""
        q = self.wq_b(x if q_in is None else q_in).unflatten(-1, (self.heads, self.dim)).float()
        if self.rope is not None:
            q = self.rope.apply(q, positions)
        w = self.weights_proj(x).float() * self.heads ** -0.5
        score = torch.einsum("bthd,bsd->bths", q, keys_BSd.float()).relu() * self.dim ** -0.5
        score = torch.einsum("bths,bth->bts", score, w).masked_fill(~causal_TS, float("-inf"))
        k = min(self.topk, score.shape[-1])
        # a stable sort breaks ties (ReLU zeros) by key position, so prefill and decode choose alike
        if self.tie_break == "topk":
            chosen = score.topk(k, dim=-1).indices
        else:
            chosen = torch.sort(score, dim=-1, descending=True, stable=True).indices[..., :k]
        picked = torch.zeros_like(score, dtype=torch.bool).scatter_(-1, chosen, True)
        return picked & causal_TS
