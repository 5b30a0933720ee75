"""RWKV-4 found from its own kind module (kinds/rwkv.py's detector): on transformers' `rwkv` zoo member every
layer's time mixing is bound by shape to the checkpoint's `attention.*` tensors, and memory sizes its state with
the kind's formula (numerator, denominator, max exponent per channel in fp32 + the last input)."""

from __future__ import annotations

import copy
import json

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from archprobe.formats.sources import open_source  # noqa: E402
from archprobe.memory import MemoryPlanError, plan_memory  # noqa: E402
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


def test_the_unbound_channel_mixing_is_refused_in_one_line(rwkv):
    """Channel mixing (the FFN side) has no kind yet: its key/value read as a second attention of unknown heads,
    which memory names instead of multiplying None (the member stays in zoo.FRONTIER until the FFN lands)."""
    _, card, doc = rwkv
    assert card.unexplained
    with pytest.raises(MemoryPlanError, match="parallel_mixer"):
        plan_memory(doc, 4096)


def test_memory_sizes_the_state_with_the_kinds_formula(rwkv):
    config, card, doc = rwkv
    card = copy.deepcopy(card)
    for layer in card.layers:       # the misread channel mixing set aside (test above): the time mixing alone
        layer.parallel_mixer = None
    plan = plan_memory(doc, 4096, state_dtype="float32", card=card)
    rows = [r for r in plan["per_layer"] if r["kind"] == "rwkv"]
    A, H = config["attention_hidden_size"], config["hidden_size"]
    assert len(rows) == config["num_hidden_layers"]
    assert all(r["bytes_per_sequence"] == 3 * A * 4 + H * 4 for r in rows)   # fp32 model: last input in fp32 too
    assert plan_memory(doc, 64, state_dtype="float32", card=card)["cache_by_layer_type"]["rwkv"] == \
        plan["cache_by_layer_type"]["rwkv"]      # a state: the same at any context
