"""`adapt` against real transformers-saved checkpoints and a K3-shaped one."""

import pytest

from archprobe.adapt.adapt import adapt

pytestmark = pytest.mark.needs_transformers


def by_name(doc):
    return {r["framework"]: r for r in doc["frameworks"]}


@pytest.mark.parametrize("name", ["llama", "deepseek_v3", "kimi_linear", "qwen3_next"])
def test_transformers_supports_what_it_saved(tmp_path, name):
    from tests.support.tiny_models import build

    build(name, str(tmp_path / name))
    doc = adapt(str(tmp_path / name), only=["transformers", "llama.cpp"])
    hf = by_name(doc)["transformers"]
    assert hf["status"] == "supported", hf
    assert hf["missing"] == [] and hf["unverified"] == []
    assert set(hf["handled"]) == set(doc["features"])
    assert by_name(doc)["llama.cpp"]["known_as"] is not None


def test_k3_shaped_checkpoint_gets_the_precise_gap(tiny_k3):
    doc = adapt(tiny_k3)
    hf = by_name(doc)["transformers"]
    assert hf["status"] == "architecture known but feature missing"
    assert hf["known_as"] == "KimiLinearForCausalLM"
    assert {"residual.attnres", "moe.latent", "ffn.activation", "multimodal.vision"} <= set(hf["missing"])
    assert {"linear_attention.kda", "moe.routed", "moe.shared_experts"} <= set(hf["handled"])
    rows = {r["feature"]: r for r in hf["features"]}
    # K3's Gated MLA: transformers' Kimi Linear MLA has no output gate, so g_proj has no place there
    assert rows["attention.mla"]["status"] == "missing"
    assert all(n.endswith("self_attn.g_proj.weight") for n in rows["attention.mla"]["unplaced"])
    assert "situ" in rows["ffn.activation"]["why"]
    assert any("attention_res" in n or "res_proj" in n for n in rows["residual.attnres"]["unplaced"])
    assert by_name(doc)["vllm"]["status"] in ("not installed", "unknown", "architecture known, features unverified")
    assert by_name(doc)["llama.cpp"]["known_as"] == "kimi-linear"
    assert "residual.attnres" in by_name(doc)["llama.cpp"]["missing"]
    ours = by_name(doc)["archprobe"]
    assert ours["missing"] == ["multimodal.vision"], ours   # validate runs the decoder, not the vision tower
    assert doc["matrix"]["residual.attnres"] == {"transformers": "missing", "vllm": "not installed",
                                                 "sglang": "not installed", "llama.cpp": "missing",
                                                 "archprobe": "handled"}


def test_full_size_k3_headers(k3_sparse):
    doc = adapt(k3_sparse, only=["transformers", "archprobe"])
    hf = by_name(doc)["transformers"]
    assert {"residual.attnres", "moe.latent", "ffn.activation"} <= set(hf["missing"])
    assert by_name(doc)["archprobe"]["status"] in ("supported", "architecture known but feature missing")


def test_unknown_architecture(tmp_path):
    import json

    import numpy as np
    from safetensors.numpy import save_file

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "made_up_arch", "architectures": ["MadeUp"],
                                                       "hidden_size": 8, "num_hidden_layers": 1}))
    save_file({"model.layers.0.mystery.weight": np.zeros((8, 8), np.float32)}, str(tmp_path / "model.safetensors"))
    doc = adapt(str(tmp_path))
    assert by_name(doc)["transformers"]["status"] == "unknown"
    assert by_name(doc)["llama.cpp"]["status"] == "unknown"


def test_gguf_file(tmp_path):
    from tests.support.gguf_files import write_tiny_gguf

    path = tmp_path / "m.gguf"
    write_tiny_gguf(path)
    doc = adapt(str(path), only=["transformers", "llama.cpp", "archprobe"])
    assert by_name(doc)["llama.cpp"]["status"] == "supported"
    assert by_name(doc)["transformers"]["known_as"] == "llama (GGUF loader)"
    assert by_name(doc)["transformers"]["status"] == "architecture known, features unverified"
    assert by_name(doc)["archprobe"]["status"] == "unknown"
