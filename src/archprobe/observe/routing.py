"""Routing statistics of one MoE layer from the experts it chose per token.

Switching as the Mixtral paper (arXiv 2401.04088, section 5) measures it: over consecutive token pairs
of one text, the top-1 repeat rate (both tokens' first choice is the same expert) and the top-k overlap
rate (the two tokens' top-k sets share at least one expert), each beside what a uniform random router
gives: 1/E and 1 - C(E-k, k) / C(E, k). `switch_rate` is the share of pairs whose whole set changes.
Distinct experts per block of tokens is what an engine must read for that block. An expert with no
selection is called dead when the router could not have picked it (its selection scores, bias included,
trail the k-th best by more than their ordinary spread on every token: `reachable`), or, without scores,
when a uniform router would have selected every expert on this many tokens with near certainty; otherwise
it is listed as unselected (a random-weight router on a short sample leaves some experts out, none dead).
"""

from __future__ import annotations

import math

import torch

BLOCK = 16                  # tokens per block for distinct-experts-per-block
DEAD_CONFIDENCE = 1e-3      # expected number of unselected experts under uniform routing we tolerate


def random_baselines(experts: int, top_k: int) -> dict:
    overlap = 1.0 - (math.comb(experts - top_k, top_k) / math.comb(experts, top_k) if experts - top_k >= top_k
                     else 0.0)
    return {"top1_repeat": 1.0 / experts, "topk_overlap": overlap}


def expected_unselected(experts: int, top_k: int, tokens: int) -> float:
    """Experts a uniform router (k distinct of E per token) leaves unselected on `tokens` tokens, on average."""
    return experts * (1.0 - top_k / experts) ** tokens


def _pairs(n: int, starts) -> torch.Tensor:
    """Indices t with (t, t+1) inside one text (texts begin at `starts`)."""
    keep = torch.ones(max(0, n - 1), dtype=torch.bool)
    for s in starts:
        if 0 < s <= n - 1:
            keep[s - 1] = False
    return torch.nonzero(keep).flatten()


def reachable(scores_NE: torch.Tensor, top_k: int) -> list[bool]:
    """Per expert: could the router have picked it on this sample? It could unless, on every token, it
    ranks below the min(E - 1, 2k) best selection scores AND trails the k-th best score by more than the
    ordinary spread of that token's scores (best minus median, its largest value over the sample): an
    expert kept out by a margin the other experts' scores never span, as a large negative selection bias
    or a router row pointing away from every input does. A random router's unlucky expert is close on
    some token and stays merely unselected."""
    s = scores_NE.float().reshape(-1, scores_NE.shape[-1])
    s = s[torch.isfinite(s).all(-1)]
    N, E = s.shape
    if not N:
        return [True] * E
    near = s.topk(max(top_k, min(E - 1, 2 * top_k)), dim=-1).indices
    hit = torch.zeros(E, dtype=torch.bool)
    hit[near.flatten()] = True
    kth = s.topk(top_k, dim=-1).values[:, -1:]
    spread = float((s.max(-1).values - s.median(-1).values).max())
    close = ((kth - s) <= spread).any(0)
    return (hit | close).tolist()


def routing_stats(experts_NK: torch.Tensor, num_experts: int, starts=(0,), block: int = BLOCK,
                  reach: list[bool] | None = None) -> dict:
    """Load, imbalance, entropy, switching and distinct-per-block for choices [N tokens, k]; `starts` are
    the token offsets where a new text begins (pairs across texts are not counted)."""
    experts_NK = experts_NK.reshape(-1, experts_NK.shape[-1]).long()
    N, k = experts_NK.shape
    load = torch.bincount(experts_NK.flatten(), minlength=num_experts)[:num_experts]
    p = load.double() / max(1, int(load.sum()))
    nz = p[p > 0]
    mean = N * k / num_experts
    idx = _pairs(N, starts)
    a, b = experts_NK[idx], experts_NK[idx + 1]
    pairs = len(idx)
    top1 = float((a[:, 0] == b[:, 0]).double().mean()) if pairs else None
    shared = (a[:, :, None] == b[:, None, :]).any(-1)          # [pairs, k]: a's expert j is in b's set
    overlap = float(shared.any(-1).double().mean()) if pairs else None
    switch = float((~shared.all(-1)).double().mean()) if pairs else None
    distinct = [len(torch.unique(experts_NK[s:s + block])) for s in range(0, N - block + 1, block)]
    zero = [int(e) for e in torch.nonzero(load == 0).flatten()]
    if reach is not None:
        dead = [e for e in zero if not reach[e]]
    else:
        dead = zero if expected_unselected(num_experts, k, N) < DEAD_CONFIDENCE else []
    return {
        "experts": num_experts, "top_k": k, "tokens": N,
        "load": [int(x) for x in load],
        "dead": dead,
        "unselected": [e for e in zero if e not in dead],
        "imbalance": float(load.max()) / mean if mean else 0.0,
        "entropy": float(-(nz * nz.log()).sum()),
        "entropy_max": math.log(num_experts),
        "switch_rate": switch,
        "top1_repeat": top1, "topk_overlap": overlap,
        "random": random_baselines(num_experts, k),
        "distinct_per_block": (sum(distinct) / len(distinct)) if distinct else None,
        "block": block,
    }
