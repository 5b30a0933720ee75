"""Our modules against independent implementations: transformers' Kimi Linear KDA and MLA layers
and MoE block (their torch fallbacks), and Nemotron-H's LatentMoE block, built from a config with
random weights, saved with save_pretrained, and loaded into our modules *by checkpoint name*."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from safetensors.torch import load_file  # noqa: E402

from archprobe.nn.kda import KimiDeltaAttention  # noqa: E402
from archprobe.nn.loading import load_strict, sanitize  # noqa: E402
from archprobe.nn.mla import MultiHeadLatentAttention  # noqa: E402
from archprobe.nn.moe import MoE  # noqa: E402
from archprobe.testing import assert_close  # noqa: E402
from tests.support.tiny_models import build, perturb  # noqa: E402


@pytest.fixture(scope="module")
def kimi(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kimi")
    model = build("kimi_linear", folder, adjust=perturb)
    tensors = load_file(str(folder / "model.safetensors"))
    return model, tensors


def _sub(tensors, prefix):
    return sanitize({k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)})


def _x(T=23, H=64, seed=1):
    return torch.randn(2, T, H, generator=torch.Generator().manual_seed(seed))


def test_kda_layer_matches_transformers(kimi):
    model, tensors = kimi
    cfg = model.config
    layer = 0
    assert cfg.layer_types[layer] == "linear_attention"
    ours = KimiDeltaAttention(cfg.hidden_size, cfg.linear_num_heads, cfg.linear_head_dim, gate="softplus",
                              output_gate="low_rank", norm_eps=cfg.rms_norm_eps, chunk_size=16)
    load_strict(ours, _sub(tensors, f"model.layers.{layer}.self_attn."), what="KDA")
    x = _x(T=70)
    with torch.no_grad():
        ref = model.model.layers[layer].self_attn(hidden_states=x)
        got, _ = ours(x)
    assert_close("cross_implementation", ref, got)


def test_mla_layer_matches_transformers(kimi):
    model, tensors = kimi
    cfg = model.config
    layer = 2
    assert cfg.layer_types[layer] == "full_attention"
    ours = MultiHeadLatentAttention(cfg.hidden_size, cfg.num_attention_heads, kv_lora_rank=cfg.kv_lora_rank,
                                    q_lora_rank=cfg.q_lora_rank, nope_dim=cfg.qk_nope_head_dim,
                                    rope_dim=cfg.qk_rope_head_dim, v_dim=cfg.v_head_dim, rope_theta=None)
    load_strict(ours, _sub(tensors, f"model.layers.{layer}.self_attn."), what="MLA")
    x = _x()
    T = x.shape[1]
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None].expand(2, 1, T, T)
    with torch.no_grad():
        ref, _ = model.model.layers[layer].self_attn(hidden_states=x, attention_mask=mask)
        got, _ = ours(x)
    assert_close("cross_implementation", ref, got)


def test_moe_block_matches_transformers(kimi):
    model, tensors = kimi
    cfg = model.config
    layer = 1
    ours = MoE(cfg.hidden_size, cfg.num_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size,
               activation="silu", score="sigmoid", router_bias=True, renormalize=cfg.moe_renormalize,
               scale=cfg.routed_scaling_factor, shared_width=cfg.moe_intermediate_size * cfg.num_shared_experts)
    load_strict(ours, _sub(tensors, f"model.layers.{layer}.block_sparse_moe."), what="MoE")
    x = _x()
    with torch.no_grad():
        ref = model.model.layers[layer].mlp(x)
        got = ours(x)
    assert got.abs().max() > 0.1
    assert_close("cross_implementation", ref, got)
    stats = ours.routing_stats()
    assert sum(stats["load"]) == x.shape[0] * x.shape[1] * cfg.num_experts_per_tok


def test_nemotron_latent_moe_matches_transformers(tmp_path):
    model = build("nemotron_h", tmp_path, adjust=perturb)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    c = model.config
    ours = MoE(c.hidden_size, c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size, activation="relu2",
               gated=False, score="sigmoid", router_bias=True, renormalize=c.norm_topk_prob,
               scale=c.routed_scaling_factor, shared_width=c.moe_shared_expert_intermediate_size,
               latent_size=c.moe_latent_size, routing_space="hidden", latent_norm=False,
               latent_names=("fc1_latent_proj", "fc2_latent_proj", "unused"))
    load_strict(ours, _sub(tensors, "backbone.layers.1.mixer."), what="Nemotron LatentMoE")
    assert ours.gate.weight.shape[1] == c.hidden_size  # routing in hidden space
    x = _x()
    with torch.no_grad():
        ref = model.model.layers[1].mixer(x)
        got = ours(x)
    assert_close("cross_implementation", ref, got)
