"""What the new mixers' cards cannot run is refused, never run as something else: Falcon-H1's muP multipliers
other than 1 and MiniMax's residual alpha/beta factors other than 1 (both read from config.json)."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from archprobe.structure.card import load_card  # noqa: E402
from archprobe.validate import validate  # noqa: E402
from tests.support.zoo import PROMPT_IDS  # noqa: E402


def _copy_with(zoo, tmp_path, name: str, **config) -> str:
    dst = tmp_path / name
    shutil.copytree(zoo[name], dst)
    cfg = json.loads((dst / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**cfg, **config}))
    return str(dst)


def _user_card(folder: str, path, **fields) -> str:
    """The derived card with `fields` (dotted paths, every layer's `{i}`) set as a user would."""
    from archprobe.formats.sources import open_source
    from archprobe.structure.inspect import build_card

    card = build_card(open_source(folder)).card
    for i in range(len(card.layers)):
        for key, value in fields.items():
            if card.get(f"layers.{i}.ffn.kind") in ("moe", "latent_moe") or ".ffn." not in key:
                card.set(key.format(i=i), value)
    path.write_text(card.to_json())
    return str(path)


@pytest.mark.parametrize("name,config,words", [
    ("falcon_h1", {"ssm_out_multiplier": 0.5}, "muP"),
    ("falcon_h1", {"mlp_multipliers": [1.0, 2.0]}, "muP"),
])
def test_a_multiplier_archprobe_does_not_run_is_refused(zoo, tmp_path, name, config, words):
    folder = _copy_with(zoo, tmp_path, name, **config)
    # the router's renormalisation comes from a family row on another branch; set here so the layer gets as far
    card = _user_card(folder, tmp_path / "card.json", **{"layers.{i}.ffn.router.renormalize": True})
    doc = validate(folder, prompt_ids=list(PROMPT_IDS), reference="none", card=load_card(card))
    assert doc["status"] == "unsupported" and words in doc["reasons"][0], doc["reasons"]


def test_a_per_head_gate_of_an_unknown_family_needs_its_activation(zoo, tmp_path):
    """LFM3 gates each head with a sigmoid, Laguna with a softplus: the shapes are the same, so without the
    family's row validate names the field instead of guessing."""
    from archprobe.validate.build import NeedsField

    folder = _copy_with(zoo, tmp_path, "lfm3", model_type="lfm3_renamed", hidden_act="silu")
    with pytest.raises(NeedsField, match="head_gate_act"):
        validate(folder, prompt_ids=list(PROMPT_IDS), reference="none")
