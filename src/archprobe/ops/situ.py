"""SiTU-GLU, K3's FFN activation (spec/kimi-k3.md section 2.1(d)):

    SiTU-GLU(g, u) = [beta * tanh(g / beta) * sigmoid(g)] * [linear_beta * tanh(u / linear_beta)]

The sigmoid takes the uncapped g. Both betas infinite: SwiGLU. |output| <= beta * linear_beta.
"""

from __future__ import annotations

import math

import torch


def situ_glu(gate: torch.Tensor, up: torch.Tensor, *, beta: float = 4.0, linear_beta: float = 25.0) -> torch.Tensor:
    dtype = gate.dtype
    g, u = gate.float(), up.float()
    capped_g = g if math.isinf(beta) else beta * torch.tanh(g / beta)
    capped_u = u if math.isinf(linear_beta) else linear_beta * torch.tanh(u / linear_beta)
    return (capped_g * torch.sigmoid(g) * capped_u).to(dtype)
