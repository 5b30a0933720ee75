"""Attention Residuals: a softmax over depth replaces the residual sum.

Attention Residuals, arXiv 2603.15031; spec/kimi-k3.md section 2.1(c). For depth sources v_0..v_n:

    kappa_j = v_j / sqrt(mean_d(v_j^2) + eps)     # RMS-normalised key, no gain
    s_j     = sum_d kappa_j[d] * query[d]          # query = res_norm.weight * res_proj.weight
    out     = sum_j softmax_j(s)_j * v_j           # the raw sources, not the normalised keys

Legend: N depth sources, B batch, T tokens, D width. Math in float32, result in the sources' dtype.
The bank bookkeeping (which sources exist at which layer) lives in archprobe.nn.residual.
"""

from __future__ import annotations

import torch


def attn_res_weights(sources_NBTD: torch.Tensor, query_D: torch.Tensor, *, eps: float = 1e-5) -> torch.Tensor:
    """The softmax over depth [N, B, T] (float32) that `attn_res_mix` applies to the sources."""
    v = sources_NBTD.float()
    rms = torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)
    scores = torch.einsum("nbtd,d->nbt", v, query_D.float()) * rms.squeeze(-1)
    return torch.softmax(scores, dim=0)


def attn_res_mix(sources_NBTD: torch.Tensor, query_D: torch.Tensor, *, eps: float = 1e-5) -> torch.Tensor:
    """Mix N depth sources [N, B, T, D] with one pseudo-query [D]; returns [B, T, D]."""
    weights = attn_res_weights(sources_NBTD, query_D, eps=eps)
    return torch.einsum("nbt,nbtd->btd", weights, sources_NBTD.float()).to(sources_NBTD.dtype)
