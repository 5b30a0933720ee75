"""Activation functions by their config.json names, plain (`act(x)`) and gated (`act(gate) * up`).

`gelu` is the exact (erf) GELU as transformers names it; `gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`
and `gelu_tanh` are its tanh approximation; `relu2` is squared ReLU (Primer, Nemotron); `quick_gelu` is
x * sigmoid(1.702 x); `situ` is K3's SiTU (archprobe.ops.situ, gated only); `swiglu_oss` is gpt-oss's
clamped GLU: gate clamped above at `limit`, up to [-limit, limit], gate * sigmoid(alpha * gate) * (up + 1).
`xielu` (arXiv 2411.13010, Apertus) has learned scalars and is a module, `XIELU`, owned by the MLP.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from archprobe.ops.situ import situ_glu

_TANH = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_tanh")
PLAIN = {
    "silu": F.silu, "swish": F.silu, "gelu": F.gelu, "relu": F.relu,
    "relu2": lambda x: F.relu(x).square(),
    "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
    **{name: (lambda x: F.gelu(x, approximate="tanh")) for name in _TANH},
}
ACTIVATIONS = tuple(PLAIN) + ("situ", "swiglu_oss", "xielu")
LEARNED = ("xielu",)   # activations with parameters of their own (a module, not a function)


class XIELU(nn.Module):
    """xIELU: x > 0: a_p x^2 + beta x; else (expm1(min(x, eps)) - x) a_n + beta x, with a_p = softplus(alpha_p)
    and a_n = beta + softplus(alpha_n); alpha_p, alpha_n [1] learned, beta and eps stored scalars (as the
    checkpoint keeps them: transformers' XIELUActivation's parameters and persistent buffers)."""

    def __init__(self, alpha_p: float = 0.8, alpha_n: float = 0.8, beta: float = 0.5, eps: float = -1e-6):
        super().__init__()
        self.alpha_p = nn.Parameter(torch.log(torch.expm1(torch.tensor([alpha_p]))))
        self.alpha_n = nn.Parameter(torch.log(torch.expm1(torch.tensor([alpha_n - beta]))))
        self.register_buffer("beta", torch.tensor(beta))
        self.register_buffer("eps", torch.tensor(eps))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a_p = F.softplus(self.alpha_p)
        a_n = self.beta + F.softplus(self.alpha_n)
        return torch.where(x > 0, a_p * x * x + self.beta * x,
                           (torch.expm1(torch.minimum(x, self.eps)) - x) * a_n + self.beta * x)


def plain(name: str):
    """act(x); raises ValueError for a gated-only activation or an unknown name."""
    if name not in PLAIN:
        raise ValueError(f"activation {name!r} has no non-gated form here (known: {sorted(PLAIN)})")
    return PLAIN[name]


def glu(name: str, situ_betas=(4.0, 25.0), limit: float = 7.0, alpha: float = 1.702):
    """(gate, up) -> hidden. The SiLU form multiplies in place over the fresh activation (one buffer less)."""
    if name in ("silu", "swish"):
        return lambda g, u: F.silu(g).mul_(u)
    if name == "situ":
        return lambda g, u: situ_glu(g, u, beta=situ_betas[0], linear_beta=situ_betas[1])
    if name == "swiglu_oss":
        def oss(g, u):
            g = g.clamp(max=limit)
            return g * torch.sigmoid(g * alpha) * (u.clamp(-limit, limit) + 1)
        return oss
    act = plain(name)
    return lambda g, u: act(g) * u
