"""Inputs and float64 references the linear-attention op tests share: the KDA gate regimes of
benchmarks/kda.py and the SSD recurrence written out token by token."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def regime_gate(regime, shape, gen):
    """The gate regimes of benchmarks/kda.py: K3's -5*sigmoid (mild, typical, strong end) and Kimi Linear's
    unbounded -exp(A)*softplus with exp(A) up to 16, plus a decay far past any factor's range."""
    x = torch.randn(*shape, generator=gen)
    if regime == "mild":
        return -5 * torch.sigmoid(x - 4)
    if regime == "k3":
        return -5 * torch.sigmoid(x)
    if regime == "k3_strong_end":
        return -5 * torch.sigmoid(x + 4)
    if regime == "unbounded":
        return -(1 + 15 * torch.rand(shape[-1], generator=gen)) * F.softplus(x)
    return -200 * torch.rand(*shape, generator=gen)   # "extreme": up to -200 per token


REGIMES = ["mild", "k3", "k3_strong_end", "unbounded", "extreme"]


def regime_inputs(regime, B=1, T=150, H=2, K=16, V=8, seed=0, per_head=False):
    gen = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    k = F.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    v = torch.randn(B, T, H, V, generator=gen)
    g = regime_gate(regime, (B, T, H, 1 if per_head else K), gen)
    beta = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    return q, k, v, (g.squeeze(-1) if per_head else g), beta


def f64(*xs):
    return [None if x is None else x.double() for x in xs]


def ssd_reference(x, dt, A, Bm, Cm, S=None):
    """S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T, y_t = S_t C_t, in float64, one token at a time."""
    Bsz, T, H, P = x.shape
    S = torch.zeros(Bsz, H, P, Bm.shape[-1], dtype=torch.float64) if S is None else S.double().clone()
    ys = []
    for t in range(T):
        S = S * torch.exp(dt[:, t].double() * A.double())[..., None, None] \
            + (dt[:, t].double()[..., None] * x[:, t].double())[..., None] * Bm[:, t].double()[..., None, :]
        ys.append((S * Cm[:, t].double()[..., None, :]).sum(-1))
    return torch.stack(ys, 1), S
