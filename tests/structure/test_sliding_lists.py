"""`sliding_window` given per layer as a list: each layer keeps its own window (null or 0: full attention), read
from the config; a shorter list repeats over the layers (vLLM's interleaved reading), a guess that the card
marks `assumed` and inspect prints; a list that fits neither, or holds something other than sizes, is one
line naming the key."""

from __future__ import annotations

import pytest

from archprobe.formats.sources import open_source
from archprobe.structure.config import ConfigError
from archprobe.structure.inspect import build_card, inspect_checkpoint
from tests.support.header_checkpoints import L, write_llama


def _card(tmp_path, windows, **config):
    write_llama(tmp_path, {"model_type": "acme_lm", "sliding_window": windows, **config})
    return build_card(open_source(str(tmp_path))).card


def test_one_window_per_layer_is_read_per_layer(tmp_path):
    card = _card(tmp_path, [4, None, 8])
    assert [layer.mixer.sliding_window for layer in card.layers] == [4, None, 8]
    assert [card.origins.get(f"layers.{i}.mixer.sliding_window") for i in range(L)] == [
        "config:sliding_window", None, "config:sliding_window"]
    assert not [w for w in card.warnings if "sliding_window" in w]


def test_zero_means_full_attention(tmp_path):
    assert [layer.mixer.sliding_window for layer in _card(tmp_path, [0, 6, 0]).layers] == [None, 6, None]


def test_use_sliding_window_false_turns_the_list_off(tmp_path):
    card = _card(tmp_path, [4, 4, 4], use_sliding_window=False)
    assert [layer.mixer.sliding_window for layer in card.layers] == [None] * L


def test_a_shorter_list_repeats_and_says_it_is_assumed(tmp_path):
    card = _card(tmp_path, [5])
    assert [layer.mixer.sliding_window for layer in card.layers] == [5] * L
    assert {card.origins[f"layers.{i}.mixer.sliding_window"] for i in range(L)} == {"assumed"}
    doc = inspect_checkpoint(str(tmp_path))
    assert any("assumed" in w and "sliding_window" in w for w in doc["warnings"]), doc["warnings"]


@pytest.mark.parametrize("windows", [[4, 4], [4, "8", 4], [4, -1, 4], [4, True, 4], []])
def test_a_list_that_does_not_fit_is_one_line_naming_the_key(tmp_path, windows):
    write_llama(tmp_path, {"model_type": "acme_lm", "sliding_window": windows})
    with pytest.raises(ConfigError, match="sliding_window"):
        inspect_checkpoint(str(tmp_path))


@pytest.mark.needs_transformers
def test_validate_runs_each_layer_with_its_listed_window(tmp_path):
    ckpt = tmp_path / "ckpt"
    """A qwen2 model whose layer_types slide on layer 0 only (transformers honours them) and the same weights
    with that schedule written as `sliding_window: [4, null]`: our logits equal transformers' on a prompt
    longer than the window (full attention gives other logits: the window was applied)."""
    pytest.importorskip("transformers")
    import json

    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig

    from archprobe.validate import validate
    from tests.support.tiny_models import build, perturb_parameters

    prompt = [5, 17, 42, 99, 3, 128, 77, 200, 9, 31, 64, 250]
    kw = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, use_sliding_window=True, sliding_window=4, max_window_layers=0)
    model = build(AutoConfig.for_model("qwen2", layer_types=["sliding_attention", "full_attention"], **kw), ckpt,
                  adjust=perturb_parameters)
    with torch.no_grad():
        want = model(torch.tensor([prompt])).logits[0]
    config = json.loads((ckpt / "config.json").read_text())
    config.pop("layer_types")
    config["sliding_window"] = [4, None]
    (ckpt / "config.json").write_text(json.dumps(config))
    out = tmp_path / "logits.safetensors"
    doc = validate(str(ckpt), prompt_ids=prompt, save_logits=str(out))
    assert doc["status"] == "ran", doc.get("reasons")
    got = load_file(str(out))["logits"].reshape(want.shape)
    assert ((got - want).abs().max() / want.abs().max()).item() <= 1e-5
    config["sliding_window"] = [0, 0]              # the same model with full attention: another answer
    (ckpt / "config.json").write_text(json.dumps(config))
    doc = validate(str(ckpt), prompt_ids=prompt, save_logits=str(out))
    assert doc["status"] == "ran", doc.get("reasons")
    full = load_file(str(out))["logits"].reshape(want.shape)
    assert ((full - want).abs().max() / want.abs().max()).item() > 1e-3


@pytest.mark.parametrize("pattern,want", [(3, [4, 4, None]), (2, [4, None, 4]), ("LG", [4, None, None]),
                                          ("LLL", [4, 4, None])])
def test_sliding_window_pattern_without_layer_types(tmp_path, pattern, want):
    """Configs written before `layer_types` (Gemma 3, Cohere 2, EXAONE 4): every N-th layer full, or an L/G
    string repeated from layer 0 with the last layer global."""
    write_llama(tmp_path, {"model_type": "acme_lm", "sliding_window": 4, "sliding_window_pattern": pattern})
    card = build_card(open_source(str(tmp_path))).card
    assert [layer.mixer.sliding_window for layer in card.layers] == want
    assert {card.origins[f"layers.{i}.mixer.sliding_window"] for i, w in enumerate(want) if w} == {
        "config:sliding_window_pattern"}


def test_a_pattern_of_something_else_is_one_line(tmp_path):
    write_llama(tmp_path, {"model_type": "acme_lm", "sliding_window": 4, "sliding_window_pattern": "LXG"})
    with pytest.raises(ConfigError, match="sliding_window_pattern"):
        inspect_checkpoint(str(tmp_path))
