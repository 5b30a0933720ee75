"""Multi-head latent attention over a latent cache, in two algebraically equal forms.

DeepSeek-V2, arXiv 2405.04434 (section 2.1.2); spec/kimi-k3.md section 2.1(b). Cache per token:
c_kv [r] (normalised latent) and k_rope [R] (shared by all heads). `w_kvb` [H * (N + V), r] maps the
latent to per-head [k_nope (N) | v (V)].

* `mla_naive`: expand K and V for every cached token, then ordinary attention.
* `mla_absorbed`: fold W_UK into the query and W_UV into the output, so scores and values are
  computed in the r-wide latent space (what decode kernels do).
Legend: B batch, T queries, S cached tokens, H heads, N nope dim, R rope dim, V value dim, r latent.
`mask_TS` is boolean (True = may attend).
"""

from __future__ import annotations

import torch


def _split_kvb(w_kvb, heads: int, nope: int, vdim: int):
    w = w_kvb.float().view(heads, nope + vdim, -1)
    return w[:, :nope], w[:, nope:]               # W_UK [H, N, r], W_UV [H, V, r]


def mla_naive(q_nope_BTHN, q_rope_BTHR, ckv_BSr, krope_BSR, w_kvb, mask_TS, scale: float):
    H, N = q_nope_BTHN.shape[2], q_nope_BTHN.shape[3]
    w_uk, w_uv = _split_kvb(w_kvb, H, N, w_kvb.shape[0] // H - N)
    ckv = ckv_BSr.float()
    k_nope = torch.einsum("bsr,hnr->bshn", ckv, w_uk)
    v = torch.einsum("bsr,hvr->bshv", ckv, w_uv)
    scores = (torch.einsum("bthn,bshn->bhts", q_nope_BTHN.float(), k_nope)
              + torch.einsum("bthr,bsr->bhts", q_rope_BTHR.float(), krope_BSR.float())) * scale
    scores = scores.masked_fill(~mask_TS, float("-inf"))
    return torch.einsum("bhts,bshv->bthv", torch.softmax(scores, dim=-1), v)


def mla_absorbed(q_nope_BTHN, q_rope_BTHR, ckv_BSr, krope_BSR, w_kvb, mask_TS, scale: float):
    H, N = q_nope_BTHN.shape[2], q_nope_BTHN.shape[3]
    w_uk, w_uv = _split_kvb(w_kvb, H, N, w_kvb.shape[0] // H - N)
    q_lat = torch.einsum("bthn,hnr->bthr", q_nope_BTHN.float(), w_uk)
    ckv = ckv_BSr.float()
    scores = (torch.einsum("bthr,bsr->bhts", q_lat, ckv)
              + torch.einsum("bthr,bsr->bhts", q_rope_BTHR.float(), krope_BSR.float())) * scale
    scores = scores.masked_fill(~mask_TS, float("-inf"))
    o_lat = torch.einsum("bhts,bsr->bthr", torch.softmax(scores, dim=-1), ckv)
    return torch.einsum("bthr,hvr->bthv", o_lat, w_uv)
