"""The full-size K3 inventory with every language-model module path renamed (experts -> expert_bank,
self_attn -> mixer, ...) and an unknown model_type: the card must find the same layer plan, features and
active parameters as for K3 itself (tests/structure/test_k3_sparse.py), from shapes."""

from __future__ import annotations

import pytest

from archprobe.structure.inspect import inspect_checkpoint
from tests.support.renamed_k3 import write_renamed_k3


@pytest.fixture(scope="module")
def k3_renamed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("k3-renamed")
    write_renamed_k3(folder)
    return str(folder)


def test_renamed_k3_matches_k3(k3_renamed, k3_sparse):
    got, want = inspect_checkpoint(k3_renamed), inspect_checkpoint(k3_sparse)
    assert got["model_type"] == "acme_lm"
    assert [(layer["mixer"], layer["ffn"], layer["residual"]) for layer in got["layers"]] == [
        (layer["mixer"], layer["ffn"], layer["residual"]) for layer in want["layers"]]
    assert got["architecture"]["mixers"] == {"kda": 69, "mla": 24}
    assert got["params"]["total"] == want["params"]["total"] == 2_779_931_837_184
    assert got["params"]["active"] == want["params"]["active"]
    assert abs(got["params"]["active"] - 105.4e9) < 0.05e9
    fg = {f["id"]: (f["layers"], f["attrs"]) for f in got["features"]}
    fw = {f["id"]: (f["layers"], f["attrs"]) for f in want["features"]}
    assert fg == fw
    assert got["unrecognized"] == [] and got["unknown_fields"] == []
    assert got["storage"]["tensors"] == want["storage"]["tensors"] == 497_220
