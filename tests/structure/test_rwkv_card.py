"""RWKV-4 found from its own kind module (kinds/rwkv.py's detector): on transformers' `rwkv` zoo member every
layer's time mixing is bound by shape to the checkpoint's `attention.*` tensors, and memory sizes its state with
the kind's formula (numerator, denominator, max exponent per channel in fp32 + the last input)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from archprobe.formats.sources import open_source  # noqa: E402
from archprobe.memory import plan_memory  # noqa: E402
from archprobe.structure.inspect import build_card, document  # noqa: E402
from tests.support import zoo  # noqa: E402

TIME_MIX = {"time_decay": "time_decay", "time_first": "time_first", "time_mix_key": "time_mix_key",
            "time_mix_value": "time_mix_value", "time_mix_receptance": "time_mix_receptance",
            "key": "key.weight", "value": "value.weight", "receptance": "receptance.weight",
            "output": "output.weight"}


@pytest.fixture(scope="module")
def rwkv(zoo_root):
    folder = zoo.build("rwkv", zoo_root)
    raw = open_source(str(folder))
    d = build_card(raw)
    return json.loads((folder / "config.json").read_text()), d.card, document(raw, d)


def test_every_layer_binds_its_time_mixing(rwkv):
    config, card, _ = rwkv
    assert len(card.layers) == config["num_hidden_layers"]
    for i, layer in enumerate(card.layers):
        assert layer.mixer.kind == "rwkv"
        assert layer.mixer.num_heads == config["attention_hidden_size"]
        assert layer.mixer.conv_dim == config["hidden_size"]
        for role, leaf in TIME_MIX.items():
            assert card.tensors[f"layers.{i}.mixer.{role}"] == f"rwkv.blocks.{i}.attention.{leaf}"


def test_every_layer_binds_its_channel_mixing_and_block_0_norms_the_embeddings(rwkv):
    """Channel mixing found by its own kind (kinds/rwkv_channel.py), block 0's pre_ln read as the embedding norm:
    no tensor left unexplained and two norms per block (ln1 before time mixing, ln2 before channel mixing)."""
    config, card, _ = rwkv
    assert card.unexplained == []
    assert card.tensors["embed_norm"] == "rwkv.blocks.0.pre_ln.weight" and card.embed.norm == "layer"
    for i, layer in enumerate(card.layers):
        assert layer.ffn.kind == "rwkv_channel" and layer.parallel_mixer is None
        assert layer.ffn.width == config["intermediate_size"]
        assert sorted(layer.norm) == ["pre_ffn", "pre_mixer"]
        assert card.tensors[f"layers.{i}.norm.pre_ffn"] == f"rwkv.blocks.{i}.ln2.weight"
        for role in ("time_mix_key", "time_mix_receptance", "key", "value", "receptance"):
            leaf = role if role.startswith("time_mix") else f"{role}.weight"
            assert card.tensors[f"layers.{i}.ffn.{role}"] == f"rwkv.blocks.{i}.feed_forward.{leaf}"


def test_memory_sizes_both_states_with_the_kinds_formulas(rwkv):
    config, card, doc = rwkv
    plan = plan_memory(doc, 4096, state_dtype="float32", card=card)
    A, H, n = config["attention_hidden_size"], config["hidden_size"], config["num_hidden_layers"]
    time_rows = [r for r in plan["per_layer"] if r["kind"] == "rwkv"]
    channel_rows = [r for r in plan["per_layer"] if r["kind"] == "rwkv_channel"]
    assert len(time_rows) == len(channel_rows) == n
    assert all(r["bytes_per_sequence"] == 3 * A * 4 + H * 4 for r in time_rows)   # fp32 model: last input fp32
    assert all(r["bytes_per_sequence"] == H * 4 for r in channel_rows)            # channel mixing's last input
    assert plan_memory(doc, 64, state_dtype="float32", card=card)["cache_by_layer_type"] == \
        plan["cache_by_layer_type"]      # states: the same at any context
