"""DeepSeek-V2's routing as its config says it, through validate against transformers: `topk_method`
`greedy` ignores n_group / topk_group (plain top-k of the softmax), `group_limited_greedy` keeps the
groups with the best single score (card router.group_score `max`); the weights are never renormalised
whatever `norm_topk_prob` says (the modeling code does not read it)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from archprobe.validate import validate  # noqa: E402
from archprobe.validate.load import load  # noqa: E402

IDS = [5, 17, 42, 99, 3, 12, 77, 20]


def _checkpoint(out, **routing):
    from transformers import DeepseekV2Config

    from tests.support.tiny_models import build

    cfg = DeepseekV2Config(vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8,
                           n_shared_experts=1, num_experts_per_tok=3, first_k_dense_replace=1, kv_lora_rank=16,
                           q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
                           routed_scaling_factor=1.5, max_position_embeddings=64, pad_token_id=0, **routing)

    def noise(model):   # routers far from uniform: group choices matter
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)

    build(cfg, out, adjust=noise, attn_implementation="eager", dtype=torch.float32)
    return out


def _run(folder):
    return load(str(folder)).card, validate(str(folder), prompt_ids=IDS, reference="transformers")


@pytest.mark.parametrize("routing,groups,group_score", [
    ({"topk_method": "greedy", "n_group": 2, "topk_group": 1, "norm_topk_prob": True}, None, None),
    ({"topk_method": "group_limited_greedy", "n_group": 2, "topk_group": 1}, 2, "max"),
])
def test_deepseek_v2_routing_follows_topk_method(tmp_path, routing, groups, group_score):
    folder = _checkpoint(tmp_path / "ckpt", **routing)
    card, doc = _run(folder)
    router = card.layers[1].ffn.router
    assert (router.n_group, router.group_score, router.renormalize, router.scaling) == (groups, group_score, False,
                                                                                          1.5)
    assert doc["status"] == "pass", (doc.get("reasons"), doc["missing_tensors"], doc["reference"])
