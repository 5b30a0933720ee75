"""Layouts by shape: Kimi-Linear-48B stored as the release names it (three q/k/v convs, the decay pair beside
the projections) and as transformers' module tree keeps it (one conv1d [3D, 1, K] over q|k|v, the decay pair
under `forget_gate.`, merged expert banks), and that tree with every name replaced by a nonsense word, give
one card: the same layer plan, the same mixer and FFN fields, every tensor explained, each role bound to the
same tensor whatever it is called (the embedding and the head, equal in shape, by their place in the trunk)."""

from __future__ import annotations

import pytest

from archprobe.structure.inspect import inspect_checkpoint
from tests.support import kimi_linear_48b as kl
from tests.support.nonsense_names import bindings, nonsense_map, without_evidence

TIES = {"q_proj", "k_proj", "v_proj"}     # equal widths: only names tell them apart, so the rename keeps them


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    root = tmp_path_factory.mktemp("kl48")
    tree = kl.inventory("transformers")
    renamed = nonsense_map([n for n, _, _ in tree], keep=TIES)
    out = {}
    for name, layout, rename in (("checkpoint", "checkpoint", None), ("transformers", "transformers", None),
                                 ("nonsense", "transformers", renamed.get)):
        inv = kl.write(root / name, layout, rename)
        out[name] = (inspect_checkpoint(str(root / name)), inv)
    out["roles"] = (bindings(root / "transformers"), bindings(root / "nonsense"), renamed)
    return out


def test_release_layout_reads_kda_and_mla_where_the_config_says(layouts):
    doc, inv = layouts["checkpoint"]
    want = ["mla" if i + 1 in kl.FULL_ATTN else "kda" for i in range(kl.L)]
    assert [layer["mixer"] for layer in doc["layers"]] == want
    assert doc["params"]["total"] == kl.stored_params(inv)
    assert doc["unrecognized"] == []


@pytest.mark.parametrize("name", ["transformers", "nonsense"])
def test_module_tree_layout_gets_the_release_card(layouts, name):
    got, inv = layouts[name]
    want, _ = layouts["checkpoint"]
    assert [layer["mixer"] for layer in got["layers"]] == [layer["mixer"] for layer in want["layers"]]
    assert without_evidence(got["card"]["layers"]) == without_evidence(want["card"]["layers"])
    for part in ("embed", "rope", "final_norm", "head"):
        assert without_evidence(got["card"][part]) == without_evidence(want["card"][part]), part
    assert got["architecture"]["mixers"] == want["architecture"]["mixers"] == {"kda": 20, "mla": 7}
    assert got["params"]["total"] == want["params"]["total"] == kl.stored_params(inv)
    assert got["params"]["active"] == want["params"]["active"]
    assert {f["id"]: f["layers"] for f in got["features"]} == {f["id"]: f["layers"] for f in want["features"]}
    assert got["unrecognized"] == []


def test_nonsense_names_bind_every_role_to_the_same_tensor(layouts):
    tree, nonsense, renamed = layouts["roles"]
    assert {role: renamed[name] for role, name in tree.items()} == nonsense
    assert tree["layers.0.mixer.conv1d"] == "model.layers.0.self_attn.conv1d.weight"
    assert tree["layers.0.mixer.f_a"] == "model.layers.0.self_attn.forget_gate.f_a_proj.weight"
    assert tree["embed"] == "model.embed_tokens.weight" and tree["head"] == "lm_head.weight"
