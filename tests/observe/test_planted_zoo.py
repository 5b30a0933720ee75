"""Planted answers in checkpoints of other families, found by card role, not by name: transformers' own
Qwen3-MoE, Mixtral, Qwen2-MoE, DeepSeek-V3 and Kimi Linear models (tests/support/zoo.py), each copied and
edited on disk: a NaN, a finite 1e4 outlier (with many siblings and with a single one), a duplicated expert,
a layer whose outputs are zeroed (it adds nothing), and, where the router has a selection bias, a router
forced to one expert and an expert the router can never pick. The clean copies give no finding."""

import math
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from archprobe.observe import observe

pytest.importorskip("transformers")

FAMILIES = ["qwen3_moe", "mixtral", "qwen2_moe", "deepseek_v3", "kimi_linear"]


def _card(folder):
    from archprobe.validate.load import load

    return load(str(folder), None).card


def _names(card, role: str, experts: int) -> list[str]:
    """The checkpoint names a role binds: an enumerated expert family `*` unfolded."""
    name = card.tensors[role]
    return [name.replace("*", str(e)) for e in range(experts)] if "*" in name else [name]


def _moe_layers(card) -> list[int]:
    return [layer.index for layer in card.layers if layer.ffn.kind in ("moe", "latent_moe")]


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def _edit(folder, fn):
    path = folder / "model.safetensors"
    state = load_file(str(path))
    fn(state)
    save_file(state, str(path), metadata={"format": "pt"})


@pytest.fixture(scope="module")
def zoo_root(tmp_path_factory):
    return tmp_path_factory.mktemp("zoo_planted")


def _build(name, root):
    from tests.support.zoo import build

    return build(name, root)


@pytest.mark.parametrize("name", FAMILIES)
def test_weights_plants_found_by_role(name, zoo_root, tmp_path):
    src = _build(name, zoo_root)
    card = _card(src)
    moe = _moe_layers(card)
    layer = moe[-1]
    E = card.layers[layer].ffn.num_experts
    downs = _names(card, f"layers.{layer}.ffn.experts.*.down", E)
    nan_at = card.tensors[f"layers.{moe[0]}.mixer.o"]
    outlier_expert = downs[2]
    outlier_single = card.tensors[f"layers.{moe[0]}.norm.pre_mixer"]   # a norm gain: one sibling at most
    dup_roles = [r for r in card.tensors if r.startswith(f"layers.{layer}.ffn.experts.*.")]

    def plant(state):
        state[nan_at][1, 2] = float("nan")
        state[outlier_expert][0, 3] = 1e4
        state[outlier_single][5] = 1e4
        for role in dup_roles:
            names = _names(card, role, E)
            state[names[E - 1]] = state[names[0]].clone()

    planted = _copy(src, tmp_path / "planted")
    _edit(planted, plant)
    clean = observe(str(src), weights_only=True)["weights"]
    assert clean["nonfinite"] == [] and clean["duplicates"] == [] and clean["outliers"] == []
    w = observe(str(planted), weights_only=True)
    found = w["weights"]
    assert found["nonfinite"] == [{"tensor": nan_at, "count": 1}]
    flagged = {o["tensor"] for o in found["outliers"]}
    assert flagged == {outlier_expert, outlier_single}, found["outliers"]
    want = sorted(sorted([_names(card, r, E)[0], _names(card, r, E)[E - 1]]) for r in dup_roles)
    assert sorted(map(sorted, found["duplicates"])) == want
    assert any(nan_at in m for m in w["warnings"]) and any(outlier_expert in m for m in w["warnings"])
    assert any(d["layer"] == layer and d["expert"] == E - 1 and d["copy_of"] == 0
               for d in found["duplicate_experts"]), found["duplicate_experts"]


@pytest.mark.parametrize("name", FAMILIES)
def test_layer_that_adds_nothing_by_role(name, zoo_root, tmp_path):
    src = _build(name, zoo_root)
    card = _card(src)
    idle = 1
    E = card.layers[idle].ffn.num_experts or 0
    outs = [r for r in card.tensors if r.startswith(f"layers.{idle}.")
            and (r.endswith("mixer.o") or r.endswith(".down"))]

    def plant(state):
        for role in outs:
            for n in _names(card, role, E):
                state[n].zero_()

    planted = _copy(src, tmp_path / "idle")
    _edit(planted, plant)
    doc = observe(str(planted), weights=False)
    d = next(x for x in doc["depth"] if x["layer"] == idle)
    assert d["cosine_in_out"] == pytest.approx(1.0, abs=1e-6) and d["update_ratio"] == 0.0
    assert any(x["cosine_in_out"] < 0.9999 for x in doc["depth"] if x["layer"] != idle)
    assert any(f["message"].startswith("layers that change nothing") and str(idle) in f["message"]
               for f in doc["findings"])


@pytest.mark.parametrize("name", ["deepseek_v3", "kimi_linear"])
def test_forced_router_and_dead_expert_by_role(name, zoo_root, tmp_path):
    src = _build(name, zoo_root)
    card = _card(src)
    moe = _moe_layers(card)
    forced_layer, dead_layer = moe[0], moe[-1]
    assert forced_layer != dead_layer
    E, k = card.layers[forced_layer].ffn.num_experts, card.layers[forced_layer].ffn.top_k

    def plant(state):
        b = state[card.tensors[f"layers.{forced_layer}.ffn.router.bias"]]
        b.zero_()
        b[E - 2] = 100.0
        state[card.tensors[f"layers.{dead_layer}.ffn.router.bias"]][1] = -100.0

    planted = _copy(src, tmp_path / "routed")
    _edit(planted, plant)
    clean = observe(str(src), weights=False)
    assert all(r["dead"] == [] for r in clean["routing"]) and clean["warnings"] == []
    doc = observe(str(planted), weights=False)
    r = {x["layer"]: x for x in doc["routing"]}
    assert r[forced_layer]["load"][E - 2] == doc["tokens"]
    assert r[forced_layer]["imbalance"] == pytest.approx(E / k)
    assert r[dead_layer]["dead"] == [1] and r[dead_layer]["load"][1] == 0
    assert any(f"layer {dead_layer}: experts never selected" in m for m in doc["warnings"])
    assert any(f"layer {forced_layer}: expert {E - 2} is chosen" in m for m in doc["warnings"])


def test_uniform_baseline_formula_matches_enumeration():
    """The top-k overlap baseline is the share of pairs of uniformly drawn k-sets that meet: enumerate."""
    from itertools import combinations

    from archprobe.observe.routing import random_baselines

    E, k = 6, 2
    sets = [set(c) for c in combinations(range(E), k)]
    meet = sum(bool(a & b) for a in sets for b in sets) / len(sets) ** 2
    assert random_baselines(E, k)["topk_overlap"] == pytest.approx(meet)
    assert random_baselines(E, k)["top1_repeat"] == pytest.approx(1 / E)
    assert math.isclose(meet, 1 - math.comb(E - k, k) / math.comb(E, k))


def test_cross_dtype_duplicates_and_whole_layers(tmp_path):
    """An expert stored again in bfloat16 (values equal) and a layer stored twice are both named."""
    from archprobe.observe.run import weights_section

    g = torch.Generator().manual_seed(0)
    t = {}
    for i in range(4):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = torch.randn(16, 16, generator=g).bfloat16()
        t[p + "mlp.down_proj.weight"] = torch.randn(16, 32, generator=g).bfloat16()
        t[p + "input_layernorm.weight"] = torch.ones(16)
    for n in ("self_attn.q_proj.weight", "mlp.down_proj.weight"):
        t[f"model.layers.3.{n}"] = t[f"model.layers.1.{n}"].clone()
    t["model.layers.2.mlp.down_proj.weight"] = t["model.layers.0.mlp.down_proj.weight"].float()
    folder = tmp_path / "ckpt"
    folder.mkdir()
    save_file(t, str(folder / "model.safetensors"))
    (folder / "config.json").write_text("{}")
    w = weights_section(str(folder))
    groups = sorted(map(sorted, w["duplicates"]))
    assert ["model.layers.0.mlp.down_proj.weight", "model.layers.2.mlp.down_proj.weight"] in groups
    assert w["duplicate_layers"] == [{"layer": 3, "copy_of": 1, "tensors": 2}]


def test_scan_riding_the_forward_equals_the_scan_alone(zoo_root):
    """With the forward, each tensor is scanned as the stream reads it: the same section as a scan alone."""
    from archprobe.observe.run import weights_section

    src = str(_build("deepseek_v3", zoo_root))
    rode = observe(src)["weights"]
    alone = weights_section(src)
    assert rode.pop("read_during_forward") == rode["tensors"] > 0
    assert alone.pop("read_during_forward") == 0
    assert rode == alone


@pytest.mark.parametrize("name", ["mixtral", "kimi_linear"])
def test_nan_in_the_first_layer_keeps_the_forward_going(name, zoo_root, tmp_path):
    """A NaN early poisons every later activation: observe still finishes, names the tensor and the first
    layer whose output is not finite, and reports no routing finding computed from NaN scores."""
    src = _build(name, zoo_root)
    card = _card(src)
    at = card.tensors["layers.0.mixer.o"]
    planted = _copy(src, tmp_path / "nan0")
    _edit(planted, lambda state: state[at].view(-1)[:8].fill_(float("nan")))
    doc = observe(str(planted))
    assert doc["weights"]["nonfinite"] == [{"tensor": at, "count": 8}]
    assert any(m.startswith("non-finite layer outputs from layer 0") for m in doc["warnings"])
    assert not any("never selected" in m or "is chosen by" in m for m in doc["warnings"]), doc["warnings"]
