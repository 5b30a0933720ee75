"""A tiny transformers Kimi Linear saved as its runtime module tree (`model.state_dict()`, not
`save_pretrained`, which converts back to the release names): one conv1d over q|k|v, the decay pair under
`forget_gate.`, merged expert banks. validate splits the conv by the q/k/v widths and matches transformers at
the fp32 gate, with the names as stored and with every name replaced by a nonsense word (q_proj / k_proj /
v_proj kept: equal widths, only names tell them apart). The KDA width (4 x 32) differs from the hidden size
(64) so that the output projection is not square and its shape finds it."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from safetensors.torch import save_file  # noqa: E402

from archprobe.validate import validate  # noqa: E402
from tests.support.nonsense_names import nonsense_map  # noqa: E402
from tests.support.tiny_models import perturb, tiny_configs  # noqa: E402

PROMPT = [5, 17, 3, 99, 42, 7, 250, 1, 8, 64, 33]


def _module_tree(folder, rename: bool):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    config = tiny_configs()["kimi_linear"]
    config.linear_attn_config = {**config.linear_attn_config, "head_dim": 32}
    config.linear_head_dim = 32
    model = AutoModelForCausalLM.from_config(config).eval()
    perturb(model)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    assert "model.layers.0.self_attn.conv1d.weight" in state and "model.layers.0.self_attn.q_conv1d.weight" not in state
    names = nonsense_map(state, keep={"q_proj", "k_proj", "v_proj"}) if rename else {k: k for k in state}
    folder.mkdir(exist_ok=True)
    save_file({names[k]: v for k, v in state.items()}, str(folder / "model.safetensors"), metadata={"format": "pt"})
    saved = model.config.to_dict()
    if rename:
        saved["model_type"], saved["architectures"] = "zq_lm", ["ZqForCausalLM"]
    (folder / "config.json").write_text(json.dumps(saved))
    with torch.no_grad():
        return model(torch.tensor([PROMPT])).logits[0, -1]


def test_module_tree_matches_transformers(tmp_path):
    _module_tree(tmp_path / "tree", rename=False)
    doc = validate(str(tmp_path / "tree"), prompt_ids=PROMPT, reference="transformers")
    assert doc["status"] == "pass", doc
    assert doc["unmapped_tensors"] == [] and doc["missing_tensors"] == []
    ref = doc["reference"]
    assert ref["max_abs_diff"] <= 1e-4 * ref["logit_scale"] and abs(ref["kl"]) <= 1e-6, ref
    assert [layer["kind"].split("+")[0] for layer in doc["layers"]] == ["kda", "kda", "mla", "kda", "kda", "mla"]


def test_renamed_module_tree_computes_transformers_logits(tmp_path):
    want = _module_tree(tmp_path / "zq", rename=True)
    out = tmp_path / "logits.safetensors"
    doc = validate(str(tmp_path / "zq"), prompt_ids=PROMPT, save_logits=str(out))
    assert doc["status"] == "ran", doc
    assert doc["unmapped_tensors"] == [] and doc["missing_tensors"] == []
    from safetensors.torch import load_file

    got = next(iter(load_file(str(out)).values())).reshape(-1, want.shape[-1])[-1]
    diff = (got.double() - want.double()).abs().max().item()
    assert diff <= 1e-4 * want.abs().max().item(), diff


@pytest.mark.parametrize("family", ["qwen3_next", "deepseek_v3", "nemotron_h"])
def test_other_families_saved_as_their_module_tree_match_transformers(family, tmp_path):
    """The same for families whose runtime tree differs from the release in the expert banks only (merged
    `gate_up_proj` [E, 2I, H] / `down_proj` [E, H, I])."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_configs()[family]).eval()
    perturb(model)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "model.safetensors"),
              metadata={"format": "pt"})
    (tmp_path / "config.json").write_text(json.dumps(model.config.to_dict()))
    doc = validate(str(tmp_path), prompt_ids=PROMPT, reference="transformers")
    assert doc["status"] == "pass" and doc["unmapped_tensors"] == [] and doc["missing_tensors"] == [], doc
    ref = doc["reference"]
    assert ref["max_abs_diff"] <= 1e-4 * ref["logit_scale"] and abs(ref["kl"]) <= 1e-6, ref
