"""inspect on tiny real checkpoints saved by transformers: the layer plan and features are right,
and params.total equals the model's own element count (its state dict: parameters + persistent
buffers, i.e. exactly what save_pretrained writes)."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from archprobe.structure.inspect import inspect_checkpoint  # noqa: E402
from tests.support.tiny_models import build  # noqa: E402

EXPECTED = {
    "kimi_linear": {
        "plan": [("kda", "dense"), ("kda", "moe"), ("mla", "moe"), ("kda", "moe"), ("kda", "moe"), ("mla", "moe")],
        "features": {"linear_attention.kda": [0, 1, 3, 4], "attention.mla": [2, 5], "attention.kv_compression": [2, 5],
                     "moe.routed": [1, 2, 3, 4, 5], "moe.shared_experts": [1, 2, 3, 4, 5],
                     "moe.router_bias": [1, 2, 3, 4, 5]},
        "absent": ["moe.latent", "residual.attnres", "attention.output_gate"],
    },
    "nemotron_h": {
        "plan": [("mamba2", "none"), ("none", "latent_moe"), ("gqa", "none"), ("none", "latent_moe")],
        "features": {"ssm.mamba2": [0], "attention.gqa": [2], "moe.latent": [1, 3], "moe.routed": [1, 3]},
        "absent": ["linear_attention.kda", "attention.mla"],
    },
    "deepseek_v3": {
        "plan": [("mla", "dense"), ("mla", "moe"), ("mla", "moe")],
        "features": {"attention.mla": [0, 1, 2], "moe.routed": [1, 2], "moe.router_bias": [1, 2]},
        "absent": ["moe.latent", "linear_attention.kda"],
    },
    "llama": {
        "plan": [("gqa", "dense"), ("gqa", "dense")],
        "features": {"attention.gqa": [0, 1]},
        "absent": ["moe.routed", "attention.mla"],
    },
    "qwen3_next": {
        "plan": [("gated_deltanet", "moe")] * 3 + [("gqa", "moe")],
        "features": {"linear_attention.gated_deltanet": [0, 1, 2], "attention.gqa": [3],
                     "attention.output_gate": [3], "moe.routed": [0, 1, 2, 3], "moe.shared_experts": [0, 1, 2, 3]},
        "absent": ["linear_attention.kda", "moe.router_bias"],
    },
}


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def saved(request, tmp_path_factory):
    folder = str(tmp_path_factory.mktemp(request.param))
    model = build(request.param, folder)
    return request.param, folder, model


def test_plan_features_and_params(saved):
    name, folder, model = saved
    doc = inspect_checkpoint(folder)
    exp = EXPECTED[name]
    assert [(layer["mixer"], layer["ffn"]) for layer in doc["layers"]] == exp["plan"]
    feats = {f["id"]: f for f in doc["features"]}
    for fid, layers in exp["features"].items():
        assert fid in feats, f"{name}: {fid} not detected; got {sorted(feats)}"
        assert feats[fid]["layers"] == layers
        assert feats[fid]["evidence"] and all({"tensor", "shape", "dtype", "why"} <= set(e)
                                              for e in feats[fid]["evidence"])
    for fid in exp["absent"]:
        assert fid not in feats, f"{name}: {fid} wrongly detected"
    assert doc["params"]["total"] == sum(t.numel() for t in model.state_dict().values())
    assert doc["unrecognized"] == []


def test_moe_active_params_scale_routed_experts(saved):
    name, folder, model = saved
    doc = inspect_checkpoint(folder)
    cfg = model.config
    experts = getattr(cfg, "num_experts", None) or getattr(cfg, "n_routed_experts", None)
    if "moe.routed" not in {f["id"] for f in doc["features"]}:
        assert doc["params"]["active"] == doc["params"]["total"]
        return
    k = cfg.num_experts_per_tok
    routed = doc["params"]["by_component"]["routed_experts"]
    expected = doc["params"]["total"] - routed + round(routed * k / experts)
    assert abs(doc["params"]["active"] - expected) <= len(doc["layers"])  # per-layer rounding


def test_kimi_attrs_match_config(tmp_path):
    build("kimi_linear", str(tmp_path))
    feats = {f["id"]: f for f in inspect_checkpoint(str(tmp_path))["features"]}
    kda = feats["linear_attention.kda"]["attrs"]
    assert (kda["num_heads"], kda["head_dim"], kda["conv_kernel"], kda["output_gate"]) == (4, 16, 4, "low_rank")
    mla = feats["attention.mla"]["attrs"]
    assert (mla["kv_lora_rank"], mla["rope_dim"], mla["cache_width_per_token"]) == (16, 8, 24)
    moe = feats["moe.routed"]["attrs"]
    assert (moe["num_experts"], moe["top_k"], moe["expert_width"], moe["router"]) == (8, 2, 32, "sigmoid")
