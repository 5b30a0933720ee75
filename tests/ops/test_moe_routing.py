"""Routing forms the card names, against transformers' own functions: PhiMoE's sparsemixer, and the
claim the family table relies on (a softmax over the top-k logits is the renormalised softmax)."""

from __future__ import annotations

import pytest
import torch

from archprobe.ops.moe import moe_route, sparsemixer_route


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sparsemixer_matches_transformers_phimoe(eps, seed):
    phimoe = pytest.importorskip("transformers.models.phimoe.modeling_phimoe")
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(64, 8, generator=g) * 3
    logits[:8, 1] = logits[:8, 0]          # exact ties at the top
    logits[8:16] = logits[8:16].abs() * 0.01 + 2.0   # many experts inside the band
    want_w, want_e = phimoe.sparsemixer(logits, jitter_eps=eps, training=False, top_k=2)
    got_w, got_e = sparsemixer_route(logits, 2, eps=eps)
    assert torch.equal(got_e, want_e)
    assert torch.allclose(got_w, want_w.float(), rtol=1e-6, atol=1e-7)
    w, e = moe_route(logits, 2, score="sparsemixer", sparsemixer_eps=eps, scale=2.0)
    assert torch.equal(e, want_e) and torch.allclose(w, 2.0 * want_w.float(), rtol=1e-6, atol=1e-7)


def test_sparsemixer_with_pinned_experts_gives_the_same_weights():
    logits = torch.randn(32, 6, generator=torch.Generator().manual_seed(3))
    w, e = sparsemixer_route(logits, 2, eps=0.2)
    pinned_w, pinned_e = moe_route(logits, 2, score="sparsemixer", sparsemixer_eps=0.2, experts=e)
    assert torch.equal(pinned_e, e) and torch.allclose(pinned_w, w)


def test_softmax_over_the_top_k_logits_is_the_renormalised_softmax():
    """aria / granitemoe / gpt-oss / jetmoe take top-k on the logits then a softmax over those k; the card
    calls that `softmax` + `renormalize`."""
    logits = torch.randn(50, 16, generator=torch.Generator().manual_seed(4)) * 4
    top, idx = logits.topk(4, dim=-1)
    w, e = moe_route(logits, 4, score="softmax", renormalize=True)
    assert torch.equal(e, idx)
    assert torch.allclose(w, torch.softmax(top, dim=-1), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("renormalize", [False, True])
def test_bias_on_logits_is_kolibris_router(renormalize):
    """Kolibri picks the top-k of logits + bias (not sigmoid + bias), then weighs by the sigmoid."""
    mod = pytest.importorskip("transformers.models.kolibri1.modeling_kolibri1")
    from transformers import Kolibri1Config

    cfg = Kolibri1Config(hidden_size=16, num_local_experts=8, num_experts_per_tok=2, norm_topk_prob=renormalize)
    router = mod.Kolibri1TopKRouter(cfg)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        router.weight.copy_(torch.randn(8, 16, generator=g))
        router.e_score_correction_bias.copy_(torch.randn(8, generator=g) * 2)
    x = torch.randn(40, 16, generator=g)
    logits, want_w, want_e = router(x)
    bias = router.e_score_correction_bias
    w, e = moe_route(logits, 2, score="sigmoid", bias=bias, renormalize=renormalize, bias_on_logits=True)
    assert torch.equal(e.sort(-1).values, want_e.sort(-1).values)
    order_got, order_want = e.argsort(-1), want_e.argsort(-1)
    assert torch.allclose(w.gather(-1, order_got), want_w.float().gather(-1, order_want), rtol=1e-6, atol=1e-7)
    _, on_scores = moe_route(logits, 2, score="sigmoid", bias=bias, renormalize=renormalize)
    assert not torch.equal(on_scores.sort(-1).values, want_e.sort(-1).values)   # the switch matters here
