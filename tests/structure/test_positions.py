"""structure/positions.py: what the card says about positions, from config keys with their standard
meaning (per-layer-type rope_parameters, layer_rope_theta, no_rope_layers, longrope lists), a hybrid's
NoPE default, and the refusal when nothing says how a non-hybrid model's attention knows positions."""

from __future__ import annotations

import math

import pytest
import torch

from archprobe.validate.plan import NeedsField, config_fields
from tests.support.positions_card import positions_card


def test_per_layer_type_rope_parameters_give_each_layer_its_rope(tmp_path):
    types = ["sliding_attention", "sliding_attention", "full_attention"]
    card = positions_card(tmp_path, {"layer_types": types, "sliding_window": 4, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}}})
    assert (card.rope.theta, card.rope.type, card.rope.factor) == (1e6, "linear", 8.0)
    assert card.origins["rope.theta"] == "config:rope_parameters.full_attention.rope_theta"
    local = card.layers[0].mixer.layer_rope
    assert (local.theta, local.type, local.partial_rotary_factor) == (1e4, "default", 0.5)
    assert card.layers[2].mixer.layer_rope is None
    cfg = config_fields(card)
    sliding, full = cfg["mixer_args"]["gqa"]["rope"], cfg["layer_overrides"][2]["mixer_args"]["gqa"]["rope"]  # base: 0
    assert (full.theta, full.kind, full.params["factor"], full.dim) == (1e6, "linear", 8.0, 8)
    assert (sliding.theta, sliding.kind, sliding.dim) == (1e4, "default", 4)   # its own type: no factor


def test_a_null_layer_type_rope_is_a_nope_layer(tmp_path):
    card = positions_card(tmp_path, {"layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                            "sliding_window": 4, "rope_parameters": {
                                "full_attention": None, "sliding_attention": {"rope_type": "default",
                                                                              "rope_theta": 1e4}}})
    assert [layer.mixer.rope for layer in card.layers] == [None, False, None]
    assert card.rope.theta == 1e4 and card.embed.pos_kind == "rope"
    assert config_fields(card)["layer_overrides"][1]["mixer_args"]["gqa"]["rope"] is None


def test_layer_rope_theta_and_no_rope_layers(tmp_path):
    card = positions_card(tmp_path, {"rope_theta": 1e4, "layer_rope_theta": [1e4, 0, 5e5]})
    assert card.layers[1].mixer.rope is False and card.origins["layers.1.mixer.rope"] == "config:layer_rope_theta"
    assert card.layers[2].mixer.layer_rope.theta == 5e5 and card.layers[0].mixer.layer_rope is None
    card = positions_card(tmp_path, {"rope_theta": 1e4, "no_rope_layers": [1, 1, 0]})   # SmolLM3: 1 = rope
    assert [layer.mixer.rope for layer in card.layers] == [None, None, False]


def test_longrope_lists_and_phi3_top_level_original_context_reach_the_rope(tmp_path):
    short, long = [1.0, 1.1, 1.2, 1.3], [2.0, 3.0, 4.0, 5.0]
    card = positions_card(tmp_path, {"rope_theta": 1e4, "original_max_position_embeddings": 32, "rope_scaling": {
        "type": "longrope", "short_factor": short, "long_factor": long}})
    assert card.rope.scaling["short_factor"] == short and card.rope.original_max_position == 32
    rope = config_fields(card)["mixer_args"]["gqa"]["rope"]
    inv_short, att = rope.inv_freq(8)
    inv_long, _ = rope.inv_freq(64)
    base = 1.0 / 1e4 ** (2 * torch.arange(4).float() / 8)
    assert inv_short.tolist() == pytest.approx((base / torch.tensor(short)).tolist())
    assert inv_long.tolist() == pytest.approx((base / torch.tensor(long)).tolist())
    assert att == pytest.approx((1 + math.log(128 / 32) / math.log(32)) ** 0.5)


def test_a_hybrid_naming_no_rope_runs_nope_attention_and_a_plain_model_is_refused(tmp_path):
    hybrid = positions_card(tmp_path, {"qk_rope_head_dim": 8}, kinds=("mamba", "attn", "mamba"))
    assert hybrid.layers[1].mixer.rope is False and hybrid.origins["layers.1.mixer.rope"] == "default"
    assert hybrid.embed.pos_kind == "none"
    plain = positions_card(tmp_path, {})
    assert plain.rope.theta is None and plain.embed.pos_kind is None
    with pytest.raises(NeedsField) as err:
        config_fields(plain)
    assert err.value.path == "rope.theta" and "--card" in err.value.hint
    named = positions_card(tmp_path, {"partial_rotary_factor": 0.5}, kinds=("mamba", "attn", "mamba"))   # says rope
    assert named.layers[1].mixer.rope is None


def test_gemma3_pre_per_type_config_gives_sliding_layers_the_local_base(tmp_path):
    """Gemma 3 checkpoints written before transformers 5: rope_theta + rope_scaling for the global layers,
    rope_local_base_freq (no scaling) for the sliding ones."""
    card = positions_card(tmp_path, {"rope_theta": 1e6, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
                            "rope_local_base_freq": 1e4, "sliding_window": 4,
                            "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]})
    assert card.layers[0].mixer.layer_rope.theta == 1e4 and card.layers[1].mixer.layer_rope is None
    cfg = config_fields(card)
    local, glob = cfg["mixer_args"]["gqa"]["rope"], cfg["layer_overrides"][1]["mixer_args"]["gqa"]["rope"]
    assert (local.theta, local.kind) == (1e4, "default") and "factor" not in local.params
    assert (glob.theta, glob.kind, glob.params["factor"]) == (1e6, "linear", 8.0)


def test_position_embedding_type_null_is_nope_even_beside_rope_parameters(tmp_path):
    """GraniteMoeHybrid builds its rotary embedding only when position_embedding_type == "rope"."""
    card = positions_card(tmp_path, {"position_embedding_type": None, "rope_parameters": {"rope_type": "default",
                                                                                 "rope_theta": 1e4}})
    assert all(layer.mixer.rope is False for layer in card.layers) and card.embed.pos_kind == "none"
    assert card.origins["layers.0.mixer.rope"] == "config:position_embedding_type"
    assert config_fields(card)["mixer_args"]["gqa"]["rope"] is None
    card = positions_card(tmp_path, {"position_embedding_type": "rope", "rope_theta": 1e4})
    assert card.layers[0].mixer.rope is None and config_fields(card)["mixer_args"]["gqa"]["rope"].theta == 1e4


def test_layer_ropes_and_factor_lists_survive_the_yaml_round_trip(tmp_path):
    """A user writes the card out, corrects it and hands it back: per-layer ropes come back as Rope."""
    from archprobe.structure.card import Card

    full = {"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
            "original_max_position_embeddings": 32}
    local = {"rope_type": "default", "rope_theta": 5e3}
    card = positions_card(tmp_path, {"layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                            "sliding_window": 4,
                            "rope_parameters": {"full_attention": full, "sliding_attention": local}})
    back = Card.from_yaml(card.to_yaml())
    own = back.layers[0].mixer.layer_rope
    assert own == card.layers[0].mixer.layer_rope and own.theta == 5e3
    assert back.rope.scaling["long_factor"] == [2.0] * 4
    assert config_fields(back)["layer_overrides"] == config_fields(card)["layer_overrides"]
