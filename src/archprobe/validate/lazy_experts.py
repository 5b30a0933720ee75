"""An expert bank that reads only the experts the router picked, straight from the shard, and the MoE
that routes into it.

A K3 MoE layer holds 896 experts (15.7 GB of MXFP4); a token uses 16 of them (280 MB). `LazyExpertBank`
keeps only each expert's tensor names and, when `moe_dispatch` calls `run(x, e, scale)`, multiplies by
expert e's matrices read a row-chunk at a time (MXFP4 dequantized on the fly, validate/streamed_matmul.py),
so nothing of an unrouted expert is ever read. `LazyMoE` is archprobe.nn's MoE forward (router on the
full-width token, latent down-projection, dispatch, latent norm, up-projection, shared experts) around it.

Routing is deterministic: experts are chosen by a stable descending sort of score + selection bias, so
among exactly equal scores the lower expert index wins. Real weights essentially never tie (the choice
then equals `torch.topk`'s, which is what the eager path uses); a zero-data checkpoint ties everywhere
(every sigmoid score is 0.5) and then routes every token to experts 0..k-1 of every layer, and those
experts' bytes are still read and multiplied for real. Group-limited routing (groups > 1) keeps
`ops.moe.moe_route`'s own choice.
"""

from __future__ import annotations

import torch
from torch import nn

from archprobe.nn.activations import glu, plain
from archprobe.ops.moe import moe_dispatch, moe_route
from archprobe.validate.streamed_matmul import dense_matmul, mxfp4_matmul

PROJECTIONS = ("gate", "up", "down")


class LazyExpertBank:
    """Expert e -> its stored matrices: {"gate"|"up"|"down": ("mxfp4", packed, scale) | ("dense", name)}."""

    def __init__(self, reader, experts: dict[int, dict[str, tuple]], activation: str, gated: bool,
                 situ_betas=(4.0, 25.0), glu_limit: float = 7.0):
        self.reader, self.experts, self.gated = reader, experts, gated
        self.act = glu(activation, situ_betas, glu_limit) if gated else plain(activation)
        self.used: list[int] = []    # experts run since the last `take_used()`, in call order

    def matmul(self, x: torch.Tensor, where: tuple) -> torch.Tensor:
        if where[0] == "mxfp4":
            return mxfp4_matmul(x, self.reader, where[1], where[2])
        return dense_matmul(x, self.reader, where[1])

    def run(self, x: torch.Tensor, e: int, scale: torch.Tensor | None = None) -> torch.Tensor:
        """scale * expert_e(x) for x [n, in] (the `ops.moe` expert function contract)."""
        self.used.append(e)
        p = self.experts[e]
        if self.gated:
            h = self.act(self.matmul(x, p["gate"]), self.matmul(x, p["up"]))
        else:
            h = self.act(self.matmul(x, p["up"]))
        if scale is not None:
            h = h * scale.to(h.dtype)
        return self.matmul(h, p["down"])

    def names(self, e: int) -> list[str]:
        """Every tensor expert e reads (for counting the bytes a token needs from the headers)."""
        return [n for where in self.experts[e].values() for n in where[1:]]

    def take_used(self) -> list[int]:
        used, self.used = self.used, []
        return used


def stable_choice(scores_TE: torch.Tensor, top_k: int) -> torch.Tensor:
    """The top-k experts per token [T, K], highest first; exact ties go to the lower expert index."""
    return torch.sort(scores_TE, dim=-1, descending=True, stable=True).indices[:, :top_k]


class LazyMoE(nn.Module):
    """archprobe.nn's MoE forward with a lazy bank and a streamed router (`router(x) -> fp32 logits`)."""

    def __init__(self, moe: nn.Module, bank: LazyExpertBank, router: nn.Module, selection_bias: torch.Tensor | None):
        super().__init__()
        self.moe = moe
        self.router = router
        self.bank = bank
        self.selection_bias = selection_bias
        self.last_experts: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, pin_input: torch.Tensor | None = None) -> torch.Tensor:
        if pin_input is not None:
            raise ValueError("the lazy path does not pin routing")
        m = self.moe
        shape = x.shape
        xf = x.reshape(-1, shape[-1])
        z, r_in = m.expert_input(xf)
        logits = self.router(r_in).float()
        chosen = None
        if m.groups == 1:
            scores = torch.sigmoid(logits) if m.score == "sigmoid" else torch.softmax(logits, dim=-1)
            if self.selection_bias is not None:
                scores = scores + self.selection_bias.float()
            chosen = stable_choice(scores, m.top_k)
        weights, experts = moe_route(logits, m.top_k, score=m.score, bias=self.selection_bias,
                                     renormalize=m.renormalize, scale=m.scale, groups=m.groups,
                                     topk_groups=m.topk_groups, experts=chosen)
        self.last_experts = experts.detach()
        y = moe_dispatch(z, weights, experts, self.bank.run, m.num_experts)
        return m.combine_output(y, xf).reshape(shape)
