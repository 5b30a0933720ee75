"""Memory horizons of linear-attention mixers and the rank an MLA KV up-projection uses.

A state decayed by a factor a = exp(g) per step (g <= 0, the log-decay KDA / Gated DeltaNet / Mamba-2
apply) keeps half of what it held after ln 2 / -g steps: that half-life, in tokens, is the horizon
reported. Per head, g is the mean log-decay over the head's channels and the sample's tokens (the
horizon of the geometric-mean decay), from the activations; where the gate is a function of its input
plus `dt_bias` only, the same at zero input ("at rest") is read from the weights alone:
Kimi Linear / GDN: g = -exp(A_log) * softplus(dt_bias); K3's bounded gate: -5 * sigmoid(exp(A_log) *
dt_bias); Mamba-2: -exp(A_log) * max(softplus(dt_bias), dt_min).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

RANK_ENERGY = 0.99   # the rank that keeps this share of the squared singular values


def half_life(log_decay: float) -> float | None:
    """Tokens until a state decayed by exp(log_decay) per step halves; None when nothing decays."""
    if not math.isfinite(log_decay) or log_decay >= 0:
        return None
    return math.log(2.0) / -log_decay


def heads_from_log_decay(g: torch.Tensor) -> list[float]:
    """Mean log-decay per head of g [B, T, H, K] (per channel) or [B, T, H] (per head)."""
    g = g.float()
    return g.mean(dim=(0, 1, 3) if g.dim() == 4 else (0, 1)).tolist()


def log_decay(module, x: torch.Tensor) -> torch.Tensor | None:
    """The log-decay a mixer applies to its input x [B, T, H]: [B, T, heads(, K)]; recomputed from the
    gate's own projection (a few rows of it), so the mixer's code is untouched."""
    name = type(module).__name__
    if name == "KimiDeltaAttention":
        return module.decay(x)
    if name == "GatedDeltaNet":
        if module.layout == "split":
            a = module.in_proj_a(x)
        else:
            B, T, _ = x.shape
            r = module.nv // module.nk
            a = module.in_proj_ba(x).view(B, T, module.nk, 2 * r)[..., r:].reshape(B, T, module.nv)
        return -module.A_log.float().exp() * F.softplus(a.float() + module.dt_bias.float())
    if name == "Mamba2Mixer":
        H = module.heads
        dt = F.linear(x, module.in_proj.weight[-H:])
        dt = F.softplus(dt.float() + module.dt_bias.float()).clamp(min=module.dt_min)
        return -module.A_log.float().exp() * dt
    return None


def at_rest(module) -> list[float] | None:
    """Per-head log-decay at zero gate input, from the weights alone, for the mixers whose gate allows it."""
    name = type(module).__name__
    with torch.no_grad():
        if name == "KimiDeltaAttention":
            a = module.A_log.float().reshape(-1)[: module.heads].exp()[:, None]
            f = module.dt_bias.float().reshape(module.heads, module.head_dim)
            g = module.gate_lower_bound * torch.sigmoid(a * f) if module.gate == "bounded" else -a * F.softplus(f)
            return g.mean(-1).tolist()
        if name == "GatedDeltaNet":
            return (-module.A_log.float().exp() * F.softplus(module.dt_bias.float())).tolist()
        if name == "Mamba2Mixer":
            dt = F.softplus(module.dt_bias.float()).clamp(min=module.dt_min)
            return (-module.A_log.float().exp() * dt).tolist()
    return None


def spectrum(weight: torch.Tensor) -> dict:
    """Singular values of a [out, rank] up-projection: the rank keeping RANK_ENERGY of the energy, and the
    effective rank exp(entropy of the normalised singular values)."""
    s = torch.linalg.svdvals(weight.float())
    e = s.pow(2)
    cum = torch.cumsum(e, 0) / e.sum().clamp_min(1e-30)
    p = s / s.sum().clamp_min(1e-30)
    nz = p[p > 0]
    return {"rank": int(min(weight.shape)), "rank_99": int((cum < RANK_ENERGY).sum()) + 1,
            "effective_rank": float(torch.exp(-(nz * nz.log()).sum())),
            "singular_values": [float(x) for x in (s / s[0].clamp_min(1e-30))[:64]]}
