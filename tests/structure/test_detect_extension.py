"""A mixer kind is found from its own Kind: a made-up kind registered for the test (no archprobe file edited)
is read off a checkpoint by the card, and `detect_order` is the precedence: tried before softmax attention it
claims the layer, tried after it the attention's reading stands."""

from __future__ import annotations

import json
import os

import pytest

from archprobe import kinds
from archprobe.formats.sources import open_source
from archprobe.kinds.spec import Kind
from archprobe.structure.inspect import build_card
from archprobe.writers.safetensors import write_safetensors

H, V, NH, ECHO = 64, 128, 4, 7


def _echo_detect(mods, H, cfg):
    """The toy mechanism: an echo parameter [1, 1, ECHO] beside three [H, H] readers and an [H, H] writer."""
    from archprobe.structure.bind_ffn import Bound
    from archprobe.structure.card import Mixer

    echo = next((m for m in mods if m.shape == (1, 1, ECHO)), None)
    mats = sorted((m for m in mods if m.shape == (H, H)), key=lambda m: m.path)
    if echo is None or len(mats) != 4:
        return None
    roles = {"echo": echo, **{f"w{i}": m for i, m in enumerate(mats)}}
    return Bound(Mixer("toy_echo", num_heads=NH), roles, [m for m in mods if m not in roles.values()])


def _toy(order: int) -> Kind:
    return Kind("toy_echo", "mixer", "Echo", "#123456", "toy.echo", detect=_echo_detect, detect_order=order)


def _write(folder) -> str:
    """One llama-shaped layer whose attention also stores the echo."""
    p = "model.layers.0."
    t = [("model.embed_tokens.weight", (V, H)), ("model.norm.weight", (H,)), ("lm_head.weight", (V, H)),
         (p + "input_layernorm.weight", (H,)), (p + "post_attention_layernorm.weight", (H,)),
         (p + "mlp.gate_proj.weight", (96, H)), (p + "mlp.up_proj.weight", (96, H)),
         (p + "mlp.down_proj.weight", (H, 96)), (p + "self_attn.echo", (1, 1, ECHO))]
    t += [(p + f"self_attn.{x}_proj.weight", (H, H)) for x in "qkvo"]
    write_safetensors(os.path.join(folder, "model.safetensors"), [(name, "F32", shape, None) for name, shape in t])
    cfg = {"model_type": "mystery_echo", "hidden_size": H, "vocab_size": V, "num_hidden_layers": 1,
           "num_attention_heads": NH, "num_key_value_heads": NH, "rms_norm_eps": 1e-6, "intermediate_size": 96}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    return str(folder)


def _mixer(folder):
    card = build_card(open_source(folder)).card
    return card.layers[0].mixer, {r: n for r, n in card.tensors.items() if r.startswith("layers.0.mixer.")}


@pytest.fixture
def with_toy(monkeypatch):
    """Registers the toy kind for one test; monkeypatch restores the registry after it."""
    def register(order: int) -> None:
        monkeypatch.setitem(kinds.MIXERS, "toy_echo", _toy(order))
        monkeypatch.setitem(kinds.ALL, "toy_echo", kinds.MIXERS["toy_echo"])
    return register


def test_without_the_toy_kind_the_layer_is_attention(tmp_path):
    assert "toy_echo" not in kinds.MIXERS
    mixer, _ = _mixer(_write(tmp_path))
    assert mixer.kind == "mha"


def test_a_registered_kind_is_detected_from_its_own_spec(tmp_path, with_toy):
    with_toy(0)
    assert _echo_detect in kinds.mixer_detectors()
    mixer, tensors = _mixer(_write(tmp_path))
    assert mixer.kind == "toy_echo" and mixer.num_heads == NH
    assert tensors["layers.0.mixer.echo"] == "model.layers.0.self_attn.echo"
    assert tensors["layers.0.mixer.w3"] == "model.layers.0.self_attn.v_proj.weight"


def test_detect_order_is_the_precedence(tmp_path, with_toy):
    attention = kinds.MIXERS["gqa"].detect_order
    with_toy(attention + 1)       # after softmax attention, which reads q / k / v / o first
    detectors = kinds.mixer_detectors()
    assert detectors.index(_echo_detect) == detectors.index(kinds.MIXERS["gqa"].detect) + 1
    mixer, _ = _mixer(_write(tmp_path))
    assert mixer.kind == "mha"
