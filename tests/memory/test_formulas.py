"""Planner figures against hand-computed ones for K3, Kimi Linear, a GQA Llama, a sliding-window
model and Nemotron-H; engine rules, device splits, and unknown layer types."""

from __future__ import annotations

import pytest

from archprobe.memory import MemoryPlanError, plan_memory
from archprobe.memory.plan import largest_fitting_context, parse_tokens
from archprobe.structure.inspect import inspect_checkpoint


def test_k3_caches_by_hand(k3_sparse):
    doc = inspect_checkpoint(k3_sparse)
    for T in (4096, 131072, 1048576):
        m = plan_memory(doc, T)
        assert m["cache_by_layer_type"]["mla"] == 24 * 576 * 2 * T            # bf16 latent + rope key
        kda = 69 * (96 * 128 * 128 * 4 + 3 * 3 * 12288 * 2)                  # fp32 state + bf16 conv inputs
        assert m["cache_by_layer_type"]["kda"] == kda
        assert abs(kda / 2**20 - 428.6) < 0.05                                # the model card's 428.6 MiB
        assert m["weights_bytes"] == 1_560_860_324_864                        # stored, MXFP4 experts packed
        assert m["peak_bytes"] == m["weights_bytes"] + m["cache_bytes"] + m["activation_bytes"]
    fp8 = plan_memory(doc, 1048576, kv_dtype="fp8", batch=4)
    assert fp8["cache_by_layer_type"]["mla"] == 4 * 24 * 576 * 1 * 1048576
    assert fp8["cache_by_layer_type"]["kda"] == 4 * 69 * (96 * 128 * 128 * 4 + 3 * 3 * 12288 * 2)
    assert plan_memory(doc, 4096, weight_dtype="bf16")["weights_bytes"] == 2 * doc["params"]["total"]


@pytest.fixture(scope="module")
def hf_models(tmp_path_factory):
    pytest.importorskip("transformers")
    from tests.support.tiny_models import build

    out = {}
    for name in ("kimi_linear", "llama", "nemotron_h"):
        folder = tmp_path_factory.mktemp(name)
        build(name, str(folder))
        out[name] = inspect_checkpoint(str(folder))
    return out


@pytest.mark.needs_transformers
def test_kimi_linear_by_hand(hf_models):
    m = plan_memory(hf_models["kimi_linear"], 1000)      # tiny model saved in fp32
    assert m["cache_by_layer_type"]["mla"] == 2 * (16 + 8) * 4 * 1000
    assert m["cache_by_layer_type"]["kda"] == 4 * (4 * 16 * 16 * 4 + 3 * 3 * 64 * 4)


@pytest.mark.needs_transformers
def test_gqa_llama_by_hand_and_engine_rules(hf_models):
    doc = hf_models["llama"]
    assert plan_memory(doc, 1000)["cache_by_layer_type"] == {"gqa": 2 * 2 * 2 * 16 * 4 * 1000}
    assert plan_memory(doc, 1000, engine="vllm")["cache_bytes"] == 2 * 2 * 2 * 16 * 4 * 1008   # 16-token blocks
    assert plan_memory(doc, 1000, engine="llamacpp")["cache_bytes"] == 2 * 2 * 2 * 16 * 4 * 1024
    two = plan_memory(doc, 1000, devices=2)
    assert two["per_device_peak_bytes"] < two["peak_bytes"]


@pytest.mark.needs_transformers
def test_nemotron_h_by_hand(hf_models):
    m = plan_memory(hf_models["nemotron_h"], 500, batch=3)
    mamba = 4 * 16 * 16 * 4 + 3 * 128 * 4          # [heads, head_dim, state] fp32 + 3 conv steps of 128 channels
    assert m["cache_by_layer_type"] == {"mamba2": 3 * mamba, "gqa": 3 * 2 * 2 * 16 * 4 * 500}


@pytest.mark.needs_transformers
def test_sliding_window_is_bounded_by_the_window(tmp_path):
    pytest.importorskip("transformers")
    from transformers import MistralConfig

    from tests.support.tiny_models import build

    build(MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, sliding_window=64), tmp_path)
    doc = inspect_checkpoint(str(tmp_path))
    assert {f["id"] for f in doc["features"]} >= {"attention.sliding_window"}
    small, big = plan_memory(doc, 32), plan_memory(doc, 100_000)
    assert small["cache_by_layer_type"] == {"sliding_window": 2 * 2 * 2 * 16 * 4 * 32}
    assert big["cache_by_layer_type"] == {"sliding_window": 2 * 2 * 2 * 16 * 4 * 64}   # not 100,000


def test_unknown_layer_type_is_named_never_zero(tiny_k3):
    doc = inspect_checkpoint(tiny_k3)          # memory reads the layer plan from the card
    doc["card"]["layers"][2]["mixer"]["kind"] = "unknown"
    doc["card"]["layers"][4]["mixer"]["kind"] = "hyena"
    with pytest.raises(MemoryPlanError, match=r"unknown layer type at layer\(s\) 2 \(unknown\), 4 \(hyena\)"):
        plan_memory(doc, 4096)


def test_unknown_card_field_is_named(tiny_k3):
    doc = inspect_checkpoint(tiny_k3)
    mla = next(i for i, layer in enumerate(doc["card"]["layers"]) if layer["mixer"]["kind"] == "mla")
    doc["card"]["layers"][mla]["mixer"]["cache_width_per_token"] = None
    with pytest.raises(MemoryPlanError, match=rf"layers\.{mla}\.mixer\.cache_width_per_token"):
        plan_memory(doc, 4096)


def test_parsing_and_largest_fitting_context(tiny_k3):
    assert parse_tokens("128k") == 131072 and parse_tokens("1M") == 1048576 and parse_tokens(77) == 77
    with pytest.raises(MemoryPlanError):
        parse_tokens("lots")
    doc = inspect_checkpoint(tiny_k3)
    budget = plan_memory(doc, 5000)["peak_bytes"]
    fits = largest_fitting_context(doc, budget)
    assert plan_memory(doc, fits)["peak_bytes"] <= budget < plan_memory(doc, fits + 1)["peak_bytes"]


def test_gguf_source_plans_from_its_metadata(tmp_path):
    from tests.support.gguf_files import write_tiny_gguf

    write_tiny_gguf(tmp_path / "m.gguf")
    doc = inspect_checkpoint(str(tmp_path / "m.gguf"))
    m = plan_memory(doc, 300, kv_dtype="f16")
    assert m["cache_by_layer_type"] == {"gqa": 2 * 2 * 2 * 16 * 2 * 300}   # 2 layers, 2 KV heads of 16, fp16
    assert m["weights_bytes"] == sum(doc["storage"]["dtypes"].values())
