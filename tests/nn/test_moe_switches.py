"""nn.moe's switches against transformers' own blocks, weights copied by hand from the upstream module:
Llama 4's MoE (sigmoid of the top-k logits, the routing weight applied to the expert's *input*, one
shared expert), and the same block built with weights on the output (which must then differ)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from archprobe.nn.moe import MoE  # noqa: E402


def _llama4_pair(top_k: int):
    from transformers import Llama4TextConfig
    from transformers.models.llama4.modeling_llama4 import Llama4TextMoe

    cfg = Llama4TextConfig(hidden_size=32, intermediate_size=24, intermediate_size_mlp=64, num_local_experts=4,
                           num_experts_per_tok=top_k, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                           num_hidden_layers=1, vocab_size=64)
    torch.manual_seed(0)
    up = Llama4TextMoe(cfg).eval()
    with torch.no_grad():
        for p in up.parameters():
            p.copy_(torch.randn_like(p) * p.shape[-1] ** -0.5)
    return cfg, up


def _ours(cfg, up, weight_on: str) -> MoE:
    ours = MoE(cfg.hidden_size, cfg.num_local_experts, cfg.num_experts_per_tok, cfg.intermediate_size,
               score="sigmoid", router_bias=False, renormalize=False, shared_width=cfg.intermediate_size,
               weight_on=weight_on).eval()
    with torch.no_grad():
        ours.gate.weight.copy_(up.router.weight)
        # upstream stores [E, H, 2F] (gate columns first) and [E, F, H]; ours [E, 2F, H] and [E, H, F]
        ours.experts.gate_up_proj.copy_(up.experts.gate_up_proj.transpose(1, 2))
        ours.experts.down_proj.copy_(up.experts.down_proj.transpose(1, 2))
        for name in ("gate_proj", "up_proj", "down_proj"):
            getattr(ours.shared_experts, name).weight.copy_(getattr(up.shared_expert, name).weight)
    return ours


@pytest.mark.parametrize("top_k", [1, 2])
def test_weight_on_input_is_llama4s_moe(top_k):
    cfg, up = _llama4_pair(top_k)
    x = torch.randn(2, 5, cfg.hidden_size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, _ = up(x)
        got = _ours(cfg, up, "input")(x)
        on_output = _ours(cfg, up, "output")(x)
    assert torch.allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(on_output.reshape(want.shape), want, rtol=1e-3, atol=1e-4)   # the switch matters


def test_weight_on_rejects_an_unknown_site():
    with pytest.raises(ValueError):
        MoE(8, 4, 2, 8, weight_on="hidden")
