"""The card schema: YAML/JSON round trips, dotted paths with origins, unknown fields, bad input."""

from __future__ import annotations

import pytest

from archprobe.structure.card import Card, CardError, Ffn, Layer, Mixer, Norm, load_card


def _card() -> Card:
    c = Card(model_type="x", hidden_size=64, vocab_size=100, num_layers=2)
    c.layers = [Layer(0, Mixer("gqa", num_heads=4, num_kv_heads=2, head_dim=16, bias={"q": True}),
                      Ffn("dense", activation="silu", gated=True, width=128), {"pre_mixer": Norm("rms", 1e-6)}),
                Layer(1, Mixer("gqa", num_heads=4, num_kv_heads=None, head_dim=16),
                      Ffn("moe", num_experts=8, top_k=None))]
    c.tensors = {"embed": "model.embed_tokens.weight", "layers.1.ffn.experts.*.gate": "m.l.1.e.*.w1.weight"}
    c.origins["hidden_size"] = "config:hidden_size"
    return c


def test_yaml_and_json_round_trip():
    c = _card()
    assert Card.from_yaml(c.to_yaml()) == c
    assert Card.from_json(c.to_json()) == c
    assert Card.from_dict(c.to_dict()).layers[0].norm["pre_mixer"].eps == 1e-6


def test_dotted_get_set_and_origins():
    c = _card()
    assert c.get("layers.0.mixer.num_heads") == 4
    assert c.origin("hidden_size") == "config:hidden_size"
    assert c.origin("layers.1.mixer.num_kv_heads") == "unknown"
    c.set("layers.1.ffn.router.scoring", "softmax")
    assert c.layers[1].ffn.router.scoring == "softmax" and c.origin("layers.1.ffn.router.scoring") == "user"
    c.set("layers.0.norm.pre_mixer.offset", True)
    assert c.layers[0].norm["pre_mixer"].offset is True
    with pytest.raises(CardError, match="layers.0.mixer.heads"):
        c.set("layers.0.mixer.heads", 3)
    with pytest.raises(CardError, match="expected an integer"):
        c.set("layers.0.mixer.num_heads", "four")


def test_unknown_fields_named():
    c = _card()
    assert c.unknown_fields() == ["layers.1.mixer.num_kv_heads", "layers.1.ffn.top_k", "layers.1.ffn.router.scoring"]
    c.set("layers.1.mixer.num_kv_heads", 2)
    c.set("layers.1.ffn.top_k", 2)
    c.set("layers.1.ffn.router.scoring", "softmax")
    assert c.unknown_fields() == []


def test_expand_enumerated_bank():
    c = _card()
    pairs = dict(c.expand())
    assert pairs["layers.1.ffn.experts.7.gate"] == "m.l.1.e.7.w1.weight" and len(pairs) == 9


def test_malformed_cards_are_one_line_errors(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("layers: [{mixer: {kind: gqa, num_heads: [1]}}]\n")
    with pytest.raises(CardError, match=r"layers\.0\.mixer\.num_heads"):
        load_card(str(p))
    p.write_text("schema: archprobe.card/9\n")
    with pytest.raises(CardError, match="schema"):
        load_card(str(p))
    p.write_text("{: :\n")
    with pytest.raises(CardError, match="not valid YAML"):
        load_card(str(p))
    p.write_text("- 1\n")
    with pytest.raises(CardError, match="mapping"):
        load_card(str(p))
