"""Mixture-of-experts FFNs: token-space MoE, LatentMoE (routing in hidden or latent space), shared
experts, and the dense MLP they are built from.

* MoE (DeepSeek-V3, Kimi Linear): router on x; top-k experts on x; plus shared experts on x.
* LatentMoE, routing in hidden space (Nemotron-3 Super, K3 "Stable" LatentMoE): router on x;
  z = down(x) (latent L < H); experts on z; sum; [RMSNorm_L (K3)]; up(sum) back to H; shared on x.
* LatentMoE, routing in latent space (the design notes' hypothesis): z = down(x); router on z.
Experts are stored stacked (gate and up fused as [E, 2F, L], down [E, L, F]) so dispatch needs no
per-call copy and one matmul serves gate and up; loading a checkpoint's per-expert tensors stacks and
fuses them (`nn.loading.sanitize`). Expert
computation sorts tokens by expert (`ops.moe.moe_dispatch`); `dispatch=False` uses the dense
all-expert reference instead. `last_routing` keeps the latest choice for `routing_stats()`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from archprobe.nn.activations import ACTIVATIONS, LEARNED, XIELU, glu, plain
from archprobe.nn.norm import RMSNorm, make_norm
from archprobe.ops.moe import moe_dense_reference, moe_dispatch, moe_route, routing_stats

__all__ = ["ACTIVATIONS", "MLP", "ExpertBank", "Router", "MoE"]

class MLP(nn.Module):
    """Dense FFN: down(act(gate x) * up x) when gated, down(act(up x)) otherwise; `bias` on all three."""

    def __init__(self, hidden: int, width: int, activation: str = "silu", gated: bool = True, situ_betas=(4.0, 25.0),
                 bias: bool = False, glu_limit: float = 7.0, sub_norm: str | None = None, norm_eps: float = 1e-6):
        """`sub_norm`: a norm of that kind on the inner width before down_proj (BitNet's ffn_sub_norm)."""
        super().__init__()
        if sub_norm:
            self.sub_norm = make_norm(sub_norm, width, norm_eps)
        if gated:
            self.gate_proj = nn.Linear(hidden, width, bias=bias)
        self.up_proj = nn.Linear(hidden, width, bias=bias)
        self.down_proj = nn.Linear(width, hidden, bias=bias)
        if activation in LEARNED:      # a module with parameters: loaded as mlp.act_fn.*
            self.act_fn = XIELU()
            self.act = (lambda g, u: self.act_fn(g) * u) if gated else (lambda h: self.act_fn(h))
        else:
            self.act = glu(activation, situ_betas, glu_limit) if gated else plain(activation)
        self.gated = gated

    def forward(self, x):
        h = self.act(self.gate_proj(x), self.up_proj(x)) if self.gated else self.act(self.up_proj(x))
        return self.down_proj(self.sub_norm(h) if hasattr(self, "sub_norm") else h)


class ExpertBank(nn.Module):
    """E experts, stacked: gate_up_proj [E, 2F, L] (gate rows first; up_proj [E, F, L] when not gated),
    down_proj [E, L, F]. Gate and up share one matmul per expert.

    `storage="mxfp4"` keeps the experts as stored (compressed-tensors MXFP4: `*_packed` U8 [E, out, in/2]
    and `*_scale` U8 [E, out, in/32] buffers) and dequantizes an expert only when tokens are routed to it,
    so a streamed MoE layer costs its packed size, not its float size.
    """

    def __init__(self, num_experts: int, in_width: int, width: int, activation: str, gated: bool,
                 situ_betas=(4.0, 25.0), storage: str = "dense", bias: bool = False, glu_limit: float = 7.0):
        super().__init__()
        if storage not in ("dense", "mxfp4"):
            raise ValueError(f"storage must be 'dense' or 'mxfp4', not {storage!r}")
        names = (["gate_up_proj"] if gated else ["up_proj"]) + ["down_proj"]
        shapes = [((2 if gated else 1) * width, in_width), (in_width, width)]
        for name, (rows, cols) in zip(names, shapes, strict=True):
            if storage == "dense":
                setattr(self, name, nn.Parameter(torch.randn(num_experts, rows, cols) * cols ** -0.5))
            else:
                self.register_buffer(name + "_packed", torch.zeros(num_experts, rows, cols // 2, dtype=torch.uint8))
                self.register_buffer(name + "_scale", torch.zeros(num_experts, rows, cols // 32, dtype=torch.uint8))
        if bias:   # gpt-oss: gate_up_proj_bias [E, 2F], down_proj_bias [E, L]
            self.gate_up_proj_bias = nn.Parameter(torch.zeros(num_experts, shapes[0][0]))
            self.down_proj_bias = nn.Parameter(torch.zeros(num_experts, in_width))
        self.gated, self.num_experts, self.width, self.storage = gated, num_experts, width, storage
        self.has_bias = bias
        self.act = glu(activation, situ_betas, glu_limit) if gated else plain(activation)

    def weight(self, name: str, e: int, dtype: torch.dtype) -> torch.Tensor:
        if self.storage == "dense":
            return getattr(self, name)[e]
        from archprobe.ops.quant import dequantize_mxfp4

        return dequantize_mxfp4(getattr(self, name + "_packed")[e], getattr(self, name + "_scale")[e], dtype=dtype)

    def run(self, x: torch.Tensor, e: int, scale: torch.Tensor | None = None) -> torch.Tensor:
        """Expert e on x [n, in], times scale [n, 1] (the routing weights) when given: applied to the
        hidden, which down_proj (linear, no bias) carries to the output on fewer columns."""
        b_in = self.gate_up_proj_bias[e] if self.has_bias else None
        if self.gated:  # F.linear: PyTorch's linear path is faster than `x @ w.T` on CPU (~15% measured)
            gate, up = F.linear(x, self.weight("gate_up_proj", e, x.dtype), b_in).split(self.width, dim=-1)
            h = self.act(gate, up)
        else:
            h = self.act(F.linear(x, self.weight("up_proj", e, x.dtype), b_in))
        if self.has_bias:   # the output bias is routed too: scale the output, not the hidden
            y = F.linear(h, self.weight("down_proj", e, x.dtype), self.down_proj_bias[e])
            return y if scale is None else y * scale.to(y.dtype)
        if scale is not None:
            h = h.mul_(scale.to(h.dtype))   # h is the activation's fresh output
        return F.linear(h, self.weight("down_proj", e, x.dtype))


class Router(nn.Module):
    """`gate.weight` [E, in], the selection bias `gate.e_score_correction_bias` [E] (float32, chooses
    experts but does not weigh them) and, with `logit_bias`, a plain linear bias `gate.bias` (gpt-oss)."""

    def __init__(self, in_width: int, num_experts: int, bias: bool, logit_bias: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(num_experts, in_width) * in_width ** -0.5)
        if bias:
            self.e_score_correction_bias = nn.Parameter(torch.zeros(num_experts), requires_grad=False)
        if logit_bias:
            self.bias = nn.Parameter(torch.zeros(num_experts))

    def forward(self, x):
        b = getattr(self, "bias", None)
        return F.linear(x.float(), self.weight.float(), None if b is None else b.float())


class MoE(nn.Module):
    def __init__(self, hidden: int, num_experts: int, top_k: int, expert_width: int, *, activation: str = "silu",
                 gated: bool = True, score: str = "sigmoid", router_bias: bool = True, renormalize: bool = True,
                 scale: float = 1.0, groups: int = 1, topk_groups: int = 1, shared_width: int | None = None,
                 latent_size: int | None = None, routing_space: str = "hidden", latent_norm: bool = False,
                 latent_names: tuple[str, str, str] = ("routed_expert_down_proj", "routed_expert_up_proj",
                                                       "routed_expert_norm"),
                 situ_betas=(4.0, 25.0), norm_eps: float = 1e-5, dispatch: bool = True,
                 expert_storage: str = "dense", shared_gate: bool = False, router_logit_bias: bool = False,
                 expert_bias: bool = False, group_score: str = "top2_sum", glu_limit: float = 7.0,
                 shared_bias: bool = False, weight_on: str = "output", sparsemixer_eps: float = 0.01,
                 shared_combine: str = "sum", bias_on_logits: bool = False, out_bias: bool = False):
        """`shared_gate`: Qwen3-Next's single `shared_expert` scaled by sigmoid(`shared_expert_gate` x).
        `group_score`: how group-limited routing ranks groups, `top2_sum` (DeepSeek-V3) or `max`
        (DeepSeek-V2's group_limited_greedy). `router_logit_bias`/`expert_bias`: gpt-oss's biases.
        `weight_on="input"`: the routing weight scales the expert's input, expert(w x) (Llama 4), not its
        output. `score="sparsemixer"` (PhiMoE) uses `sparsemixer_eps` (the config's router_jitter_noise).
        `shared_combine="average"`: (routed + shared) / 2 (Cohere2-MoE), not their sum. `bias_on_logits`:
        the selection bias is added to the router logits rather than to the scores (Kolibri). `out_bias`: a
        bias [H] (`out.bias`) added to the experts' sum (JetMoE)."""
        super().__init__()
        if weight_on not in ("output", "input"):
            raise ValueError(f"weight_on must be 'output' or 'input', not {weight_on!r}")
        if shared_combine not in ("sum", "average"):
            raise ValueError(f"shared_combine must be 'sum' or 'average', not {shared_combine!r}")
        self.weight_on, self.sparsemixer_eps, self.shared_combine = weight_on, sparsemixer_eps, shared_combine
        self.bias_on_logits = bias_on_logits
        if out_bias:
            self.out = nn.Module()
            self.out.bias = nn.Parameter(torch.zeros(hidden))
        if routing_space not in ("hidden", "latent"):
            raise ValueError(f"routing_space must be 'hidden' or 'latent', not {routing_space!r}")
        if routing_space == "latent" and not latent_size:
            raise ValueError("routing_space='latent' needs latent_size")
        L = latent_size or hidden
        self.top_k, self.score, self.renormalize, self.scale = top_k, score, renormalize, scale
        self.groups, self.topk_groups, self.dispatch = groups, topk_groups, dispatch
        self.routing_space, self.latent_names = routing_space, latent_names
        self.num_experts = num_experts
        if group_score not in ("top2_sum", "max"):
            raise ValueError(f"group_score must be 'top2_sum' or 'max', not {group_score!r}")
        self.group_score = group_score
        self.gate = Router(L if routing_space == "latent" else hidden, num_experts, router_bias, router_logit_bias)
        self.experts = ExpertBank(num_experts, L, expert_width, activation, gated, situ_betas, expert_storage,
                                  expert_bias, glu_limit)
        if latent_size:
            setattr(self, latent_names[0], nn.Linear(hidden, latent_size, bias=False))
            setattr(self, latent_names[1], nn.Linear(latent_size, hidden, bias=False))
            if latent_norm:
                setattr(self, latent_names[2], RMSNorm(latent_size, eps=norm_eps))
        self.latent_size, self.use_latent_norm = latent_size, latent_norm
        self.shared_gated = bool(shared_width and shared_gate)
        if self.shared_gated:
            self.shared_expert = MLP(hidden, shared_width, activation, gated, situ_betas, shared_bias, glu_limit)
            self.shared_expert_gate = nn.Linear(hidden, 1, bias=False)
        elif shared_width:
            self.shared_experts = MLP(hidden, shared_width, activation, gated, situ_betas, shared_bias, glu_limit)
        self.last_routing: tuple[torch.Tensor, torch.Tensor] | None = None
        # `pinned_flips`: how many tokens the last pinned forward chose differently from its own input
        self.pinned_flips = 0

    def route(self, r_in: torch.Tensor, experts: torch.Tensor | None = None):
        bias = getattr(self.gate, "e_score_correction_bias", None)
        logits = self.gate(r_in)
        if experts is None and self.groups > 1 and self.group_score == "max":
            experts = self._group_max_choice(logits, bias)
        return moe_route(logits, self.top_k, score=self.score, bias=bias, renormalize=self.renormalize,
                         scale=self.scale, groups=self.groups, topk_groups=self.topk_groups, experts=experts,
                         sparsemixer_eps=self.sparsemixer_eps, bias_on_logits=self.bias_on_logits)

    def _group_max_choice(self, logits: torch.Tensor, bias) -> torch.Tensor:
        """DeepSeek-V2's group-limited greedy choice: keep the `topk_groups` groups with the highest
        single (biased) score, then the top-k experts inside them."""
        s = torch.softmax(logits.float(), -1) if self.score == "softmax" else torch.sigmoid(logits.float())
        if bias is not None:
            s = s + bias.float()
        T, E = s.shape
        best = s.view(T, self.groups, E // self.groups).amax(-1)
        keep = torch.zeros_like(best, dtype=torch.bool).scatter_(1, best.topk(self.topk_groups, -1).indices, True)
        s = s.masked_fill(~keep.repeat_interleave(E // self.groups, dim=1), 0.0)
        return s.topk(self.top_k, -1, sorted=True).indices

    def _pinned_experts(self, own_r_in: torch.Tensor, pin_input: torch.Tensor) -> torch.Tensor:
        pin = pin_input.reshape(-1, pin_input.shape[-1]).to(own_r_in.dtype)
        if self.latent_size and self.routing_space == "latent":
            pin = getattr(self, self.latent_names[0])(pin)
        _, forced = self.route(pin)
        _, own = self.route(own_r_in)
        self.pinned_flips = int((forced.sort(-1).values != own.sort(-1).values).any(-1).sum())
        return forced

    def forward(self, x: torch.Tensor, pin_input: torch.Tensor | None = None) -> torch.Tensor:
        """`pin_input` (validate --pin-routing): the reference's input to this block; experts are chosen
        from it so a last-bit difference upstream cannot flip a choice; weights still come from x."""
        shape = x.shape
        xf = x.reshape(-1, shape[-1])
        z, r_in = self.expert_input(xf)
        forced = self._pinned_experts(r_in, pin_input) if pin_input is not None else None
        weights, experts = self.route(r_in, experts=forced)
        self.last_routing = (experts.detach(), weights.detach())
        run = moe_dispatch if self.dispatch else moe_dense_reference
        y = run(z, weights, experts, self.expert_fn, self.num_experts)
        return self.combine_output(y, xf).reshape(shape)

    def expert_fn(self, x: torch.Tensor, e: int, scale: torch.Tensor | None = None) -> torch.Tensor:
        """Expert e on x [n, in] with its routing weights `scale` [n, 1] on the output, or on the input."""
        if self.weight_on == "input" and scale is not None:
            return self.experts.run(x * scale.to(x.dtype), e)
        return self.experts.run(x, e, scale)

    def expert_input(self, xf: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(what the experts read: x or its latent down-projection, what the router reads) for x [N, hidden]."""
        z = getattr(self, self.latent_names[0])(xf) if self.latent_size else xf
        return z, (z if self.routing_space == "latent" else xf)

    def combine_output(self, y: torch.Tensor, xf: torch.Tensor) -> torch.Tensor:
        """The routed experts' sum `y` back to the hidden width (latent norm, up-projection) plus the shared
        experts on x."""
        if self.latent_size:
            if self.use_latent_norm:
                y = getattr(self, self.latent_names[2])(y)
            y = getattr(self, self.latent_names[1])(y)
        if hasattr(self, "out"):
            y = y + self.out.bias
        if hasattr(self, "shared_experts"):
            y = y + self.shared_experts(xf)
        elif self.shared_gated:
            y = y + torch.sigmoid(self.shared_expert_gate(xf)) * self.shared_expert(xf)
        else:
            return y
        return y / 2 if self.shared_combine == "average" else y

    def routing_stats(self) -> dict:
        if self.last_routing is None:
            raise RuntimeError("no forward pass yet")
        experts, weights = self.last_routing
        return routing_stats(experts, weights, self.num_experts)
