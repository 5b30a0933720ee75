"""RWKV-4's states in the cached decode path: token by token, with time mixing's WKV state and both token
shifts (channel mixing's last input kept as the FFN's state in the layer cache), the logits equal the
whole-sequence forward's; and validate's greedy continuation equals transformers' own generate."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
from tests.support import zoo as zoo_mod  # noqa: E402

pytestmark = pytest.mark.needs_transformers

from archprobe.validate import validate  # noqa: E402
from archprobe.validate.decode import LazyModel  # noqa: E402


def test_token_by_token_equals_the_whole_sequence(zoo_root):
    model = LazyModel(str(zoo_mod.build("rwkv", zoo_root)))
    try:
        ids = torch.tensor([list(zoo_mod.PROMPT_IDS)])
        whole, _ = model.forward(ids, all_positions=True)
        caches, steps = None, []
        for t in range(ids.shape[1]):
            logits, caches = model.forward(ids[:, t:t + 1], caches, start=t)
            steps.append(logits[:, -1])
        # each layer's cache: (time mixing's (last input, num, den, max), channel mixing's last input)
        assert all(isinstance(c, tuple) and len(c) == 2 and c[1].shape == (1, model.decoder.config.hidden_size)
                   for c in caches)
    finally:
        model.close()
    stepped = torch.stack(steps, dim=1)
    assert torch.allclose(stepped, whole, atol=1e-5, rtol=1e-5), (stepped - whole).abs().max()


def test_greedy_continuation_matches_transformers_generate(zoo_root):
    doc = validate(str(zoo_mod.build("rwkv", zoo_root)), prompt_ids=list(zoo_mod.PROMPT_IDS),
                   reference="transformers", generate=6)
    assert doc["status"] == "pass" and doc["reference"]["within_gate"] is True
    gen = doc["generation"]
    assert len(gen["ours"]["ids"]) == 6
    assert gen["ours"]["ids"] == gen["reference"]["ids"] and gen["first_difference"] is None


def test_a_stateful_ffn_in_a_parallel_block_is_unsupported_not_an_error(zoo_root):
    """Channel mixing keeps a state across tokens; a card that puts it in a parallel block is refused as
    `unsupported` naming the layer and the field, before any layer runs."""
    from archprobe.structure.checkpoint import open_checkpoint

    folder = str(zoo_mod.build("rwkv", zoo_root))
    ckpt = open_checkpoint(folder)
    ckpt.card.layers[1].parallel = True
    doc = validate(ckpt, prompt_ids=list(zoo_mod.PROMPT_IDS))
    assert doc["status"] == "unsupported", doc["status"]
    (reason,) = doc["reasons"]
    assert reason.startswith("layer 1: ffn_types[1] = 'rwkv_channel' keeps a state"), reason
    assert "block = 'parallel'" in reason
