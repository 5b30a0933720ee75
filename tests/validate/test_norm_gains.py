"""validate refuses a norm whose stored gains centre on 0 when the card applies it as w (the (1 + w)
norms of Qwen3-Next, known to the card only through its model_type), and runs it once the user says so.

The case is the zoo's renamed Qwen3-Next twin: unknown model_type, so no family row; before this check it
ran with gains of about 0 and disagreed with its original by 99%."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
from tests.support import zoo as zoo_mod  # noqa: E402

pytestmark = pytest.mark.needs_transformers

from archprobe.validate import validate  # noqa: E402
from archprobe.validate.build import NeedsField  # noqa: E402
from archprobe.validate.load import load  # noqa: E402


def test_twin_refuses_naming_the_offset(zoo_root):
    twin = zoo_mod.build_twin("qwen3_next", zoo_root)
    with pytest.raises(NeedsField) as err:
        validate(str(twin), prompt_ids=list(zoo_mod.PROMPT_IDS))
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
    doc = validate(str(twin), prompt_ids=list(zoo_mod.PROMPT_IDS), card=str(path), save_logits=str(out))
    assert doc["status"] == "ran"
    got = load_file(str(out))["logits"][0]
    want = zoo_mod.load_reference_logits(zoo_mod.build("qwen3_next", zoo_root))
    assert ((got - want).abs().max() / want.abs().max()).item() <= 1e-4


def test_plain_gains_are_not_questioned(zoo_root):
    doc = validate(str(zoo_mod.build("qwen2_moe", zoo_root)), prompt_ids=list(zoo_mod.PROMPT_IDS))
    assert doc["status"] == "ran"
