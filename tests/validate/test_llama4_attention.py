"""Llama 4 through validate against transformers, every field derived from the config: chunked attention
(a query sees only its own `attention_chunk_size` block), the weightless q/k norm of the rope layers
(`use_qk_norm`), routing weights on the experts' input, and the NoPE layer's temperature tuning, made
active here by a `floor_scale` of 2 (real models use 8192, beyond a test prompt). Each switch is then
turned off in a user card to show it matters on this prompt."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from archprobe.structure.card import load_card  # noqa: E402
from archprobe.validate import validate  # noqa: E402
from archprobe.validate.load import load  # noqa: E402

IDS = [5, 17, 42, 99, 3, 12, 77, 20, 9]


@pytest.fixture(scope="module")
def llama4_dir(tmp_path_factory):
    from transformers import Llama4TextConfig

    from tests.support.tiny_models import build

    cfg = Llama4TextConfig(vocab_size=128, hidden_size=32, intermediate_size=24, intermediate_size_mlp=48,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                           num_local_experts=4, num_experts_per_tok=1, attention_chunk_size=3,
                           no_rope_layers=[1, 0], floor_scale=2, attn_scale=0.5, attn_temperature_tuning=True,
                           use_qk_norm=True, max_position_embeddings=64, pad_token_id=0)

    def noise(model):
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)

    out = tmp_path_factory.mktemp("llama4")
    build(cfg, out, adjust=noise, attn_implementation="eager", dtype=torch.float32)
    return out


def _card(folder, tmp_path, **fields):
    card = load(str(folder)).card
    for path, value in fields.items():
        card.set(path.replace("__", "."), value)
    f = tmp_path / "card.json"
    f.write_text(card.to_json())
    return str(f)


def test_card_reads_the_chunks_and_the_weightless_qk_norm(llama4_dir):
    card = load(str(llama4_dir)).card
    assert card.layers[0].mixer.chunk_size == 3 and card.origin("layers.0.mixer.chunk_size").startswith("config:")
    assert card.layers[1].mixer.chunk_size is None            # layer_types[1] is full_attention
    assert card.layers[0].mixer.qk_norm == "weightless"
    assert card.layers[0].ffn.router.weight_on == "input" and card.layers[0].ffn.router.renormalize is False
    assert card.layers[1].mixer.rope is False and card.layers[1].mixer.qk_norm is None   # NoPE: no qk norm
    assert json.loads(card.to_json())["layers"][0]["mixer"]["chunk_size"] == 3


def test_llama4_reproduces_transformers(llama4_dir, tmp_path):
    doc = validate(str(llama4_dir), prompt_ids=IDS, reference="transformers")
    assert doc["status"] == "pass", (doc["missing_tensors"], doc["reference"])
    # each switch matters on this prompt: without it the card disagrees with transformers
    for off in ({"layers__1__mixer__query_scale": None}, {"layers__0__mixer__chunk_size": None},
                {"layers__0__mixer__qk_norm": None}, {"layers__0__ffn__router__weight_on": "output"}):
        card = load_card(_card(llama4_dir, tmp_path, **off))
        doc = validate(str(llama4_dir), prompt_ids=IDS, reference="transformers", card=card)
        assert doc["status"] == "fail", off
