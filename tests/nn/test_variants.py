"""The design notes' hypotheses behave as described."""

from __future__ import annotations

import torch

from archprobe.nn.attention import Attention
from archprobe.nn.decoder import HybridDecoder
from archprobe.nn.dynamic import HeadGate, Indexer
from archprobe.nn.kv_compression import LowRankKVAttention
from archprobe.nn.moe import MoE
from archprobe.nn.presets import variant
from archprobe.testing import assert_close


def test_kv_compression_caches_the_latent_only():
    attn = LowRankKVAttention(64, heads=4, kv_heads=4, head_dim=16, rank=12)
    _, cache = attn(torch.randn(1, 9, 64), use_cache=True)
    assert cache.k.shape == (1, 9, 12) and cache.v is None            # r wide ...
    assert cache.nbytes() == 9 * 12 * 4                                # ... not 2 * heads * head_dim = 128
    full = Attention(64, 4, 4, 16)
    _, full_cache = full(torch.randn(1, 9, 64), use_cache=True)
    assert full_cache.nbytes() == 9 * 2 * 4 * 16 * 4


def _copy_attention(src: Attention, dst: Attention):
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        getattr(dst, name).load_state_dict(getattr(src, name).state_dict())


def test_head_gate_all_open_is_the_baseline_and_closed_heads_vanish():
    torch.manual_seed(0)
    base = Attention(64, 4, 2, 16)
    gated = Attention(64, 4, 2, 16, head_gate=HeadGate(64, 4, mode="hard", keep_heads=4))
    _copy_attention(base, gated)
    x = torch.randn(2, 7, 64)
    with torch.no_grad():
        assert_close("same_algorithm", base(x)[0], gated(x)[0])       # all gates open
        few = Attention(64, 4, 2, 16, head_gate=HeadGate(64, 4, mode="hard", keep_heads=2))
        _copy_attention(base, few)
        few.gate.head_gate.weight.zero_()
        few.gate.head_gate.bias.copy_(torch.tensor([5.0, -5.0, 5.0, -5.0]))   # heads 1 and 3 closed
        expect = Attention(64, 4, 2, 16)
        _copy_attention(base, expect)
        w = expect.o_proj.weight.view(64, 4, 16).clone()
        w[:, [1, 3]] = 0                                                # their o_proj columns removed
        expect.o_proj.weight.copy_(w.view(64, 64))
        assert_close("same_algorithm", expect(x)[0], few(x)[0])


def test_indexer_with_topk_covering_everything_is_dense_attention():
    torch.manual_seed(0)
    base = Attention(64, 4, 2, 16)
    idx = Attention(64, 4, 2, 16, indexer=Indexer(64, 2, 8, topk=64))
    _copy_attention(base, idx)
    x = torch.randn(1, 12, 64)
    with torch.no_grad():
        assert_close("same_algorithm", base(x)[0], idx(x)[0])
        idx.indexer.topk = 3
        sparse, _ = idx(x)
        assert not torch.allclose(sparse, base(x)[0])
        _, cache = idx(x, use_cache=True)
    assert cache.index_keys.shape == (1, 12, 8)   # the indexer's extra per-token key cache


def test_latent_routing_router_reads_the_latent():
    moe = MoE(64, 8, 2, 32, latent_size=24, routing_space="latent")
    assert moe.gate.weight.shape == (8, 24)
    hidden = MoE(64, 8, 2, 32, latent_size=24, routing_space="hidden", latent_norm=True)
    assert hidden.gate.weight.shape == (8, 64) and hidden.routed_expert_norm.weight.shape == (24,)
    y = moe(torch.randn(3, 5, 64))
    assert y.shape == (3, 5, 64)
    cfg = variant("latent_routing")
    model = HybridDecoder(cfg)
    assert model.layers[0].block_sparse_moe.gate.weight.shape[1] == cfg.routed_expert_hidden_size


def test_attnres_with_one_source_is_identity_and_zero_queries_average():
    cfg = variant("attnres_block")
    model = HybridDecoder(cfg)
    names = {n for n, _ in model.named_parameters()}
    assert "layers.0.self_attention_res.proj.weight" in names and "output_attn_res.norm.weight" in names
    assert model.layers[0].self_attention_res.proj.weight.shape == (1, cfg.hidden_size)


def test_packed_mxfp4_experts_equal_their_dequantized_dense_twin():
    import numpy as np

    from archprobe.nn.moe import ExpertBank
    from archprobe.writers.mxfp4 import dequantize_mxfp4_np, quantize_mxfp4

    torch.manual_seed(0)
    E, L, F = 3, 64, 32
    packed = ExpertBank(E, L, F, "silu", gated=True, storage="mxfp4")
    dense = ExpertBank(E, L, F, "silu", gated=True)
    with torch.no_grad():
        for name, (rows, cols) in (("gate_up_proj", (2 * F, L)), ("down_proj", (L, F))):
            for e in range(E):
                p, s = quantize_mxfp4(np.random.default_rng(e).standard_normal((rows, cols)).astype(np.float32))
                getattr(packed, name + "_packed")[e] = torch.from_numpy(p)
                getattr(packed, name + "_scale")[e] = torch.from_numpy(s)
                getattr(dense, name)[e] = torch.from_numpy(dequantize_mxfp4_np(p, s))
    x = torch.randn(5, L)
    for e in range(E):
        assert torch.equal(packed.run(x, e), dense.run(x, e))
    assert not any(p.is_floating_point() for p in packed.buffers())
