"""The mixture-of-attention mixer against transformers' JetMoeAttention (its eager path), weights copied
by name from the upstream module."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from archprobe.nn.moa import MixtureOfAttention  # noqa: E402
from archprobe.nn.rope import Rope  # noqa: E402


@pytest.mark.parametrize("top_k", [1, 2])
def test_moa_matches_jetmoe_attention(top_k):
    from transformers import JetMoeConfig
    from transformers.models.jetmoe.modeling_jetmoe import JetMoeAttention, JetMoeRotaryEmbedding

    cfg = JetMoeConfig(hidden_size=64, num_key_value_heads=2, kv_channels=16, num_local_experts=4,
                       num_experts_per_tok=top_k, num_attention_heads=2 * top_k, max_position_embeddings=64)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    up = JetMoeAttention(cfg, 0).eval()
    with torch.no_grad():
        for p in up.parameters():
            p.copy_(torch.randn_like(p) * p.shape[-1] ** -0.5)
    ours = MixtureOfAttention(64, 4, top_k, 2, 16, Rope(cfg.rope_parameters["rope_theta"], 16)).eval()
    with torch.no_grad():
        ours.router.weight.copy_(up.experts.router.layer.weight)
        ours.q_experts.copy_(up.experts.input_linear.weight)
        ours.o_experts.copy_(up.experts.output_linear.weight)
        ours.kv_proj.weight.copy_(up.kv_proj.weight)
        ours.out.bias.copy_(up.experts.bias)
    x = torch.randn(2, 7, 64, generator=torch.Generator().manual_seed(1))
    cos, sin = JetMoeRotaryEmbedding(cfg)(x, torch.arange(7)[None].expand(2, -1))
    mask = torch.full((7, 7), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        want = up(x, attention_mask=mask, position_embeddings=(cos, sin))[0]
        got, _ = ours(x)
        # step by step with the cache gives the same outputs
        first, cache = ours(x[:, :4], use_cache=True)
        rest, _ = ours(x[:, 4:], cache=cache)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)
    assert torch.allclose(torch.cat([first, rest], 1), got, rtol=1e-5, atol=1e-5)
