"""Sizing on the full-size K3 headers: shard/replicate rules per rank, the DP-vs-TP KV ratio for MLA from the
rules, engine reserves, the smallest deployment, the model-maximum cap, and the trade-offs recomputed by hand."""

from __future__ import annotations

import pytest

from archprobe.cli.options import budget as parse_budget
from archprobe.memory.devices import DEVICES, DeviceError, device
from archprobe.memory.engines import engine
from archprobe.memory.layout import Layout, LayoutError
from archprobe.memory.sizing import MemoryPlanError, Sizer, sizing_document
from archprobe.memory.tradeoffs import tradeoffs
from archprobe.structure.inspect import inspect_checkpoint

MLA_LAYERS, KDA_LAYERS = 24, 69
MLA_TOKEN = 576 * 2                                   # kv_lora 512 + rope 64, bf16
KDA_STATE = 96 * 128 * 128 * 4 + 3 * 3 * 12288 * 2    # fp32 state + bf16 conv inputs


@pytest.fixture(scope="module")
def k3(k3_sparse):
    return inspect_checkpoint(k3_sparse)


def test_budget_and_devices():
    assert parse_budget("8x141GB") == (8, 141 * 10 ** 9)
    assert parse_budget("80GiB") == (1, 80 * 2 ** 30)
    assert all(d.source and d.memory_bytes and d.bandwidth_bytes_per_s for d in DEVICES.values())
    assert device("H200").memory_bytes == 143771 * 2 ** 20          # as CUDA reports it, not 141e9 nor 141 GiB
    assert device("h100").memory_bytes == 81559 * 2 ** 20 and "81559MiB" in device("h100").source
    with pytest.raises(DeviceError, match="close: .*h200"):
        device("h2000")


def test_tp_replicates_mla_and_splits_kda(k3):
    T = 131072
    s = Sizer(k3, layout=Layout(tp=8, pp=2), device=device("h200"))
    r = s.size(T, 1)
    assert r["devices"] == 16 and len(r["per_device"]) == 16
    stage0 = [i for i in range(47)]
    mla0 = sum(1 for i in stage0 if (i + 1) % 4 == 0)
    kda0 = len(stage0) - mla0
    # MLA: the whole latent on every TP rank; KDA: 1/8 of the heads' state
    assert r["per_device"][0]["cache_bytes"] == int(mla0 * MLA_TOKEN * T + kda0 * KDA_STATE / 8)
    one = Sizer(k3).size(T, 1)["per_device"][0]["weights_bytes"]
    spread = sum(p["weights_bytes"] for p in r["per_device"])
    # split parts add back to one copy; only the replicated router / norms / AttnRes queries (~1.2 GB) repeat
    assert one <= spread <= one + 16 * 1.2e9
    assert r["busiest_device_bytes"] == max(p["peak_bytes"] for p in r["per_device"])


def test_dp_vs_tp_kv_ratio_for_mla_comes_from_the_rules(k3):
    """vllm-project/recipes#762: DP + EP gives each rank its own KV pool, TP replicates MLA's latent on every
    rank, so DP holds (n x its pool) / (TP's pool) times the KV: a little under n because DP replicates the
    attention weights."""
    vllm = engine("vllm", gpu_memory_utilization=0.95)
    tp = Sizer(k3, layout=Layout(tp=16), engine=vllm, device=device("b300")).size(1 << 20, 1)
    dp = Sizer(k3, layout=Layout(dp=16, ep=16), engine=vllm, device=device("b300")).size(1 << 20, 1)
    ratio = dp["max_concurrency"] / tp["max_concurrency"]
    assert ratio == pytest.approx(16 * dp["kv_pool_bytes"] / tp["kv_pool_bytes"]
                                  * tp["per_device"][0]["cache_bytes"] / dp["per_device"][0]["cache_bytes"], rel=1e-3)
    assert 1 < ratio < 16
    assert dp["per_device"][0]["weights_bytes"] > tp["per_device"][0]["weights_bytes"]   # attention replicated


def test_smallest_deployment_and_cap(k3):
    d = sizing_document(k3, 131072, 1, gpu="h200")
    assert d["devices_needed"] == d["devices"] == 16 and d["fits"]
    assert d["largest_fitting_context"] == 1 << 20 and d["capped_at_model_max"]
    assert d["bounds"]["decode_tokens_per_s_max"] > 0 and d["device"]["source"]
    v = sizing_document(k3, 131072, 1, gpu="h200", engine_name="vllm")
    assert v["engine"]["version"] and v["usable_device_bytes"] == int(0.9 * 143771 * 2 ** 20)
    assert any("gpu_memory_utilization 0.9 (default)" in a for a in v["assumptions"])


def test_bad_layouts_and_budgets_name_the_fix(k3):
    with pytest.raises(LayoutError, match="does not divide .* 96 .* heads"):
        sizing_document(k3, 4096, tp=7)
    with pytest.raises(LayoutError, match="does not divide .* 896 experts"):
        sizing_document(k3, 4096, tp=8, ep=3)
    with pytest.raises(MemoryPlanError, match="weights alone") as e:
        sizing_document(k3, 4096, budget=parse_budget("8x141GB"))
    assert "at least" in e.value.hint
    with pytest.raises(MemoryPlanError, match="weights alone") as e:
        sizing_document(k3, 4096, gpu="h200", devices=16, tp=8, pp=1)        # the rest goes to DP: 2 replicas
    assert "each of the DP2 replicas holds the whole model" in e.value.hint
    filled = sizing_document(k3, 4096, gpu="h200", devices=16, tp=8)        # PP is the one left out
    assert filled["layout"]["pp"] == 2 and filled["devices"] == 16 and filled["fits"]
    from archprobe.cli.options import OptionError

    with pytest.raises(OptionError, match="'8x': a positive size"):
        parse_budget("8x")


def test_tradeoffs_by_hand_k3(k3):
    rows = {r["name"].split(" ")[0]: r for r in tradeoffs(k3, 131072)}
    H, lat, w, E, k = 7168, 3584, 3072, 896, 16
    n = rows["LatentMoE"]["numbers"]
    assert n["params_latent_per_layer"] == E * 3 * lat * w + 2 * H * lat
    assert n["params_token_space_per_layer"] == E * 3 * H * w
    assert n["flops_per_token_latent"] == 2 * (k * 3 * lat * w + 2 * H * lat)
    assert n["flops_per_token_token_space"] == 2 * k * 3 * H * w
    touched = E * (1 - (1 - k / E) ** 8)
    eb = n["expert_bytes_per_param"]
    assert n["expert_bytes_per_token_token_space_B8"] == pytest.approx(touched * 3 * H * w * eb / 8, rel=1e-3)
    assert "1.56" in rows["LatentMoE"]["break_even"]           # 2*7168*3584 / (3*3072*3584) = 1.555...
    m = rows["MLA"]["numbers"]
    assert (m["mla_bytes"], m["mha_bytes"]) == (MLA_TOKEN, 96 * (192 + 128) * 2)
    kda = rows["KDA"]
    assert kda["numbers"]["kda_state_bytes"] == KDA_STATE
    assert f"{KDA_STATE / MLA_TOKEN:,.0f}" in kda["break_even"]    # 5,653 tokens


def test_tradeoffs_by_hand_nemotron_latent_moe(tmp_path):
    """Nemotron-3 Super's LatentMoE shape (non-gated ReLU^2 experts, latent routed in hidden space), saved by our
    own reference decoder: H 64, latent 32, 8 experts of width 32, top-2, float32."""
    torch = pytest.importorskip("torch")
    from archprobe.nn.decoder import HybridDecoder
    from archprobe.nn.presets import tiny_nemotron_latent
    from tests.support.decoder_ckpt import save_decoder

    torch.manual_seed(0)
    doc = inspect_checkpoint(save_decoder(HybridDecoder(tiny_nemotron_latent()), tmp_path))
    row = next(r for r in tradeoffs(doc, 4096) if r["name"].startswith("LatentMoE"))
    n = row["numbers"]
    H, lat, w, E, k, m, b = 64, 32, 32, 8, 2, 2, 4
    assert n["params_latent_per_layer"] == E * m * lat * w + 2 * H * lat == 20480
    assert n["params_token_space_per_layer"] == E * m * H * w == 32768
    assert n["flops_per_token_latent"] == n["flops_per_token_token_space"] == 2 * k * m * H * w   # exactly even
    assert n["expert_bytes_per_token_latent_B1"] == k * m * lat * w * b + 2 * H * lat * b == 32768
    assert n["expert_bytes_per_token_token_space_B1"] == k * m * H * w * b
    assert "= 2 (here top_k 2)" in row["break_even"] and "from batch 1 on" in row["break_even"]


def test_engine_rules_change_the_answer(k3):
    T = 131072
    v = sizing_document(k3, T, 1, gpu="h200", devices=16, engine_name="vllm", engine_opts={"block_size": 256})
    assert any("block_size 256 (given)" in a for a in v["assumptions"])
    assert v["cache_by_layer_type"]["mla"] == MLA_LAYERS * MLA_TOKEN * T                 # 128k is whole pages
    odd = sizing_document(k3, T + 1, 1, gpu="h200", devices=16, engine_name="vllm", engine_opts={"block_size": 256})
    per_rank_mla = odd["per_device"][0]["cache_bytes"] - v["per_device"][0]["cache_bytes"]
    assert per_rank_mla == 11 * MLA_TOKEN * 256           # stage 0 (layers 0-46) has 11 MLA layers: one more page each
    assert v["per_device"][0]["overhead_bytes"] > 0               # the CUDA-graph pool
    s = sizing_document(k3, T, 1, gpu="h200", devices=16, engine_name="sglang")
    # SGLang's own default on an H200 (143,771 MiB) at TP8 x PP2: 512 + 8192 x 1.5 + 512 x 2 + 16 / 8 x 1024 =
    # 15,872 MiB reserved, (143771 - 15872) / 143771 = 0.8896 -> 0.89
    assert s["usable_device_bytes"] == int(0.89 * 143771 * 2 ** 20) and s["engine"]["name"] == "sglang"
    assert any("mem_fraction_static 0.89 (default)" in a and "15,872 MiB reserved" in a for a in s["assumptions"])
    busy = max(s["per_device"], key=lambda r: r["peak_bytes"])
    assert s["fits"] == (busy["weights_bytes"] + busy["cache_bytes"] <= s["usable_device_bytes"])


def test_mtp_layers_counted_only_when_asked(tmp_path):
    """A checkpoint with one MTP layer beside its 3 decoder layers: speculative decoding off leaves its weights
    out (as engines do), --mtp adds them and one more layer's KV cache."""
    from tests.support.header_checkpoints import write_llama as _write

    doc = inspect_checkpoint(_write(tmp_path, {}, mtp=True))
    mtp = doc["params"]["stored_bytes_by_component"]["mtp"]
    off = sizing_document(doc, 1000, budget=(1, 10 ** 9))["per_device"][0]
    on = sizing_document(doc, 1000, budget=(1, 10 ** 9), mtp=True)["per_device"][0]
    assert on["weights_bytes"] - off["weights_bytes"] == mtp
    per_token = off["cache_bytes"] // 1000 // 3                        # one layer's K + V per token
    assert on["cache_bytes"] == 4 * per_token * 1001     # 3 layers + the MTP layer's, 1 lookahead slot each


def test_draft_model_adds_its_weights_and_cache_once(tmp_path):
    """--draft: a separate draft model's weights and cache (context + N draft tokens) join the target on the
    last stage, split by the same TP; the target's own MTP layers stay unloaded (one drafter at a time), and
    the target keeps N lookahead slots per sequence."""
    from tests.support.header_checkpoints import write_llama as _write

    (tmp_path / "target").mkdir()
    (tmp_path / "draft").mkdir()
    target = inspect_checkpoint(_write(tmp_path / "target", {}, mtp=True))
    draft = inspect_checkpoint(_write(tmp_path / "draft", {"num_hidden_layers": 2}, layers=2))
    T, N = 1000, 3
    base = sizing_document(target, T + N, budget=(1, 10 ** 9))["per_device"][0]
    alone = sizing_document(draft, T + N, budget=(1, 10 ** 9))["per_device"][0]
    both = sizing_document(target, T, budget=(1, 10 ** 9), draft_doc=draft, speculative_tokens=N)
    r = both["per_device"][0]
    assert r["weights_bytes"] == base["weights_bytes"] + alone["weights_bytes"]      # no MTP weights
    assert r["cache_bytes"] == base["cache_bytes"] + alone["cache_bytes"]
    assert any("draft model" in a and "MTP layers are not loaded" in a for a in both["assumptions"])
    tp2 = sizing_document(target, T, budget=(2, 10 ** 9), tp=2, draft_doc=draft, speculative_tokens=N)
    assert tp2["per_device"][0]["cache_bytes"] == r["cache_bytes"] // 2              # both split by TP
    with pytest.raises(MemoryPlanError, match="one drafter"):
        sizing_document(target, T, draft_doc=draft, mtp=True)
    with pytest.raises(MemoryPlanError, match="needs a drafter"):
        sizing_document(target, T, speculative_tokens=2)


@pytest.mark.parametrize("gpu,tokens,seqs", [("h200", 8192, 1024), ("h100", 8192, 1024), ("mi300x", 8192, 1024),
                                             ("a100-80gb", 2048, 256), ("l40s", 2048, 256), ("rtx4090", 2048, 256)])
def test_vllm_batch_defaults_follow_the_device(gpu, tokens, seqs):
    """vLLM's EngineArgs.get_batch_defaults (OpenAI server): >= 70 GiB and not an A100 -> 8192 tokens and 1024
    sequences; otherwise 2048 and 256. A user's value replaces either."""
    from archprobe.memory.devices import device
    from archprobe.memory.engines import engine

    d = device(gpu)
    e = engine("vllm", device_memory_bytes=d.memory_bytes, device_name=d.name)
    assert (e.max_num_batched_tokens, e.max_num_seqs) == (tokens, seqs)
    assert any(f"max_num_seqs {seqs} (default)" in r for r in e.rules)
    given = engine("vllm", device_memory_bytes=d.memory_bytes, device_name=d.name, max_num_seqs=7)
    assert given.max_num_seqs == 7 and any("max_num_seqs 7 (given)" in r for r in given.rules)


@pytest.mark.parametrize("seqs,spec,mbt,graph", [(1024, 0, 8192, 512), (8, 0, 8192, 16), (8, 3, 8192, 64),
                                                 (256, 0, 128, 128)])
def test_vllm_cuda_graph_capture_size(seqs, spec, mbt, graph):
    """vLLM config/vllm.py _set_cudagraph_sizes: the largest captured batch is max_num_seqs x (1 + speculative
    tokens) x 2, at most 512 and at most max_num_batched_tokens."""
    e = engine("vllm", max_num_seqs=seqs, max_num_batched_tokens=mbt, speculative_tokens=spec)
    assert e.cuda_graph_tokens == graph
    assert engine("vllm", max_num_seqs=seqs, cuda_graphs=False).cuda_graph_tokens == 0
