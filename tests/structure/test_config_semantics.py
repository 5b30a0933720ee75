"""Every number the card takes from config.json is checked (an integer, positive, within sane bounds), the
nesting is capped, and a layer count that disagrees with the tensors is a warning naming both counts:
the card follows the tensors and never relabels layers as MTP because of the config alone."""

from __future__ import annotations

import pytest

from archprobe.errors import ArchprobeError
from archprobe.structure.inspect import inspect_checkpoint
from tests.support.header_checkpoints import L
from tests.support.header_checkpoints import write_llama as _write


@pytest.mark.parametrize("key,value,words", [
    ("num_hidden_layers", "3", "not an integer"), ("hidden_size", True, "not an integer"),
    ("num_attention_heads", -4, "negative"), ("num_hidden_layers", 10**7, "sane bound"),
    ("hidden_size", 10**9, "sane bound"), ("num_attention_heads", 4.5, "not an integer"),
    ("rms_norm_eps", "tiny", "not a finite number"),
])
def test_bad_config_numbers_are_one_line_errors_naming_the_key(tmp_path, key, value, words):
    src = _write(tmp_path, {key: value})
    with pytest.raises(ArchprobeError, match=rf"{key}.*{words}") as info:
        inspect_checkpoint(src)
    assert "\n" not in info.value.message


def test_config_nesting_is_capped(tmp_path):
    deep: dict = {}
    node = deep
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    src = _write(tmp_path, {"extra": deep})
    with pytest.raises(ArchprobeError, match="nested deeper"):
        inspect_checkpoint(src)


@pytest.mark.parametrize("n", [0, 2, 5])
def test_layer_count_mismatch_warns_and_follows_the_tensors(tmp_path, n):
    doc = inspect_checkpoint(_write(tmp_path, {"num_hidden_layers": n}))
    assert doc["architecture"]["num_layers"] == L and len(doc["layers"]) == L
    assert "mtp" not in {f["id"] for f in doc["features"]}
    if n:
        assert any(f"config says {n} layers" in w and f"tensors for {L}" in w for w in doc["warnings"])


def test_mtp_layer_is_set_aside_by_its_shapes(tmp_path):
    doc = inspect_checkpoint(_write(tmp_path, {}, mtp=True))
    assert doc["architecture"]["num_layers"] == L
    assert "mtp" in {f["id"] for f in doc["features"]} and doc["unrecognized"] == []
    assert not any("config says" in w for w in doc["warnings"])


@pytest.mark.parametrize("extra,pos_kind", [
    ({}, None),                                                               # hand-written: says nothing
    ({"transformers_version": "5.0.0"}, "none"),                              # Jamba / Nemotron-H: no rope key
    ({"transformers_version": "5.0.0", "rope_theta": 10000.0}, "rope"),
    ({"transformers_version": "5.0.0", "rope_parameters": {"rope_type": "default"}}, None),
])
def test_a_transformers_config_without_any_rope_key_means_position_free_attention(tmp_path, extra, pos_kind):
    from archprobe.formats.sources import open_source
    from archprobe.structure.inspect import build_card

    card = build_card(open_source(_write(tmp_path, extra))).card
    assert card.embed.pos_kind == pos_kind
