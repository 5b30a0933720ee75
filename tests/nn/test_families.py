"""archprobe.nn's switches against transformers, family by family, without the card: the rope
frequency formulas and ALiBi slopes against transformers' own functions, and whole tiny models
(random weights) against our HybridDecoder configured by hand and loaded through an explicit rename
table (the test's, not the product's: validate gets both from the card)."""

from __future__ import annotations

import re

import pytest
import torch

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from archprobe.nn.attention import alibi_slopes  # noqa: E402
from archprobe.nn.decoder import HybridConfig, HybridDecoder  # noqa: E402
from archprobe.nn.loading import load_strict, sanitize  # noqa: E402
from archprobe.nn.rope import Rope  # noqa: E402
from archprobe.testing import assert_close  # noqa: E402
from tests.support.tiny_models import FAMILY_PROMPT_IDS, perturb_parameters  # noqa: E402

IDS = torch.tensor(FAMILY_PROMPT_IDS)
BASE = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16)


# ------------------------------------------------------------------------------------------- rope
ROPES = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64},
    "yarn_mscale": {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 64, "mscale": 1.0,
                    "mscale_all_dim": 0.707, "beta_fast": 24.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64},
    "longrope": {"rope_type": "longrope", "original_max_position_embeddings": 64,
                 "short_factor": [1.0 + i / 8 for i in range(8)], "long_factor": [2.0 + i for i in range(8)]},
}


@pytest.mark.parametrize("seq_len", [32, 700])
@pytest.mark.parametrize("kind", sorted(ROPES))
def test_rope_frequencies_match_transformers(kind, seq_len):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = {"rope_theta": 10000.0, **ROPES[kind]}
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, head_dim=16, max_position_embeddings=256,
                      rope_parameters=dict(params))
    want_inv, want_att = ROPE_INIT_FUNCTIONS[params["rope_type"]](cfg, None, seq_len=seq_len)
    ours = Rope(10000.0, 16, params["rope_type"], params, max_positions=256)
    got_inv, got_att = ours.inv_freq(seq_len)
    assert_close("cross_implementation", want_inv.float(), got_inv, torch.float32)
    assert got_att == pytest.approx(want_att, rel=1e-6)


def test_interleaved_rope_is_gptj_rotate_every_two():
    """Neighbour pairs (x0, x1) rotate together: GPT-J's rotate_every_two with duplicated angles."""
    x = torch.randn(1, 5, 2, 8, generator=torch.Generator().manual_seed(0))
    pos = torch.arange(5)
    inv = 1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8)
    ang = pos[:, None].float() * inv[None]
    sin, cos = ang.sin().repeat_interleave(2, -1)[None, :, None], ang.cos().repeat_interleave(2, -1)[None, :, None]
    rot = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    want = x * cos + rot * sin
    got = Rope(10000.0, 8, interleaved=True).apply(x, pos)
    # the output keeps the checkpoint's channel order (a qk-norm or cache after the rotation sees it)
    assert_close("cross_implementation", want, got, torch.float32)


@pytest.mark.parametrize("heads", [4, 6, 12])
def test_alibi_slopes_match_bloom_and_mpt(heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    bloom = build_alibi_tensor(torch.ones(1, 3), heads, torch.float32)[:, 0, 1]      # slope * position 1
    mpt = build_mpt_alibi_tensor(heads, 3)[:, 0, -2] * -1                          # slope * (1 - 2)
    ours = alibi_slopes(heads)
    assert torch.allclose(ours, bloom) and torch.allclose(ours, mpt.reshape(-1)), (ours, bloom, mpt)


# ------------------------------------------------------------------------------------------- families
def _hf(model_type: str, **cfg):
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **cfg)).eval()
    perturb_parameters(model)
    with torch.no_grad():
        logits = model(IDS).logits
    return logits, {k: v.detach().clone() for k, v in model.state_dict().items()}


def _ours(cfg: HybridConfig, state: dict, renames: list[tuple[str, str]], derive=None) -> torch.Tensor:
    out = {}
    for k, v in state.items():
        for pat, rep in renames:
            k = re.sub(pat, rep, k)
        if k:
            out[k] = v
    if derive:
        out = derive(out)
    model = HybridDecoder(cfg).eval()
    load_strict(model, sanitize(out), what=cfg.extra.get("family", "model"))
    with torch.no_grad():
        return model(IDS)


COMMON = [(r"^model\.", ""), (r"\.mlp\.", ".mlp.")]


def test_gemma2_sandwich_norms_softcaps_scale_and_window():
    logits, state = _hf("gemma2", **BASE, query_pre_attn_scalar=32, sliding_window=4,
                        attn_logit_softcapping=20.0, final_logit_softcapping=10.0)
    cfg = HybridConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, rms_norm_eps=1e-6,
                       norm_style="zero_centered", block="sandwich", mixer_types=("swa", "gqa"),
                       mixer_args={"gqa": dict(sliding_window=4, num_heads=4, num_kv_heads=2, head_dim=16,
                                               scale=32 ** -0.5, softcap=20.0)},
                       final_softcap=10.0, embed_scale=64 ** 0.5,
                       intermediate_size=96, hidden_act="gelu_pytorch_tanh", tie_word_embeddings=True)
    got = _ours(cfg, state, COMMON + [(r"post_attention_layernorm", "post_mixer_norm"),
                                      (r"pre_feedforward_layernorm", "post_attention_layernorm"),
                                      (r"post_feedforward_layernorm", "post_ffn_norm")])
    assert_close("cross_implementation", logits, got, torch.float32)


def test_cohere_parallel_layernorm_logit_scale_interleaved_rope():
    logits, state = _hf("cohere", **{k: v for k, v in BASE.items() if k != "head_dim"}, logit_scale=0.25)
    rope = Rope(500000.0, 16, interleaved=True)   # CohereConfig's default theta
    cfg = HybridConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, rms_norm_eps=1e-5,
                       norm_style="layer_nobias", block="parallel_shared",
                       mixer_args={"gqa": dict(num_heads=4, num_kv_heads=2, head_dim=16, rope=rope)},
                       intermediate_size=96,
                       logit_scale=0.25, tie_word_embeddings=True)
    assert_close("cross_implementation", logits, _ours(cfg, state, COMMON), torch.float32)


def test_olmo2_post_norms_and_full_width_qk_norm():
    logits, state = _hf("olmo2", **BASE)
    cfg = HybridConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, rms_norm_eps=1e-5, block="post",
                       mixer_args={"gqa": dict(num_heads=4, num_kv_heads=2, head_dim=16, qk_norm="full")},
                       intermediate_size=96)
    got = _ours(cfg, state, COMMON + [(r"post_attention_layernorm", "post_mixer_norm"),
                                      (r"post_feedforward_layernorm", "post_ffn_norm")])
    assert_close("cross_implementation", logits, got, torch.float32)


def test_granite_multipliers():
    logits, state = _hf("granite", **BASE, embedding_multiplier=6.0, residual_multiplier=0.3,
                        attention_multiplier=0.05, logits_scaling=4.0)
    cfg = HybridConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, rms_norm_eps=1e-6,
                       mixer_args={"gqa": dict(num_heads=4, num_kv_heads=2, head_dim=16, scale=0.05)},
                       intermediate_size=96, embed_scale=6.0, residual_multiplier=0.3, logit_scale=0.25)
    assert_close("cross_implementation", logits, _ours(cfg, state, COMMON), torch.float32)


def test_hunyuan_qk_norm_after_rope():
    logits, state = _hf("hunyuan_v1_dense", **BASE)
    cfg = HybridConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, rms_norm_eps=1e-5,
                       mixer_args={"gqa": dict(num_heads=4, num_kv_heads=2, head_dim=16, qk_norm=True,
                                               qk_norm_after_rope=True)}, intermediate_size=96)
    got = _ours(cfg, state, COMMON + [(r"query_layernorm", "q_norm"), (r"key_layernorm", "k_norm")])
    assert_close("cross_implementation", logits, got, torch.float32)


def _split_neox_qkv(heads: int, d: int):
    def derive(state):
        for k in [k for k in state if "query_key_value" in k]:
            t = state.pop(k)
            g = t.reshape(heads, 3, d, *t.shape[1:])
            for j, name in enumerate("qkv"):
                state[k.replace("query_key_value", f"{name}_proj")] = g[:, j].reshape(-1, *t.shape[1:])
        return state
    return derive


def test_gpt_neox_parallel_separate_norms_partial_rotary_fused_qkv():
    logits, state = _hf("gpt_neox", vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, rotary_pct=0.25, use_parallel_residual=True, hidden_act="gelu")
    cfg = HybridConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, rms_norm_eps=1e-5, norm_style="layer",
                       block="parallel", mixer_args={"gqa": dict(num_heads=4, num_kv_heads=4, head_dim=16,
                                                                 partial_rotary_factor=0.25, qkv_bias=True,
                                                                 o_bias=True)},
                       mlp_bias=True, intermediate_size=128, hidden_act="gelu", gated_ffn=False)
    renames = [(r"^gpt_neox\.", ""), (r"^embed_out", "lm_head"), (r"embed_in", "embed_tokens"),
               (r"final_layer_norm", "norm"), (r"\.attention\.dense", ".self_attn.o_proj"),
               (r"\.attention\.", ".self_attn."), (r"dense_h_to_4h", "up_proj"), (r"dense_4h_to_h", "down_proj")]
    got = _ours(cfg, state, renames, _split_neox_qkv(4, 16))
    assert_close("cross_implementation", logits, got, torch.float32)


def test_bloom_alibi_embedding_norm_fused_qkv():
    logits, state = _hf("bloom", vocab_size=256, hidden_size=64, n_layer=2, n_head=4)
    cfg = HybridConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, rms_norm_eps=1e-5, norm_style="layer",
                       mixer_args={"gqa": dict(num_heads=4, num_kv_heads=4, head_dim=16, alibi=True, rope_theta=None,
                                               qkv_bias=True, o_bias=True)}, mlp_bias=True, intermediate_size=256,
                       hidden_act="gelu_tanh", gated_ffn=False, embed_norm=True, tie_word_embeddings=True)
    renames = [(r"^transformer\.", ""), (r"word_embeddings_layernorm", "embed_layernorm"),
               (r"word_embeddings", "embed_tokens"), (r"^ln_f", "norm"), (r"^h\.", "layers."),
               (r"self_attention\.dense", "self_attn.o_proj"), (r"self_attention\.", "self_attn."),
               (r"dense_h_to_4h", "up_proj"), (r"dense_4h_to_h", "down_proj")]
    got = _ours(cfg, state, renames, _split_neox_qkv(4, 16))
    assert_close("cross_implementation", logits, got, torch.float32)


def test_gpt_oss_sinks_biases_clamped_glu_router_bias_stacked_experts():
    logits, state = _hf("gpt_oss", **{**BASE, "intermediate_size": 32}, num_local_experts=4, num_experts_per_tok=2,
                        sliding_window=4, layer_types=["sliding_attention", "full_attention"])
    cfg = HybridConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, rms_norm_eps=1e-5,
                       mixer_types=("swa", "gqa"), ffn_types=("moe", "moe"), mixer_args={"gqa": dict(
                           sliding_window=4, num_heads=4, num_kv_heads=2, head_dim=16, qkv_bias=True, o_bias=True,
                           sinks=True, rope=Rope(150000.0, 16, "yarn", {"factor": 32.0, "beta_fast": 32.0,
                                                                        "beta_slow": 1.0, "truncate": False,
                                                                        "original_max_position_embeddings": 4096},
                                                 max_positions=131072))},
                       num_experts=4, num_experts_per_token=2, moe_intermediate_size=32, hidden_act="swiglu_oss",
                       moe_router_activation_func="softmax", moe_router_bias=False, router_logit_bias=True,
                       expert_bias=True, moe_renormalize=True, shared_expert_width=0)

    def derive(state):   # gpt-oss stores experts [E, in, out] with gate/up interleaved by column
        for k in [k for k in state if ".experts." in k]:
            t = state.pop(k)
            if k.endswith("gate_up_proj_bias"):
                t = torch.cat([t[..., 0::2], t[..., 1::2]], dim=-1)
            elif k.endswith("gate_up_proj"):
                t = torch.cat([t[..., 0::2], t[..., 1::2]], dim=-1).transpose(-1, -2)
            elif k.endswith("down_proj"):
                t = t.transpose(-1, -2)
            state[k] = t.contiguous()
        return state

    renames = COMMON + [(r"\.mlp\.router\.", ".block_sparse_moe.gate."), (r"\.mlp\.", ".block_sparse_moe.")]
    got = _ours(cfg, state, renames, derive)
    assert_close("cross_implementation", logits, got, torch.float32)
