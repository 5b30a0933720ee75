"""Known answers of the weights scan on constructed safetensors checkpoints: a planted NaN, a duplicated
expert and a finite 1e4 outlier are named with their checkpoint names; the clean twin has no finding."""

import json
import math

import pytest
import torch
from safetensors.torch import save_file

from archprobe.observe.run import weights_section
from archprobe.observe.weights import sibling_key

L, E = 4, 4


def _write(folder, plant: bool):
    g = torch.Generator().manual_seed(0)
    t = {}
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = torch.randn(32, 32, generator=g) * 0.02
        t[p + "input_layernorm.weight"] = torch.ones(32)
        t[p + "self_attn.o_proj.bias"] = torch.zeros(32)
        for e in range(E):
            t[p + f"mlp.experts.{e}.down_proj.weight"] = torch.randn(32, 16, generator=g) * 0.02
            t[p + f"mlp.experts.{e}.up_proj.weight"] = torch.randn(16, 32, generator=g) * 0.02
    t["model.embed_tokens.weight"] = torch.randn(100, 32, generator=g)
    if plant:
        t["model.layers.2.self_attn.q_proj.weight"][3, 5] = float("nan")
        for w in ("down_proj", "up_proj"):
            t[f"model.layers.1.mlp.experts.3.{w}.weight"] = t[f"model.layers.1.mlp.experts.1.{w}.weight"].clone()
        t["model.layers.3.mlp.experts.0.down_proj.weight"][7, 2] = 1e4
    folder.mkdir()
    save_file(t, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": L}))
    return str(folder)


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    root = tmp_path_factory.mktemp("wscan")
    return weights_section(_write(root / "planted", True)), weights_section(_write(root / "clean", False))


def test_planted_nan_named(scans):
    planted, clean = scans
    assert planted["nonfinite"] == [{"tensor": "model.layers.2.self_attn.q_proj.weight", "count": 1}]
    assert clean["nonfinite"] == []
    stat = next(s for s in planted["stats"] if s["tensor"] == "model.layers.2.self_attn.q_proj.weight")
    assert math.isfinite(stat["rms"]) and math.isfinite(stat["max_abs"])   # stats over the finite values


def test_duplicated_expert_named(scans):
    planted, clean = scans
    assert sorted(map(sorted, planted["duplicates"])) == [
        ["model.layers.1.mlp.experts.1.down_proj.weight", "model.layers.1.mlp.experts.3.down_proj.weight"],
        ["model.layers.1.mlp.experts.1.up_proj.weight", "model.layers.1.mlp.experts.3.up_proj.weight"]]
    assert clean["duplicates"] == []    # norm gains of ones and zero biases repeat in every layer: not duplicates


def test_finite_outlier_flagged_against_siblings(scans):
    planted, clean = scans
    assert [o["tensor"] for o in planted["outliers"]] == ["model.layers.3.mlp.experts.0.down_proj.weight"]
    o = planted["outliers"][0]
    assert o["max_abs"] == 1e4 and o["share"] == pytest.approx(1 / (32 * 16))
    assert clean["outliers"] == []


def test_all_zero_and_counts(scans):
    planted, clean = scans
    assert planted["tensors"] == clean["tensors"] == L * (3 + 2 * E) + 1
    assert sorted(clean["all_zero"]) == [f"model.layers.{i}.self_attn.o_proj.bias" for i in range(L)]


def test_fused_expert_slices_compared(tmp_path):
    w = torch.randn(4, 8, 8)
    w[2] = w[0]
    folder = tmp_path / "fused"
    folder.mkdir()
    save_file({f"model.layers.{i}.mlp.experts.gate_up_proj": w if i == 0 else torch.randn(4, 8, 8)
               for i in range(3)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text("{}")
    doc = weights_section(str(folder))
    assert doc["duplicates"] == [["model.layers.0.mlp.experts.gate_up_proj[0]",
                                  "model.layers.0.mlp.experts.gate_up_proj[2]"]]


def test_sibling_key():
    assert sibling_key("model.layers.12.mlp.experts.7.w1.weight") == "model.layers.#.mlp.experts.#.w1.weight"


def test_fingerprint_collision_is_confirmed_by_full_hash(tmp_path):
    """Two tensors with the same shape, sum of squares, range and strided sample (one small value's sign
    flipped off the sample's stride) share a fingerprint; the full hash tells them apart, and a true copy
    is still found."""
    from archprobe.observe.weights import MEDIAN_SAMPLE, tensor_stats

    n = 100_000
    step = n // MEDIAN_SAMPLE
    a = torch.randn(n, generator=torch.Generator().manual_seed(3))
    b = a.clone()
    i = next(j for j in range(1, n) if j % step and abs(float(a[j])) < 0.5)
    b[i] = -b[i]
    assert tensor_stats("a", a).digest == tensor_stats("b", b).digest     # the cheap fingerprints collide
    folder = tmp_path / "collide"
    folder.mkdir()
    save_file({"model.layers.0.w": a, "model.layers.1.w": b, "model.layers.2.w": a.clone()},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text("{}")
    assert weights_section(str(folder))["duplicates"] == [["model.layers.0.w", "model.layers.2.w"]]
