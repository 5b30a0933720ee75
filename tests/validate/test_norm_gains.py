"""Whether a norm's stored gains are applied as w or as (1 + w) when no table row says: decided from every
norm of the model, printed as an assumption, refused only where the evidence is mixed.

The case is the zoo's renamed Qwen3-Next twin: unknown model_type, so no family row, and freshly initialised
(1 + w) gains (all 0). Before the first check it ran with gains of 0 and disagreed with its original by 99%;
the trained-weights side (SmolLM2-135M, a plain-gain llama whose layer-0 norm averages +0.001) is in
tests/real/."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("transformers")
from tests.support import zoo as zoo_mod  # noqa: E402

pytestmark = pytest.mark.needs_transformers

from archprobe.structure.card import load_card  # noqa: E402
from archprobe.validate import validate  # noqa: E402
from archprobe.validate.load import load  # noqa: E402
from archprobe.validate.plan import NeedsField  # noqa: E402


def _rel(got, want) -> float:
    return ((got - want).abs().max() / want.abs().max()).item()


def test_twin_with_zero_gains_runs_as_one_plus_w_and_says_so(zoo_root, tmp_path):
    from safetensors.torch import load_file

    twin = zoo_mod.build_twin("qwen3_next", zoo_root)
    out = tmp_path / "logits.safetensors"
    doc = validate(str(twin), prompt_ids=list(zoo_mod.PROMPT_IDS), save_logits=str(out))
    assert doc["status"] == "ran"          # no reference inside validate: the test compares the logits
    assert any("(1 + w)" in a for a in doc["assumptions"])
    want = zoo_mod.load_reference_logits(zoo_mod.build("qwen3_next", zoo_root))
    assert _rel(load_file(str(out))["logits"][0], want) <= 1e-4


def test_mixed_gains_refuse_naming_the_offset(zoo_root, tmp_path):
    """Gains spread over [-0.5, 1.5] (a quarter negative, mean +0.5): neither reading is settled."""
    import torch
    from safetensors.torch import load_file, save_file

    twin = zoo_mod.build_twin("qwen3_next", zoo_root)
    mixed = tmp_path / "mixed"
    shutil.copytree(twin, mixed)
    card = load(str(mixed)).card
    norms = {card.tensors[f] for f in card.tensors if f == "final_norm" or ".norm." in f}
    tensors = load_file(str(mixed / "model.safetensors"))
    g = torch.Generator().manual_seed(0)
    for name in norms:
        tensors[name] = torch.rand(tensors[name].shape, generator=g, dtype=torch.float32).to(
            tensors[name].dtype) * 2 - 0.5
    save_file(tensors, str(mixed / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(NeedsField) as err:
        validate(str(mixed), prompt_ids=list(zoo_mod.PROMPT_IDS))
    assert err.value.path.endswith(".offset") and "(1 + w)" in err.value.message


def test_twin_with_the_offset_set_by_the_user_matches_its_original(zoo_root, tmp_path):
    from safetensors.torch import load_file

    twin = zoo_mod.build_twin("qwen3_next", zoo_root)
    card = load(str(twin)).card
    card.set("final_norm.offset", True)
    for i, layer in enumerate(card.layers):
        for place in layer.norm:
            card.set(f"layers.{i}.norm.{place}.offset", True)
    path = tmp_path / "card.json"
    path.write_text(card.to_json())
    out = tmp_path / "logits.safetensors"
    doc = validate(str(twin), prompt_ids=list(zoo_mod.PROMPT_IDS), card=load_card(str(path)), save_logits=str(out))
    assert doc["status"] == "ran" and "assumptions" not in doc
    want = zoo_mod.load_reference_logits(zoo_mod.build("qwen3_next", zoo_root))
    assert _rel(load_file(str(out))["logits"][0], want) <= 1e-4


def test_plain_gains_are_not_questioned(zoo_root):
    doc = validate(str(zoo_mod.build("qwen2_moe", zoo_root)), prompt_ids=list(zoo_mod.PROMPT_IDS))
    assert doc["status"] == "ran" and "assumptions" not in doc
