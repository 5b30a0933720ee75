"""RWKV-4 (transformers' `rwkv`, BlinkDL's RWKV-4 "Pile"/"Raven" checkpoints), readable PyTorch.

A block is time mixing then channel mixing, each pre-normed (LayerNorm) and added to the residual; block 0
also normalises the embeddings (`pre_ln`). Both sublayers read a *token shift*: each position mixes its own
input with the previous token's, per channel, `x * mix + x_prev * (1 - mix)`.

* time mixing: keys k, values v, a receptance r = sigmoid(.) from the shifted inputs; the WKV recurrence
      wkv_t = (sum_{i<t} e^{-(t-1-i) w + k_i} v_i + e^{u + k_t} v_t) / (sum_{i<t} e^{-(t-1-i) w + k_i} + e^{u + k_t})
  per channel, with decay w = exp(time_decay) > 0 and a bonus u = time_first for the current token; out =
  output(r * wkv). The sums are kept as (numerator, denominator) scaled by e^{-m}, m their largest exponent,
  so nothing overflows: the state per sequence is those three vectors plus the last input.
* channel mixing: value(relu(key(x_k))^2) gated by sigmoid(receptance(x_r)); its state is the last input.

Parameter names are the checkpoints' (`attention.time_decay`, `feed_forward.key`, ...).
"""

from __future__ import annotations

import torch
from torch import nn


def token_shift(x: torch.Tensor, last: torch.Tensor | None) -> torch.Tensor:
    """The previous token's input at every position: `last` (the previous chunk's final input) or zeros first."""
    first = torch.zeros_like(x[:, :1]) if last is None else last[:, None].to(x.dtype)
    return torch.cat([first, x[:, :-1]], dim=1)


def mix(x: torch.Tensor, prev: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * weight + prev * (1 - weight)


def wkv(time_decay: torch.Tensor, time_first: torch.Tensor, k: torch.Tensor, v: torch.Tensor, state=None):
    """The WKV recurrence over k, v [B, T, A] in float32; state = (numerator, denominator, max exponent) [B, A]
    each, scaled by e^{-max}. Returns (wkv [B, T, A], the state after the last token)."""
    B, T, A = k.shape
    k, v = k.float(), v.float()
    if state is None:
        zeros = k.new_zeros(B, A)
        state = (zeros, zeros, torch.full_like(zeros, float("-inf")))
    num, den, top = state
    decay = -torch.exp(time_decay.float())          # log of the per-step decay e^{-w}
    bonus = time_first.float()
    out = []
    for t in range(T):
        kt, vt = k[:, t], v[:, t]
        # read: the past (scaled by e^{top}) plus the current token with its bonus
        m = torch.maximum(top, kt + bonus)
        a, b = torch.exp(top - m), torch.exp(kt + bonus - m)
        out.append((a * num + b * vt) / (a * den + b))
        # write: decay the past one step, add the current token (no bonus)
        m = torch.maximum(top + decay, kt)
        a, b = torch.exp(top + decay - m), torch.exp(kt - m)
        num, den, top = a * num + b * vt, a * den + b, m
    return torch.stack(out, dim=1), (num, den, top)


class RwkvTimeMix(nn.Module):
    """RWKV-4 time mixing. Cache: (last input [B, H], numerator, denominator, max exponent [B, A] float32)."""

    def __init__(self, hidden_size: int, attention_size: int | None = None):
        super().__init__()
        A = attention_size or hidden_size
        self.time_decay = nn.Parameter(torch.zeros(A))
        self.time_first = nn.Parameter(torch.zeros(A))
        self.time_mix_key = nn.Parameter(torch.full((1, 1, hidden_size), 0.5))
        self.time_mix_value = nn.Parameter(torch.full((1, 1, hidden_size), 0.5))
        self.time_mix_receptance = nn.Parameter(torch.full((1, 1, hidden_size), 0.5))
        self.key = nn.Linear(hidden_size, A, bias=False)
        self.value = nn.Linear(hidden_size, A, bias=False)
        self.receptance = nn.Linear(hidden_size, A, bias=False)
        self.output = nn.Linear(A, hidden_size, bias=False)

    def forward(self, x: torch.Tensor, cache=None, use_cache: bool = False):
        prev = token_shift(x, cache[0] if cache is not None else None)
        k = self.key(mix(x, prev, self.time_mix_key))
        v = self.value(mix(x, prev, self.time_mix_value))
        r = torch.sigmoid(self.receptance(mix(x, prev, self.time_mix_receptance)))
        y, state = wkv(self.time_decay, self.time_first, k, v, cache[1:] if cache is not None else None)
        out = self.output(r * y.to(r.dtype))
        return out, ((x[:, -1], *state) if use_cache or cache is not None else None)


class RwkvChannelMix(nn.Module):
    """RWKV-4 channel mixing: a squared-ReLU FFN on the token-shifted input, gated by a receptance."""

    stateful = True      # HybridDecoder keeps its last input in the layer's cache

    def __init__(self, hidden_size: int, intermediate_size: int):
        super().__init__()
        self.time_mix_key = nn.Parameter(torch.full((1, 1, hidden_size), 0.5))
        self.time_mix_receptance = nn.Parameter(torch.full((1, 1, hidden_size), 0.5))
        self.key = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.receptance = nn.Linear(hidden_size, hidden_size, bias=False)
        self.value = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor, last: torch.Tensor | None = None):
        """Returns (output, this chunk's last input: the next chunk's `last`)."""
        prev = token_shift(x, last)
        k = torch.relu(self.key(mix(x, prev, self.time_mix_key))) ** 2
        r = torch.sigmoid(self.receptance(mix(x, prev, self.time_mix_receptance)))
        return r * self.value(k), x[:, -1]


class RwkvBlock(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, eps: float, first: bool,
                 attention_size: int | None = None):
        super().__init__()
        if first:
            self.pre_ln = nn.LayerNorm(hidden_size, eps=eps)
        self.ln1 = nn.LayerNorm(hidden_size, eps=eps)
        self.ln2 = nn.LayerNorm(hidden_size, eps=eps)
        self.attention = RwkvTimeMix(hidden_size, attention_size)
        self.feed_forward = RwkvChannelMix(hidden_size, intermediate_size)

    def forward(self, x: torch.Tensor, cache=None, use_cache: bool = False):
        """cache: (time mixing's cache, channel mixing's last input) or None."""
        if hasattr(self, "pre_ln"):
            x = self.pre_ln(x)
        a, time_cache = self.attention(self.ln1(x), cache[0] if cache is not None else None, use_cache)
        x = x + a
        f, last = self.feed_forward(self.ln2(x), cache[1] if cache is not None else None)
        keep = use_cache or cache is not None
        return x + f, ((time_cache, last) if keep else None)


class RwkvModel(nn.Module):
    """Embeddings, RWKV-4 blocks, a final LayerNorm (eps 1e-5, as the checkpoints were trained) and, with
    `vocab_size` given to `head`, an untied output head. `forward(ids, caches, use_cache)` -> (hidden, caches)."""

    def __init__(self, vocab_size: int, hidden_size: int, num_layers: int, intermediate_size: int | None = None,
                 eps: float = 1e-5, attention_size: int | None = None, head: bool = True):
        super().__init__()
        inter = intermediate_size or 4 * hidden_size
        self.embeddings = nn.Embedding(vocab_size, hidden_size)
        self.blocks = nn.ModuleList([RwkvBlock(hidden_size, inter, eps, i == 0, attention_size)
                                     for i in range(num_layers)])
        self.ln_out = nn.LayerNorm(hidden_size)
        self.head = nn.Linear(hidden_size, vocab_size, bias=False) if head else None

    def forward(self, input_ids: torch.Tensor, caches=None, use_cache: bool = False):
        x = self.embeddings(input_ids)
        caches = list(caches) if caches is not None else [None] * len(self.blocks)
        for i, block in enumerate(self.blocks):
            x, caches[i] = block(x, caches[i], use_cache)
        x = self.ln_out(x)
        out = self.head(x) if self.head is not None else x
        return out, (caches if use_cache or caches[0] is not None else None)
