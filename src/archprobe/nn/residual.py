"""How sublayer outputs reach the next sublayer: the residual stream and its replacements.

* `prenorm`: x + f(norm(x)) (identity residual).
* `gated` (the design notes' hypothesis (a)): x + a * f(norm(x)) with a learnable per-branch gate
  vector `attn_res_gate` / `mlp_res_gate` ([H], initialised to 1).
* `depth_weights` (DenseFormer, arXiv 2402.02622): after layer i the stream is a static weighted sum
  of the embedding and every earlier layer output, weights `dwa_weights` [i + 2] (init: identity).
* `attnres_block` / `attnres_full` (Attention Residuals, arXiv 2603.15031; spec/kimi-k3.md 2.1(c)):
  a softmax over depth with one pseudo-query per aggregation point (`*_res_proj` [1, H] times
  `*_res_norm` [H]). Block: sources are the embedding, each completed block's sum, and the running
  sum of the current block (K3: 12 layers per block; bank written at layers i % block == 0 after the
  attention-side mixture). Full: every sublayer output is its own source.
All of it is token-local along depth, so incremental decoding needs no extra cache.
"""

from __future__ import annotations

import torch
from torch import nn

from archprobe.nn.norm import RMSNorm
from archprobe.ops.attnres import attn_res_mix

RESIDUALS = ("prenorm", "gated", "depth_weights", "attnres_block", "attnres_full")


class PseudoQuery(nn.Module):
    """One aggregation point: `<name>_proj` [1, H] and `<name>_norm` [H]; query = norm.weight * proj."""

    def __init__(self, hidden: int):
        super().__init__()
        self.proj = nn.Linear(hidden, 1, bias=False)
        nn.init.zeros_(self.proj.weight)   # zero query: a uniform mixture at initialisation
        self.norm = RMSNorm(hidden)
        self.observer = None   # archprobe observe: called with the depth sources at each mix

    def query(self) -> torch.Tensor:
        return self.norm.weight.float() * self.proj.weight[0].float()


def mix(point: PseudoQuery, sources: list[torch.Tensor]) -> torch.Tensor:
    if point.observer is not None:
        point.observer(sources)
    if len(sources) == 1:
        return sources[0]
    return attn_res_mix(torch.stack(sources), point.query())


class AttnResState:
    """The bank and the running partial sum while one forward pass walks down the layers."""

    def __init__(self, embedding: torch.Tensor, block_size: int | None):
        self.bank: list[torch.Tensor] = []
        self.partial: torch.Tensor | None = embedding
        self.block_size = block_size       # None: full AttnRes

    def sources(self) -> list[torch.Tensor]:
        return self.bank + ([self.partial] if self.partial is not None else [])

    def before_attention(self, point: PseudoQuery, layer: int) -> torch.Tensor:
        x = mix(point, self.sources()) if self.bank else self.partial
        if self.block_size is None or layer % self.block_size == 0:
            if self.partial is not None:
                self.bank.append(self.partial)
            self.partial = None
        return x

    def add(self, out: torch.Tensor) -> None:
        if self.block_size is None:      # full: each sublayer output is a source of its own
            self.bank.append(out)
        else:
            self.partial = out if self.partial is None else self.partial + out

    def before_ffn(self, point: PseudoQuery) -> torch.Tensor:
        return mix(point, self.sources())
