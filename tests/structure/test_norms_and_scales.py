"""Norm placements and the scalar multipliers on the card, from header-only checkpoints (no torch, no data):
the placement a norm takes in transformers' modeling files (Llama's pre-norms, OLMo 2's post-norms, Gemma 2's
sandwich, GLM-4 and HyperCLOVA X's name variants, the original post-LN after the residual add) and the meaning
each multiplier key has there (Granite divides the logits by logits_scaling, Cohere multiplies by logit_scale,
MiniCPM scales branches by scale_depth / sqrt(layers), Gemma 2 sets the softmax scale from query_pre_attn_scalar).
The zoo (tests/validate/test_zoo.py) checks the same families' logits against transformers."""

from __future__ import annotations

import json
import math
import os

import pytest

from archprobe.formats.sources import open_source
from archprobe.structure.inspect import build_card
from archprobe.writers.safetensors import write_safetensors

H, V, L, F = 32, 64, 2, 64


def _card(folder, norms: list[str], config: dict | None = None, extra: list | None = None):
    """A Llama-shaped checkpoint whose layers carry the [H] norms named in `norms`; its card."""
    t = [("model.embed_tokens.weight", "F32", (V, H)), ("model.norm.weight", "F32", (H,)),
         ("lm_head.weight", "F32", (V, H))]
    for i in range(L):
        p = f"model.layers.{i}."
        t += [(p + n + ".weight", "F32", (H,)) for n in norms]
        t += [(p + "self_attn.q_proj.weight", "F32", (H, H)), (p + "self_attn.k_proj.weight", "F32", (16, H)),
              (p + "self_attn.v_proj.weight", "F32", (16, H)), (p + "self_attn.o_proj.weight", "F32", (H, H)),
              (p + "mlp.gate_proj.weight", "F32", (F, H)), (p + "mlp.up_proj.weight", "F32", (F, H)),
              (p + "mlp.down_proj.weight", "F32", (H, F))]
    t += extra or []
    write_safetensors(os.path.join(folder, "model.safetensors"), [(*e, None) for e in t])
    base = {"model_type": "some_new_family", "hidden_size": H, "vocab_size": V, "num_hidden_layers": L,
            "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "hidden_act": "silu",
            "rope_theta": 10000.0}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**base, **(config or {})}, f)
    return build_card(open_source(str(folder))).card


def _placements(card, i: int = 0) -> dict[str, str]:
    """placement -> the checkpoint norm's leaf module name, for layer i."""
    out = {}
    for role, name in card.tensors.items():
        if role.startswith(f"layers.{i}.norm."):
            out[role.split(".", 3)[3]] = name.split(".")[-2]
    return out


@pytest.mark.parametrize("norms,config,want", [
    (["input_layernorm", "post_attention_layernorm"], {},
     {"pre_mixer": "input_layernorm", "pre_ffn": "post_attention_layernorm"}),
    (["post_attention_layernorm", "post_feedforward_layernorm"], {},      # OLMo 2: norms on the branch outputs
     {"post_mixer": "post_attention_layernorm", "post_ffn": "post_feedforward_layernorm"}),
    (["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"], {},
     {"pre_mixer": "input_layernorm", "post_mixer": "post_attention_layernorm",       # Gemma 2 sandwich
      "pre_ffn": "pre_feedforward_layernorm", "post_ffn": "post_feedforward_layernorm"}),
    (["input_layernorm", "post_self_attn_layernorm", "post_attention_layernorm", "post_mlp_layernorm"], {},
     {"pre_mixer": "input_layernorm", "post_mixer": "post_self_attn_layernorm",      # GLM-4
      "pre_ffn": "post_attention_layernorm", "post_ffn": "post_mlp_layernorm"}),
    (["input_layernorm", "post_attention_layernorm", "post_norm1", "post_norm2"], {},
     {"pre_mixer": "input_layernorm", "post_mixer": "post_norm1",                     # HyperCLOVA X Peri-LN
      "pre_ffn": "post_attention_layernorm", "post_ffn": "post_norm2"}),
    (["input_layernorm", "post_attention_layernorm", "post_mlp_layernorm"], {},
     {"pre_mixer": "input_layernorm", "pre_ffn": "post_attention_layernorm",          # A.X-K1's MoE layers
      "post_ffn": "post_mlp_layernorm"}),
    (["self_attn_layer_norm", "final_layer_norm"], {"do_layer_norm_before": False},  # OPT-350m: norm(x + f(x))
     {"post_mixer_sum": "self_attn_layer_norm", "post_ffn_sum": "final_layer_norm"}),
])
def test_norm_placement_follows_the_modeling_files(tmp_path, norms, config, want):
    card = _card(tmp_path, norms, config)
    assert _placements(card) == want
    assert set(card.layers[0].norm) == set(want)


def test_granite_multipliers_divide_the_logits_and_scale_branches_and_softmax(tmp_path):
    card = _card(tmp_path, ["input_layernorm", "post_attention_layernorm"],
                 {"residual_multiplier": 0.22, "attention_multiplier": 0.0078125, "logits_scaling": 16.0,
                  "embedding_multiplier": 12.0})
    assert card.head.scale == pytest.approx(1 / 16)
    assert card.embed.scale == 12.0
    assert all(layer.residual.multiplier == 0.22 and layer.mixer.scale == 0.0078125 for layer in card.layers)
    assert card.origin("layers.1.residual.multiplier") == "config:residual_multiplier"


def test_cohere_logit_scale_multiplies(tmp_path):
    assert _card(tmp_path, ["input_layernorm"], {"logit_scale": 0.0625}).head.scale == 0.0625


def test_minicpm_depth_and_width_scaling(tmp_path):
    card = _card(tmp_path, ["input_layernorm", "post_attention_layernorm"],
                 {"scale_emb": 12, "scale_depth": 1.4, "dim_model_base": 8})
    assert card.embed.scale == 12
    assert card.layers[0].residual.multiplier == pytest.approx(1.4 / math.sqrt(L))
    assert card.head.scale == pytest.approx(8 / H)     # hidden / (H / dim_model_base) before the head


def test_query_pre_attn_scalar_sets_the_softmax_scale(tmp_path):
    card = _card(tmp_path, ["input_layernorm", "post_attention_layernorm"], {"query_pre_attn_scalar": 64})
    assert card.layers[0].mixer.scale == pytest.approx(64 ** -0.5)


@pytest.mark.parametrize("config, want", [
    ({"scale_attn_by_inverse_layer_idx": True}, lambda i: 8 ** -0.5 / (i + 1)),   # heads of 8: 32 / 4
    ({"scale_attn_weights": False}, lambda i: 1.0),
    ({"scale_attn_weights": False, "scale_attn_by_inverse_layer_idx": True}, lambda i: 1.0 / (i + 1)),
    ({"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False}, lambda i: None),
])
def test_gpt2_softmax_scale_keys(tmp_path, config, want):
    """GPT-2's attention: scores / sqrt(head_dim) unless scale_attn_weights is false, and / (layer + 1) more
    when scale_attn_by_inverse_layer_idx (the Stanford CRFM GPT-2s)."""
    card = _card(tmp_path, ["input_layernorm", "post_attention_layernorm"], config)
    got = [layer.mixer.scale for layer in card.layers]
    assert got == [None if want(i) is None else pytest.approx(want(i)) for i in range(L)]


@pytest.mark.parametrize("flag, want", [(True, "from_norm"), (False, "identity")])
def test_residual_from_the_normed_stream(tmp_path, flag, want):
    """BLOOM's apply_residual_connection_post_layernorm: pre-norms whose output is also the residual,
    x = n1(x) + f(n1(x)) (modeling_bloom.py), not norms after the branches."""
    card = _card(tmp_path, ["input_layernorm", "post_attention_layernorm"],
                 {"apply_residual_connection_post_layernorm": flag})
    assert _placements(card) == {"pre_mixer": "input_layernorm", "pre_ffn": "post_attention_layernorm"}
    assert [layer.residual.kind for layer in card.layers] == [want] * L


@pytest.mark.parametrize("config, want", [
    ({"layer_norm_elementwise_affine": False}, {"pre_mixer": "layer", "pre_ffn": "layer"}),
    ({"layer_norm_elementwise_affine": True}, {}),
    ({}, {}),
])
def test_layer_norms_without_affine_parameters(tmp_path, config, want):
    """OPT's layer_norm_elementwise_affine false: LayerNorms with no weight or bias, so no tensor shows them;
    the config key alone puts them before each branch."""
    card = _card(tmp_path, [], config)
    assert {place: n.kind for place, n in card.layers[0].norm.items()} == want
    assert all(n.bias is False for n in card.layers[0].norm.values())


def test_no_multiplier_keys_leave_the_fields_unset(tmp_path):
    card = _card(tmp_path, ["input_layernorm", "post_attention_layernorm"])
    assert card.head.scale is None and card.embed.scale is None
    assert card.layers[0].residual.multiplier is None and card.layers[0].mixer.scale is None


def test_norm_eps_from_norm_epsilon_and_activation_from_afn(tmp_path):
    card = _card(tmp_path, ["input_layernorm", "post_attention_layernorm"],
                 {"rms_norm_eps": None, "norm_epsilon": 3e-6, "hidden_act": None, "afn": "gelu"})
    assert card.layers[0].norm["pre_mixer"].eps == 3e-6 and card.final_norm.eps == 3e-6
    assert card.layers[0].ffn.activation == "gelu"


def test_learned_positions_two_rows_past_the_maximum_read_with_offset_2(tmp_path):
    P = 16
    card = _card(tmp_path, ["input_layernorm", "post_attention_layernorm"], {"max_position_embeddings": P},
                 extra=[("model.embed_positions.weight", "F32", (P + 2, H))])
    assert card.embed.pos_kind == "learned" and card.embed.position_offset == 2
    assert card.origin("embed.position_offset") == "shape"


def test_a_multiplier_key_holding_a_word_is_not_read_as_a_number(tmp_path):
    card = _card(tmp_path, ["input_layernorm"], {"logit_scale": "inv_sqrt_d_model"})    # MPT's option
    assert card.head.scale is None


def test_composed_placement_names_settle_the_ambiguous_post_attention_layernorm(tmp_path):
    card = _card(tmp_path, ["input_layernorm", "post_attention_layernorm", "pre_mlp_layernorm", "post_mlp_layernorm"])
    assert _placements(card) == {"pre_mixer": "input_layernorm", "post_mixer": "post_attention_layernorm",   # AFMoE
                                 "pre_ffn": "pre_mlp_layernorm", "post_ffn": "post_mlp_layernorm"}
