"""A hostile or mistaken user card through the real CLI (child process): counts of zero or below,
integers too long or too large, NaN and infinity, a card from another model (vocabulary, layer count,
FFN width), and the documented edits that must keep working (a sub-object the derived card leaves
empty, a field blanked). Each refusal is one line naming the field, exit 2."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.cli import assert_bounded, run_cli

RSS = 600 * 2**20   # memory/inspect import torch-free paths, but card + structure + numpy


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from transformers import LlamaConfig

    from tests.support.tiny_models import build

    folder = tmp_path_factory.mktemp("tiny-llama")
    build(LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128), folder)
    r = run_cli("card", str(folder), "-o", str(folder.parent / "card.yaml"))
    assert r.rc == 0, r.stderr
    return str(folder), yaml.safe_load((folder.parent / "card.yaml").read_text())


def edited(tmp_path, card: dict, path: str, value, raw: str | None = None) -> str:
    card = json.loads(json.dumps(card))
    node = card
    *head, leaf = path.split(".")
    for part in head:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[leaf] = value
    text = yaml.safe_dump(card, sort_keys=False)
    if raw is not None:   # a literal YAML scalar (.nan, a 5,000-digit integer) put in place of the marker
        text = text.replace("__RAW__", raw)
    (tmp_path / "card.yaml").write_text(text)
    return str(tmp_path / "card.yaml")


@pytest.mark.parametrize("path, value, raw, says", [
    ("layers.0.mixer.num_heads", 0, None, "positive"),
    ("layers.0.mixer.num_kv_heads", 0, None, "positive"),
    ("layers.0.mixer.num_heads", -4, None, "positive"),
    ("layers.0.mixer.sliding_window", -4096, None, "positive"),
    ("layers.0.mixer.sliding_window", 0, None, "positive"),
    ("layers.0.mixer.head_dim", 2**60, None, "out of range"),
    ("layers.0.mixer.head_dim", "__RAW__", "9" * 5000, "digits"),
    ("layers.0.mixer.head_dim", "__RAW__", str(10**400), "digits"),
    ("rope.theta", "__RAW__", ".nan", "finite"),
    ("rope.theta", "__RAW__", ".inf", "finite"),
    ("layers.0.mixer.head_dim", 16.5, None, "integer"),
    ("vocab_size", 32000, None, "vocab_size"),
    ("num_layers", 1, None, "num_layers"),
    ("num_layers", 0, None, "num_layers"),
    ("layers.0.ffn.width", 999, None, "width"),
    ("max_position_embeddings", -1, None, "positive"),
])
@pytest.mark.parametrize("command", ["memory", "inspect"])
def test_a_bad_card_value_is_one_line_naming_the_field(model, tmp_path, path, value, raw, says, command):
    folder, card = model
    r = run_cli(command, folder, "--card", edited(tmp_path, card, path, value, raw), "--json")
    assert_bounded(r, ok=False, contains=says, rss=RSS, wall_s=30)
    assert path.split(".")[-1] in r.stderr or says == "digits" and "line" in r.stderr


@pytest.mark.parametrize("path, value", [
    ("layers.0.mixer.layer_rope", {"theta": 500000.0, "type": "default"}),   # empty in the derived card
    ("layers.0.ffn.shared", {"count": 1, "width": 128}),
    ("layers.0.mixer.sliding_window", 64),
    ("rope.theta", 500000.0),
    ("layers.0.mixer.sliding_window", None),
])
def test_documented_edits_still_work(model, tmp_path, path, value):
    folder, card = model
    r = run_cli("card", folder, "--card", edited(tmp_path, card, path, value), "--json")
    assert_bounded(r, ok=True, rss=RSS, wall_s=30)
    doc = json.loads(r.stdout)
    assert value is None or any(k.startswith(path) and v == "user" for k, v in doc["origins"].items()), doc["origins"]


def test_the_unedited_card_is_accepted(model, tmp_path):
    folder, card = model
    (tmp_path / "card.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
    for command in ("inspect", "memory", "card"):
        assert_bounded(run_cli(command, folder, "--card", str(tmp_path / "card.yaml"), "--json"), ok=True, rss=RSS,
                       wall_s=30)
