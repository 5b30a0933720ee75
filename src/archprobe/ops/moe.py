"""Mixture of experts: routing, and two ways to run the chosen experts.

`moe_route` (spec/ops.md): scores from logits in float32 (sigmoid or softmax); selection on
score + bias when a selection bias is given, weights from the unbiased score; optional
renormalisation (+1e-20) and scaling. `moe_dense_reference` runs every expert on every token
(the plainest correct form); `moe_dispatch` sorts token slots by expert and runs each expert that has
tokens once on its contiguous run (no dense all-expert compute). Both call `expert_fn(x [n, L], e, scale
[n, 1])`, which returns scale * expert_e(x): an expert whose last projection is linear applies the routing
weight to its hidden, narrower than its output. Legend: T tokens, D width, E experts, F expert width, K top-k.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def moe_route(logits_TE: torch.Tensor, top_k: int, *, score: str = "sigmoid", bias=None, renormalize: bool = True,
              scale: float = 1.0, groups: int = 1, topk_groups: int = 1, experts: torch.Tensor | None = None,
              sparsemixer_eps: float = 0.01, bias_on_logits: bool = False):
    """Returns (weights [T, K] float32, experts [T, K] int64).

    With `groups` > 1 (DeepSeek-V3 group-limited routing), experts are chosen only inside the
    `topk_groups` groups whose two best (biased) scores sum highest. With `experts` given the choice
    is taken as is (validate's pinned routing) and only the weights are computed from these logits.
    `score="sparsemixer"` is PhiMoE's inference-time routing (`sparsemixer_route`); it neither renormalises
    nor uses a selection bias. `bias_on_logits`: the selection bias is added to the logits, not the scores
    (Kolibri: top-k of logits + bias, then the scores of those).
    """
    logits = logits_TE.float()
    if score == "sparsemixer":
        weights, experts = sparsemixer_route(logits, top_k, eps=sparsemixer_eps, experts=experts)
        return weights * scale, experts
    if score == "sigmoid":
        scores = torch.sigmoid(logits)
    elif score == "softmax":
        scores = torch.softmax(logits, dim=-1)
    else:
        raise ValueError(f"score must be 'sigmoid', 'softmax' or 'sparsemixer', not {score!r}")
    if experts is not None:
        weights = scores.gather(-1, experts)
        if renormalize:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return weights * scale, experts
    choice = scores if bias is None else (logits if bias_on_logits else scores) + bias.float()
    if groups > 1:
        T, E = choice.shape
        if top_k > topk_groups * (E // groups):
            raise ValueError(f"top_k {top_k} exceeds the {topk_groups} x {E // groups} experts of the chosen groups")
        group_scores = choice.view(T, groups, E // groups).topk(min(2, E // groups), dim=-1).values.sum(-1)
        keep = torch.zeros_like(group_scores, dtype=torch.bool)
        keep.scatter_(1, group_scores.topk(topk_groups, dim=-1).indices, True)
        choice = choice.masked_fill(~keep.repeat_interleave(E // groups, dim=1), float("-inf"))
    experts = torch.topk(choice, top_k, dim=-1, sorted=True).indices
    weights = scores.gather(-1, experts)
    if renormalize:
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
    return weights * scale, experts


def sparsemixer_route(logits_TE: torch.Tensor, top_k: int, *, eps: float, experts: torch.Tensor | None = None):
    """PhiMoE's sparsemixer at inference: pick the best remaining expert k times; its weight is its share of
    a softmax over the remaining logits s_j with (best - s_j) / max(|s_j|, best) <= 2 eps (the others are
    masked out). Returns (weights [T, K] float32, experts [T, K]); with `experts` given, those are the picks."""
    s = logits_TE.float()
    remaining = s
    weights, picks = [], []
    for j in range(top_k):
        if experts is None:
            best, idx = remaining.max(dim=-1, keepdim=True)
        else:
            idx = experts[:, j:j + 1]
            best = remaining.gather(-1, idx)
        out_of_band = (best - s) / s.abs().clamp(min=best) > 2 * eps
        gates = torch.softmax(remaining.masked_fill(out_of_band, float("-inf")), dim=-1)
        weights.append(gates.gather(-1, idx))
        picks.append(idx)
        remaining = remaining.scatter(-1, idx, float("-inf"))
    return torch.cat(weights, dim=-1), torch.cat(picks, dim=-1)


ExpertFn = Callable[[torch.Tensor, int, torch.Tensor], torch.Tensor]   # (x [n, L], e, scale [n, 1]) -> [n, L']


def glu_expert(activation: Callable) -> Callable:
    """Expert e on tokens x [n, L]: down_e(act(gate_e x, up_e x)) with stacked weights, times `scale`."""

    def run(x, w_gate_EFL, w_up_EFL, w_down_ELF, e, scale=None):
        h = activation(x @ w_gate_EFL[e].T, x @ w_up_EFL[e].T)
        return (h if scale is None else h * scale) @ w_down_ELF[e].T

    return run


def moe_dense_reference(x_TL, weights_TK, experts_TK, expert_fn: ExpertFn, num_experts: int):
    """Every expert on every token, combined with the routing weights (fp32 accumulation)."""
    T = x_TL.shape[0]
    full = torch.zeros(T, num_experts, dtype=torch.float32, device=x_TL.device)
    full.scatter_(1, experts_TK, weights_TK.float())
    out = None
    for e in range(num_experts):
        y = expert_fn(x_TL, e, full[:, e:e + 1]).float()
        out = y if out is None else out + y
    return out.to(x_TL.dtype)


def moe_dispatch(x_TL, weights_TK, experts_TK, expert_fn: ExpertFn, num_experts: int):
    """Sort (token, slot) pairs by expert, then run each expert once on its contiguous run of tokens
    (applying its routing weights) and scatter-add the result back. Per-expert gathers stay small, so no
    [T*K, width] buffer is ever allocated (fresh large buffers cost more in page faults than the copies)."""
    T, K = experts_TK.shape
    flat_e = experts_TK.reshape(-1)
    order = torch.argsort(flat_e, stable=True)
    token_of = order // K
    w = weights_TK.reshape(-1).index_select(0, order).float().unsqueeze(-1)
    counts = torch.bincount(flat_e, minlength=num_experts).tolist()
    out = None
    start = 0
    for e, n in enumerate(counts):
        if n:
            rows = token_of[start:start + n]
            ye = expert_fn(x_TL.index_select(0, rows), e, w[start:start + n]).float()
            if out is None:
                out = torch.zeros(T, ye.shape[-1], dtype=torch.float32, device=x_TL.device)
            out.index_add_(0, rows, ye)
        start += n
    if out is None:
        out = torch.zeros(T, x_TL.shape[-1], dtype=torch.float32, device=x_TL.device)
    return out.to(x_TL.dtype)


def routing_stats(experts_TK: torch.Tensor, weights_TK: torch.Tensor, num_experts: int) -> dict:
    """Per-expert load, max/mean imbalance and the entropy of the load distribution (nats)."""
    load = torch.bincount(experts_TK.reshape(-1), minlength=num_experts).float()
    p = load / load.sum().clamp_min(1)
    entropy = -(p[p > 0] * p[p > 0].log()).sum().item()
    mean = load.mean().item()
    return {"load": load.long().tolist(), "imbalance": (load.max().item() / mean) if mean else 0.0,
            "entropy": entropy, "max_entropy": float(torch.log(torch.tensor(float(num_experts))))}
