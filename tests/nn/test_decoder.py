"""The hybrid decoder: incremental decoding equals the full forward for every mixer and residual
kind (caches included); the plan is printable data; bad configs name the field."""

from __future__ import annotations

import pytest
import torch

from archprobe.nn.decoder import (
    MIXERS,
    HybridConfig,
    HybridDecoder,
)
from archprobe.nn.presets import from_kimi_config, tiny_k3
from archprobe.testing import assert_close
from tests.support.decode_configs import CONFIGS


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_token_by_token_equals_full_forward(name):
    _full_equals_prefill_then_decoding(name, batch=2, length=13, prefill=6)


def _full_equals_prefill_then_decoding(name, batch, length, prefill):
    cfg = CONFIGS[name]()
    torch.manual_seed(0)
    model = HybridDecoder(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (batch, length))
    with torch.no_grad():
        full = model(ids)
        logits, caches = model(ids[:, :prefill], use_cache=True)   # a prefill, then one token at a time
        steps = [logits]
        for t in range(prefill, length):
            step, caches = model(ids[:, t:t + 1], caches=caches)
            steps.append(step)
    assert_close("same_algorithm", full, torch.cat(steps, 1), name=name)


@pytest.mark.parametrize("name", ["mamba2_hybrid", "gated_deltanet_hybrid", "tiny_kimi_linear"])
def test_long_prefill_spans_chunks(name):
    """150 tokens: the chunked prefill runs several chunks (64 for Mamba-2, 32 for the delta rules)
    and a partial one, and must still equal a short prefill followed by token-by-token decoding."""
    _full_equals_prefill_then_decoding(name, batch=1, length=150, prefill=70)   # 70: not a whole chunk


def test_every_mixer_is_decoded_above():
    covered = {mixer for make in CONFIGS.values() for mixer in make().mixer_types}
    assert set(MIXERS) - {"none"} <= covered, f"no decode test for {set(MIXERS) - {'none'} - covered}"


def test_k3_caches_have_the_expected_sizes():
    cfg = tiny_k3()
    model = HybridDecoder(cfg).eval()
    with torch.no_grad():
        _, caches = model(torch.randint(0, 256, (1, 10)), use_cache=True)
    for i, (kind, cache) in enumerate(zip(cfg.mixer_types, caches, strict=True)):
        a = cfg.layer_spec(i).mixer.args
        if kind == "mla":  # latent + rope key per token, fp32 here
            assert cache.nbytes() == 10 * (a.kv_lora_rank + a.rope_dim) * 4
        else:  # constant: heads x K x V fp32 state + (kernel-1) x 3D conv inputs
            D = a.num_heads * a.head_dim
            assert cache.nbytes() == (a.num_heads * a.head_dim ** 2 + 3 * D * 3) * 4


def test_plan_is_data_and_matches_k3_rules():
    cfg = tiny_k3(num_hidden_layers=8)
    assert cfg.plan()[:4] == [("kda", "dense", "attnres_block"), ("kda", "latent_moe", "attnres_block"),
                              ("kda", "latent_moe", "attnres_block"), ("mla", "latent_moe", "attnres_block")]
    assert [m for m, _, _ in cfg.plan()].count("mla") == 2  # layers 3 and 7 (1-based 4, 8 = also the last)


def test_config_from_k3_config_json():
    from archprobe.writers.synthetic import k3_config, tiny_k3_dims

    cfg = from_kimi_config(k3_config(tiny_k3_dims()))
    assert cfg.mixer_types == ("kda", "kda", "kda", "mla", "kda", "mla")
    assert cfg.ffn_types == ("dense",) + ("latent_moe",) * 5
    assert cfg.residual == "attnres_block" and cfg.attn_res_block_size == 2
    kda, mla = cfg.mixer_args["kda"], cfg.mixer_args["mla"]
    assert kda["gate"] == "bounded" and kda["output_gate"] == "full_rank" and mla["rope_theta"] is None
    assert "auto_map" in cfg.extra  # unknown keys are kept aside, never executed
    HybridDecoder(cfg)


@pytest.mark.parametrize("field, value, message", [
    ("mixer_types", ("gqa", "bogus"), "mixer_types"),
    ("ffn_types", ("dense",), "ffn_types"),
    ("residual", "magic", "residual"),
    ("hidden_act", "tanh", "hidden_act"),
    ("mixer_args", {"bogus": {}}, "mixer_args"),                          # not a kind
    ("mixer_args", {"kda": {"linear_num_heads": 4}}, "linear_num_heads"),  # not one of the kind's arguments
])
def test_invalid_config_names_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        HybridConfig(num_hidden_layers=2, **{field: value})


def test_the_mla_indexer_limits_each_query_to_its_top_k_keys():
    """With index_topk >= the sequence every key is kept (the dense MLA); below it the logits change."""
    torch.manual_seed(0)
    ids = torch.randint(0, 256, (1, 12))
    kw = dict(num_hidden_layers=2, mixer_types=("mla", "mla"))
    mla = dict(use_nope=False, q_lora_rank=24)
    dense = HybridDecoder(HybridConfig(**kw, mixer_args={"mla": mla})).eval()
    state = dense.state_dict()
    outs = {}
    for topk in (12, 4):
        indexed = {"mla": {**mla, "indexer": True, "index_topk": topk}}
        model = HybridDecoder(HybridConfig(**kw, mixer_args=indexed)).eval()
        missing = model.load_state_dict(state, strict=False).missing_keys
        assert missing and all(".indexer." in k for k in missing)
        with torch.no_grad():
            outs[topk] = model(ids)
    with torch.no_grad():
        ref = dense(ids)
    assert_close("same_algorithm", ref, outs[12], name="topk >= T")
    assert (ref - outs[4]).abs().max() > 1e-3
