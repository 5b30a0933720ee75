"""Sliding windows read by transformers' generic rules for any model_type (structure/sliding.py), with family
rows only for the exceptions; the guess (a window with no key saying where) is origin `assumed` and printed."""

from __future__ import annotations

import json

import pytest

from archprobe.structure.config import ConfigView
from archprobe.structure.sliding import layer_windows


def _windows(cfg: dict, n: int = 4):
    view = ConfigView(cfg)
    window = view.first_int("sliding_window")
    return layer_windows(view, n, window, "sliding_window", cfg.get("layer_types"))


def test_a_window_with_no_other_key_slides_every_layer_as_an_assumption():
    assert _windows({"model_type": "phi3", "sliding_window": 8}) == [(8, "assumed")] * 4
    assert _windows({"model_type": "brand_new", "sliding_window": 8}) == [(8, "assumed")] * 4


@pytest.mark.parametrize("cfg", [{"model_type": "phi3", "sliding_window": None},
                                 {"model_type": "phi3", "sliding_window": 0},
                                 {"model_type": "starcoder2", "sliding_window": 8, "use_sliding_window": False},
                                 {"model_type": "qwen2", "sliding_window": 8},           # opt-in family, no key
                                 {"model_type": "nemotron_h", "sliding_window": 8}])     # carried, never read
def test_no_window(cfg):
    assert _windows(cfg) == [None] * 4


def test_layer_types_and_max_window_layers_say_where():
    types = ["sliding_attention", "full_attention"] * 2
    assert _windows({"model_type": "x", "sliding_window": 8, "layer_types": types}) == \
        [(8, "config:sliding_window"), None] * 2
    assert _windows({"model_type": "qwen2", "sliding_window": 8, "use_sliding_window": True,
                     "max_window_layers": 3}) == [None] * 3 + [(8, "config:max_window_layers")]
    assert _windows({"model_type": "qwen2", "sliding_window": 8, "use_sliding_window": True}) == \
        [(8, "config:use_sliding_window")] * 4


def test_families_that_slide_every_layer_whatever_the_types():
    types = ["linear_attention", "full_attention"] * 2
    assert _windows({"model_type": "minimax", "sliding_window": 8, "layer_types": types}) == [(8, "default")] * 4
    assert _windows({"model_type": "mistral", "sliding_window": 8}) == [(8, "default")] * 4


@pytest.mark.needs_transformers
def test_inspect_prints_the_assumption_and_memory_keeps_a_window(zoo_root):
    from tests.support import zoo as zoo_mod
    from tests.support.cli import invoke

    ckpt = str(zoo_mod.build("phi3_sliding", zoo_root))
    text = invoke("inspect", ckpt).output
    assert "assumed: sliding_window 4" in " ".join(text.split())
    doc = json.loads(invoke("inspect", ckpt, "--json").stdout)
    assert doc["card"]["layers"][0]["mixer"]["sliding_window"] == 4
    short, long = (json.loads(invoke("memory", ckpt, "--context", c, "--json").stdout) for c in ("4096", "65536"))
    assert set(short["cache_by_layer_type"]) == {"sliding_window"}
    assert short["cache_bytes"] == long["cache_bytes"]     # a window cache does not grow with the context
