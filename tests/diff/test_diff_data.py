"""`archprobe diff --data`: weights compared tensor by tensor, matched by card role.

Planted answers: a checkpoint against itself differs nowhere; a copy with one tensor perturbed differs in
exactly that tensor (and its layer is the one flagged); a quantized twin (every matrix Q8_0 through the gguf
package, one layer Q4_0) names that layer; the statistics equal numpy's on the same pair; a real GGUF model
against transformers' dequantized safetensors form matches every role with fp32-level errors; two tensors'
worth of memory, not the checkpoint's."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from archprobe.diff.compare import add_weight_sections
from archprobe.diff.data import data_diff, open_weights
from archprobe.diff.headers import diff_sources
from tests.support.cli import invoke
from tests.support.diff_pairs import quantized, rewrite, tiny_llama

MB = 2**20
SLACK = 16 * MB


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("base") / "a")


def test_a_checkpoint_against_itself_differs_nowhere(base, tmp_path):
    copy = rewrite(base, tmp_path / "copy", lambda n, t: t)
    d = data_diff(open_weights(base), open_weights(copy))
    assert d["compared"] == 3 + 4 * 9 and d["differing"] == 0 and d["identical"] == d["compared"]
    assert d["tensors"]["items"] == [] and d["flagged_layers"] == [] and d["worst_layer"] is None
    assert not d["skipped"] and not d["only_a"] and not d["only_b"]
    assert all(r["rel_error"] == 0 and r["max_error"] == 0 and r["cosine"] == pytest.approx(1.0, abs=1e-12)
               for r in d["layers"])


def test_one_perturbed_tensor_is_exactly_that_tensor(base, tmp_path):
    target = "model.layers.2.mlp.down_proj.weight"
    g = torch.Generator().manual_seed(1)
    noise = {}

    def change(n, t):
        if n != target:
            return t
        noise["d"] = 0.05 * t.std() * torch.randn(t.shape, generator=g)
        return t + noise["d"]

    b = rewrite(base, tmp_path / "b", change)
    d = data_diff(open_weights(base), open_weights(b))
    assert d["differing"] == 1 and [r["a"] for r in d["tensors"]["items"]] == [target]
    row = d["tensors"]["items"][0]
    assert row["role"] == "layers.2.ffn.down"
    # the figures, from numpy on the same pair (float64)
    a = load_file(f"{base}/model.safetensors")[target].double().numpy()
    bb = load_file(f"{b}/model.safetensors")[target].double().numpy()
    diff = bb - a
    assert row["rel_error"] == pytest.approx(np.linalg.norm(diff) / np.linalg.norm(a), rel=1e-6)
    assert row["max_error"] == pytest.approx(np.abs(diff).max(), rel=1e-6)
    assert row["cosine"] == pytest.approx((a * bb).sum() / np.linalg.norm(a) / np.linalg.norm(bb), rel=1e-7)
    assert row["outlier_share"] == pytest.approx((np.abs(diff) > np.sqrt((a * a).mean())).mean(), abs=1e-12)
    assert d["flagged_layers"] == ["2"] and d["worst_layer"] == "2"


def test_a_quantized_twin_with_a_planted_bad_layer_names_that_layer(base, tmp_path):
    from gguf import GGMLQuantizationType as Q

    def change(n, t):
        if t.ndim != 2 or "embed" in n or "lm_head" in n:
            return t
        return quantized(t, Q.Q4_0 if ".layers.1." in n else Q.Q8_0)

    b = rewrite(base, tmp_path / "q", change)
    d = data_diff(open_weights(base), open_weights(b))
    assert d["flagged_layers"] == ["1"] and d["worst_layer"] == "1"
    assert d["differing"] == 4 * 7          # every layer matrix, nothing else
    rel = {r["layer"]: r["rel_error"] for r in d["layers"]}
    assert all(0 < rel[k] < 0.02 for k in ("0", "2", "3")) and rel["1"] > 0.05


def test_cli_data_json_and_text(base, tmp_path):
    b = rewrite(base, tmp_path / "b", lambda n, t: t * 1.5 if n == "model.norm.weight" else t)
    r = invoke("diff", base, b, "--data", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["identical"] is False and doc["summary"]["tensors_data_differing"] == 1
    assert doc["card"]["total"] == 0 and doc["tensors"]["total"] == 0    # the headers agree; the data does not
    assert doc["data"]["tensors"]["items"][0]["role"] == "final_norm"
    assert doc["data"]["tensors"]["items"][0]["rel_error"] == pytest.approx(0.5, rel=1e-6)
    r = invoke("diff", base, b, "--data")
    assert r.exit_code == 0 and "1 differ" in r.stdout and "final_norm" in r.stdout
    r = invoke("diff", base, "org/never-downloaded", "--data")
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_different_architectures_compare_as_far_as_they_match(base, tmp_path):
    other = tiny_llama(tmp_path / "small", layers=2, hidden=64, inter=96, seed=3)
    doc = diff_sources(base, other)
    add_weight_sections(doc, base, other, data=True, forward=False)
    d = doc["data"]
    assert {r["role"] for r in d["skipped"]} == {f"layers.{i}.ffn.{p}" for i in (0, 1) for p in ("gate", "up", "down")}
    assert all("shapes differ" in r["why"] for r in d["skipped"])
    assert {"layers.2.mixer.q", "layers.3.ffn.down"} <= set(d["only_a"]) and not d["only_b"]
    assert d["differing"] == d["compared"] > 0


def _real_pair():
    from tests.support import real_models

    gguf = real_models.smollm2_gguf()
    hf = str(real_models.safetensors_dir("smollm2-135m", real_models.real_root()))
    return open_weights(gguf), open_weights(hf)


def test_real_gguf_layers_against_the_dequantized_safetensors_form():
    """Two decoder layers and the final norm of the real model (the whole model: the slow test below)."""
    wa, wb = _real_pair()
    keep = [r for r in wa.roles if r.startswith(("layers.0.", "layers.29.")) or r == "final_norm"]
    wa.roles = {r: wa.roles[r] for r in keep}
    d = data_diff(wa, wb)
    assert d["compared"] == 2 * 9 + 1 and not d["skipped"], d["skipped"][:3]
    assert max(r["max_rel_error"] for r in d["layers"]) < 1e-6, d["layers"]


@pytest.mark.slow
def test_real_gguf_against_its_dequantized_safetensors_form_matches_every_role():
    wa, wb = _real_pair()
    d = data_diff(wa, wb)
    assert not d["skipped"] and not d["only_b"], (d["skipped"][:3], d["only_b"][:3])
    assert d["compared"] + len(d["only_a"]) == len(wa.roles) and d["only_a"] in ([], ["head"])
    assert max(r["max_rel_error"] for r in d["layers"]) < 1e-6, d["layers"][:3]


def test_peak_memory_is_two_tensors_not_the_checkpoint(tmp_path):
    from tests.support.rss import peak_rss_growth

    a = tiny_llama(tmp_path / "big", layers=2, hidden=1024, inter=2048)
    b = rewrite(a, tmp_path / "big2", lambda n, t: t)
    wa, wb = open_weights(a), open_weights(b)
    largest = 1024 * 2048 * 4
    total = sum(t.numel() * 4 for t in load_file(f"{a}/model.safetensors").values())
    with peak_rss_growth() as rss:
        d = data_diff(wa, wb)
    assert d["compared"] == 3 + 2 * 9 and d["differing"] == 0
    # two dense tensors and the file pages they were read from (a shard is memory-mapped while its tensor
    # is read), plus the allocator's slack; both checkpoints together are three times that
    bound = 4 * largest + SLACK
    assert 2 * total > 3 * bound
    assert rss.bytes < bound, (rss.bytes / MB, bound / MB, 2 * total / MB)


def test_an_fp8_block_scaled_twin_is_dequantized_before_the_comparison(base, tmp_path):
    """B stores every layer matrix as F8_E4M3 with a weight_scale_inv per 128 x 128 block (DeepSeek style);
    --data compares A with the dequantized values, computed here independently."""
    shutil.copytree(base, tmp_path / "fp8")
    tensors = load_file(f"{base}/model.safetensors")
    out, want = {}, {}
    for n, t in tensors.items():
        if t.ndim != 2 or ".layers." not in n:
            out[n] = t
            continue
        scale = t.abs().max() / 448.0                    # one block: every matrix here is at most 128 wide
        q = (t / scale).to(torch.float8_e4m3fn)
        out[n] = q
        out[n.replace(".weight", ".weight_scale_inv")] = scale.reshape(1, 1).float()
        want[n] = (t.double(), q.double() * float(scale))
    save_file(out, f"{tmp_path}/fp8/model.safetensors", metadata={"format": "pt"})
    d = data_diff(open_weights(base), open_weights(str(tmp_path / "fp8")))
    assert not d["skipped"] and d["differing"] == len(want) == 4 * 7
    for row in d["tensors"]["items"]:
        a, b = want[row["a"]]
        assert row["rel_error"] == pytest.approx(float((b - a).norm() / a.norm()), rel=1e-5), row["a"]
        assert 1e-3 < row["rel_error"] < 0.1


def test_hf_against_a_quantized_gguf_twin_with_a_planted_bad_layer(tmp_path):
    """Every role meets its GGUF name (q/k rows un-permuted); Q8_0 everywhere but layer 2 in Q4_0: layer 2.
    (The gguf package quantizes the legacy types only; k-quant dequantization is checked in test_gguf_dequant.)"""
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import dequantize, quantize

    from tests.support.diff_pairs import gguf_twin

    a = tiny_llama(tmp_path / "hf", layers=4, hidden=128, inter=256)
    g = gguf_twin(a, tmp_path / "twin.gguf", lambda i, name: Q.Q4_0 if i == 2 else Q.Q8_0)
    d = data_diff(open_weights(a), open_weights(g))
    assert not d["only_a"] and not d["only_b"] and not d["skipped"]
    assert d["compared"] == 3 + 4 * 9 and d["differing"] == 4 * 7
    assert d["flagged_layers"] == ["2"] and d["worst_layer"] == "2"
    # q rows back in HF order: its error is Q8_0's, not a permutation's (that would be ~1.4)
    rows = {r["role"]: r for r in d["tensors"]["items"]}
    assert rows["layers.0.mixer.q"]["rel_error"] < 0.01 and rows["layers.0.mixer.q"]["cosine"] > 0.9999
    w = load_file(f"{a}/model.safetensors")["model.layers.2.mlp.down_proj.weight"].numpy()
    b = dequantize(quantize(w, Q.Q4_0), Q.Q4_0).reshape(w.shape).astype(np.float64)
    want = np.linalg.norm(b - w) / np.linalg.norm(w)
    assert rows["layers.2.ffn.down"]["rel_error"] == pytest.approx(want, rel=1e-5)


def test_a_nan_in_b_is_the_worst_difference_and_its_layer_is_flagged(base, tmp_path):
    target = "model.layers.3.self_attn.v_proj.weight"

    def change(n, t):
        if n == target:
            t = t.clone()
            t[0, 0] = float("nan")
        return t * 1.001 if n == "model.layers.0.mlp.up_proj.weight" else t

    d = data_diff(open_weights(base), open_weights(rewrite(base, tmp_path / "nan", change)))
    assert [r["a"] for r in d["tensors"]["items"]] == [target, "model.layers.0.mlp.up_proj.weight"]
    assert d["tensors"]["items"][0]["nonfinite"] == 1 and d["tensors"]["items"][1]["nonfinite"] == 0
    assert "3" in d["flagged_layers"] and d["worst_layer"] == "3"
    r = invoke("diff", base, str(tmp_path / "nan"), "--data", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["non_finite"]      # strict JSON: NaN written as null
