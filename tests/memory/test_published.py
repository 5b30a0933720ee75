"""Sizing answers checked against figures the engines and model publishers printed: cache bytes per token
exactly, weights within 1%, the fit verdicts the engines' documentation gives, and the DP-vs-TP KV ratio of an
MLA model. Each row cites its source. The checkpoints are headers only, with the tensor inventory of
transformers' own model built from the published config (tests/support/peer_headers.py)."""

from __future__ import annotations

import pytest

from archprobe.memory.devices import device
from archprobe.memory.plan import MemoryPlanError
from archprobe.memory.sizing import sizing_document
from archprobe.structure.inspect import inspect_checkpoint
from tests.support.peer_headers import write_peer_checkpoint

pytest.importorskip("transformers")

GiB = 2 ** 30
LLAMA_31 = {   # meta-llama/Llama-3.1-{8B,70B,405B} config.json
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32),
    "70b": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64),
    "405b": dict(hidden_size=16384, intermediate_size=53248, num_hidden_layers=126, num_attention_heads=128),
}


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from transformers import LlamaConfig

    docs = {}
    for name, dims in LLAMA_31.items():
        cfg = LlamaConfig(**dims, num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072,
                          rope_theta=500000.0, tie_word_embeddings=False)
        docs[name] = inspect_checkpoint(write_peer_checkpoint(tmp_path_factory.mktemp(f"llama-{name}"), cfg))
    return docs


@pytest.fixture(scope="module")
def qwen3_235b(tmp_path_factory):
    from transformers import Qwen3MoeConfig

    cfg = Qwen3MoeConfig(vocab_size=151936, hidden_size=4096, intermediate_size=12288, moe_intermediate_size=1536,
                         num_hidden_layers=94, num_attention_heads=64, num_key_value_heads=4, head_dim=128,
                         num_experts=128, num_experts_per_tok=8, max_position_embeddings=40960,
                         tie_word_embeddings=False)              # Qwen/Qwen3-235B-A22B config.json
    return inspect_checkpoint(write_peer_checkpoint(tmp_path_factory.mktemp("qwen3-235b"), cfg))


@pytest.fixture(scope="module")
def deepseek_v3(tmp_path_factory):
    from transformers import DeepseekV3Config

    # transformers' defaults are deepseek-ai/DeepSeek-V3's config (61 layers, 256 experts, kv_lora_rank 512) but
    # for the context: the published config says 163,840 (YaRN x40 over 4,096)
    cfg = DeepseekV3Config(max_position_embeddings=163840)
    return inspect_checkpoint(write_peer_checkpoint(tmp_path_factory.mktemp("dsv3"), cfg, shards=8))


# huggingface.co/blog/llama31, "Inference memory requirements": KV cache in FP16 at 1k (1,024) tokens, GiB
# printed to 3 places, and the weights in FP16, GB. The blog's 405B cache figure (0.984) is twice what the
# published config gives (126 layers x 8 KV heads x 128 x 2 x 2 bytes x 1,024 = 0.492 GiB; it would need 16 KV
# heads; huggingface/blog#2345 asks how the table was computed): the row keeps the blog's number and the factor.
HF_BLOG_LLAMA31 = [("8b", 0.125, 1, 16e9), ("70b", 0.313, 1, 140e9), ("405b", 0.984, 2, 810e9)]


@pytest.mark.parametrize("name,kv_1k_gib,blog_factor,weights", HF_BLOG_LLAMA31)
def test_llama31_cache_and_weights_match_the_hf_blog(llama, name, kv_1k_gib, blog_factor, weights):
    d = sizing_document(llama[name], 1024, 1)
    layers, kv_heads, head_dim = LLAMA_31[name]["num_hidden_layers"], 8, 128
    assert d["cache_bytes"] == 2 * layers * kv_heads * head_dim * 2 * 1024       # exact: K and V, bf16
    assert abs(blog_factor * d["cache_bytes"] / GiB - kv_1k_gib) <= 0.0005 + 1e-9   # prints as the blog's
    assert d["weights_bytes"] == pytest.approx(weights, rel=0.01)


# blog.vllm.ai/2024/07/23/llama31.html: "FP8: vLLM runs the official FP8 quantized model natively on 8xA100 or
# 8xH100"; BF16 405B runs "on multiple nodes" (pipeline parallel) or "on a single 8xMI300x or 8xH200 machine".
VLLM_BLOG_405B = [
    ("h100", 8, "fp8", True),
    ("a100-80gb", 8, "fp8", True),
    ("h200", 8, None, True),
    ("mi300x", 8, None, True),
    ("h100", 16, None, True),
    ("h100", 8, None, False),
]


@pytest.mark.parametrize("gpu,devices,weight_dtype,fits", VLLM_BLOG_405B)
def test_llama31_405b_verdicts_match_the_vllm_blog(llama, gpu, devices, weight_dtype, fits):
    ask = dict(gpu=gpu, devices=devices, weight_dtype=weight_dtype, engine_name="vllm")
    if not fits:
        with pytest.raises(MemoryPlanError, match="weights alone") as err:
            sizing_document(llama["405b"], 8192, 1, **ask)
        assert "at least 11 devices" in str(err.value.hint)    # 811.7e9 / (0.9 x 81,559 MiB) = 10.3
        return
    d = sizing_document(llama["405b"], 8192, 1, **ask)
    assert d["fits"] and d["devices"] == devices
    assert d["largest_fitting_context"] == 131072 and d["capped_at_model_max"]   # "a full 128K context window"


def test_qwen3_235b_sglang_k_size_matches_its_log(qwen3_235b):
    """vllm-project/vllm#21348: Qwen3-235B-A22B-FP8 with SGLang --tp 4 --mem-fraction-static 0.93 on 4 x H100
    logs "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB" (SGLang's GB are GiB).
    Four KV heads over TP4: one per rank, 94 layers x 128 x bf16 = 24,064 K bytes per token per rank."""
    d = sizing_document(qwen3_235b, 1, 1, gpu="h100", tp=4, engine_name="sglang", weight_dtype="fp8",
                        engine_opts={"mem_fraction_static": 0.93})
    k_per_token = d["per_device"][0]["cache_bytes"] / 2
    assert k_per_token == 94 * 128 * 2
    assert f"{367404 * k_per_token / GiB:.2f}" == "8.23"
    assert d["fits"]                                          # it served
    assert d["weights_bytes"] == pytest.approx(235.09e9, rel=0.01)   # 235B parameters in FP8


def test_deepseek_v3_mla_latent_per_token(deepseek_v3):
    """The MLA cache is kv_lora_rank + qk_rope_head_dim = 576 values per token per layer, one copy per TP rank
    (SGLang MLATokenToKVPool / vLLM's MLA spec): 61 x 576 x 2 = 70,272 bytes per token in bf16."""
    one = sizing_document(deepseek_v3, 4096, 1, gpu="h200", tp=8, weight_dtype="fp8", engine_name="sglang")
    assert one["per_device"][0]["cache_bytes"] == 61 * 576 * 2 * 4096
    assert all(r["cache_bytes"] == one["per_device"][0]["cache_bytes"] for r in one["per_device"])   # replicated
    assert one["weights_bytes"] == pytest.approx(671.03e9, rel=0.01)   # 671B main-model parameters, FP8


def test_dp_vs_tp_kv_ratio_for_mla(deepseek_v3):
    """vllm-project/recipes#762 (vLLM 0.25, DeepSeek-V4-Flash on 8 x B200, --gpu-memory-utilization 0.95
    --block-size 256 --kv-cache-dtype fp8 --max-num-batched-tokens 8192 --max-num-seqs 256): DP8 + EP logs a
    maximum concurrency of 156.9x at 1M tokens, TP8 + EP 20.43x: 7.68x the KV. The mechanism: TP replicates the
    single latent KV head on every rank (eight copies of one pool), DP gives every rank its own pool, but a DP
    rank also holds the attention / dense weights whole, so its pool is a little smaller: the ratio is
    8 x pool(DP rank) / pool(TP rank) = 8 x 19.61 / 20.43 = 7.68 for V4-Flash. archprobe does not read V4-Flash's
    compressed attention; the same rules on DeepSeek-V3 (same MLA, more non-expert weight) give the ratio from its
    own per-rank figures."""
    published = 156.9 / 20.43
    assert published == pytest.approx(7.68, abs=0.005)
    assert published == pytest.approx(8 * (156.9 / 8) / 20.43)            # the decomposition, per rank 0.96
    ask = dict(gpu="b200", weight_dtype="fp8", kv_dtype="fp8", engine_name="vllm",
               engine_opts=dict(gpu_memory_utilization=0.95, block_size=256, max_num_batched_tokens=8192,
                                max_num_seqs=256))
    T = 163840                                                             # DeepSeek-V3's maximum context
    tp = sizing_document(deepseek_v3, T, 1, tp=8, ep=8, **ask)
    dp = sizing_document(deepseek_v3, T, 1, dp=8, ep=8, **ask)
    assert tp["fits"] and dp["fits"]
    ratio = dp["max_concurrency"] / tp["max_concurrency"]
    assert ratio == pytest.approx(8 * dp["kv_pool_bytes"] / tp["kv_pool_bytes"], rel=1e-3)
    non_expert_extra = dp["per_device"][0]["weights_bytes"] - tp["per_device"][0]["weights_bytes"]
    assert non_expert_extra > 0
    assert dp["kv_pool_bytes"] == pytest.approx(tp["kv_pool_bytes"] - non_expert_extra, rel=0.02)
    assert 6 < ratio < 8
    assert device("b200").memory_bytes == 182630 * 2 ** 20


# SGLang's DeepSeek V3 usage page (docs/references/deepseek.md; docs.sglang.ai basic_usage/deepseek_v3), "To run
# DeepSeek V3/R1 models, the requirements are": FP8 (the published weights) on 8 x H200, 8 x B200, 8 x MI300X or
# 2 x 8 x H100; BF16 on 2 x 8 x H200, 2 x 8 x MI300X, 4 x 8 x H100 or 4 x 8 x A100. The next smaller counts of the
# same devices are the verdicts "does not fit".
SGLANG_DEEPSEEK_V3 = [
    ("h200", 8, "fp8", True), ("b200", 8, "fp8", True), ("mi300x", 8, "fp8", True), ("h100", 16, "fp8", True),
    ("h100", 8, "fp8", False),
    ("h200", 16, None, True), ("mi300x", 16, None, True), ("h100", 32, None, True), ("a100-80gb", 32, None, True),
    ("h200", 8, None, False), ("h100", 16, None, False),
]


@pytest.mark.parametrize("gpu,devices,weight_dtype,fits", SGLANG_DEEPSEEK_V3)
def test_deepseek_v3_verdicts_match_sglang_docs(deepseek_v3, gpu, devices, weight_dtype, fits):
    ask = dict(gpu=gpu, devices=devices, weight_dtype=weight_dtype, engine_name="sglang")
    if not fits:
        with pytest.raises(MemoryPlanError, match="weights alone"):
            sizing_document(deepseek_v3, 32768, 1, **ask)
        return
    d = sizing_document(deepseek_v3, 32768, 1, **ask)
    assert d["fits"] and d["devices"] == devices
    assert d["largest_fitting_context"] == 163840 and d["capped_at_model_max"]


# vllm-project/vllm#10517, Llama-3.1-8B-Instruct on an RTX 3090 (vLLM V0 logs; its "GB" are GiB):
# "Loading model weights took 14.9888 GB"; "kv_cache_size=3.81GiB ... # GPU blocks: 1952" and
# "kv_cache_size=2.89GiB ... # GPU blocks: 1478 ... tokens that can be stored in KV cache (23648)".
VLLM_10517 = [(3.81, 1952), (2.89, 1478)]


@pytest.mark.parametrize("kv_gib,blocks", VLLM_10517)
def test_llama31_8b_vllm_blocks_match_its_log(llama, kv_gib, blocks):
    d = sizing_document(llama["8b"], 16, 1, engine_name="vllm")
    page = d["per_device"][0]["cache_bytes"]                  # one 16-token block of every layer
    assert page == 16 * 32 * 8 * 128 * 2 * 2
    low, high = (kv_gib - 0.005) * GiB / page, (kv_gib + 0.005) * GiB / page   # the log rounds to 0.01 GiB
    assert int(low) <= blocks <= int(high)
    assert d["weights_bytes"] / GiB == pytest.approx(14.9888, rel=0.01)
