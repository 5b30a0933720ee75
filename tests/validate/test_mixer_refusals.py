"""Config multipliers run as transformers runs them (Falcon-H1's muP multipliers, MiniMax's residual alpha/beta
factors); what a card cannot run is refused by name, never run as something else."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

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


@pytest.mark.parametrize("name,config", [
    ("falcon_h1", {"ssm_out_multiplier": 0.5}),
    ("falcon_h1", {"mlp_multipliers": [1.0, 2.0], "attention_in_multiplier": 0.7}),
    ("minimax", {"mlp_beta_factor": 2.0}),
])
def test_multipliers_once_refused_now_match_transformers(zoo, tmp_path, name, config):
    """Falcon-H1's muP multipliers (folded into the weights they scale) and MiniMax's residual alpha/beta
    factors: run, and agree with transformers built from the same edited config."""
    folder = _copy_with(zoo, tmp_path, name, **config)
    doc = validate(folder, prompt_ids=list(PROMPT_IDS), reference="transformers")
    ref = doc["reference"]
    assert doc["status"] == "pass", (doc.get("reasons"), ref)
    assert ref["max_abs_diff"] <= 1e-4 * ref["logit_scale"] and abs(ref["kl"]) <= 1e-6


def test_a_per_head_gate_of_an_unknown_family_needs_its_activation(zoo, tmp_path):
    """LFM3 gates each head with a sigmoid, Laguna with a softplus: the shapes are the same, so without the
    family's row validate names the field instead of guessing."""
    from archprobe.validate.plan import NeedsField

    folder = _copy_with(zoo, tmp_path, "lfm3", model_type="lfm3_renamed", hidden_act="silu")
    with pytest.raises(NeedsField, match="head_gate_act"):
        validate(folder, prompt_ids=list(PROMPT_IDS), reference="none")
