"""attn_res_mix, moe_route, moe_dispatch, situ_glu, MLA forms and dequantization against their
definitions written out here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from archprobe.ops import attn_res_mix, dequantize_fp8_block, dequantize_mxfp4, moe_route, situ_glu
from archprobe.ops.mla import mla_absorbed, mla_naive
from archprobe.ops.moe import glu_expert, moe_dense_reference, moe_dispatch, routing_stats
from archprobe.testing import assert_close
from archprobe.writers.mxfp4 import dequantize_mxfp4_np, quantize_mxfp4


def test_attn_res_mix_matches_the_formula():
    torch.manual_seed(0)
    src = torch.randn(4, 2, 3, 16)
    query = torch.randn(16)
    got = attn_res_mix(src, query)
    for b in range(2):
        for t in range(3):
            scores = []
            for j in range(4):
                v = src[j, b, t]
                kappa = v / math.sqrt((v * v).mean().item() + 1e-5)
                scores.append((kappa * query).sum())
            w = torch.softmax(torch.stack(scores), 0)
            expect = sum(w[j] * src[j, b, t] for j in range(4))
            assert torch.allclose(got[b, t], expect, atol=1e-5)


def test_attn_res_zero_query_is_the_mean_and_dtype_is_kept():
    src = torch.randn(3, 1, 2, 8, dtype=torch.bfloat16)
    out = attn_res_mix(src, torch.zeros(8))
    assert out.dtype == torch.bfloat16
    assert torch.allclose(out.float(), src.float().mean(0), atol=1e-2)


def test_moe_route_bias_selects_but_does_not_weigh():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    w, e = moe_route(logits, 2, score="sigmoid", bias=torch.tensor([0.0, 0.0, 5.0, 0.0]), renormalize=False)
    assert sorted(e[0].tolist()) == [0, 2]
    s = torch.sigmoid(logits[0])
    assert torch.allclose(w[0], s[e[0]])
    w2, _ = moe_route(logits, 2, score="sigmoid", renormalize=True, scale=2.5)
    assert torch.allclose(w2.sum(), torch.tensor(2.5))
    ws, es = moe_route(logits, 2, score="softmax", renormalize=False)
    assert torch.allclose(ws[0], torch.softmax(logits[0], 0)[es[0]])


def test_moe_route_group_limited():
    logits = torch.tensor([[5.0, 4.9, -9, -9, 3.0, 2.9, 0.0, 0.1]])
    with pytest.raises(ValueError):  # 3 experts cannot come from one group of 2
        moe_route(logits, 3, groups=4, topk_groups=1)
    _, e = moe_route(logits, 2, groups=4, topk_groups=1)
    assert sorted(e[0].tolist()) == [0, 1]
    _, e = moe_route(logits, 3, groups=4, topk_groups=2)
    assert set(e[0].tolist()) <= {0, 1, 4, 5}


def test_dispatch_equals_dense_reference_forward_and_backward():
    torch.manual_seed(0)
    T, L, F, E, K = 37, 16, 24, 6, 2
    wg, wu, wd = (torch.randn(E, F, L, requires_grad=True), torch.randn(E, F, L, requires_grad=True),
                  torch.randn(E, L, F, requires_grad=True))
    x = torch.randn(T, L, requires_grad=True)
    w, e = moe_route(x.detach() @ torch.randn(L, E), K)
    w.requires_grad_(True)  # the routing weights carry the router's gradient
    expert = glu_expert(lambda g, u: torch.nn.functional.silu(g) * u)
    outs, grads = [], []
    for run in (moe_dense_reference, moe_dispatch):
        for t in (x, wg, wu, wd, w):
            t.grad = None
        y = run(x, w, e, lambda xs, i, scale: expert(xs, wg, wu, wd, i, scale), E)
        y.pow(2).sum().backward()
        outs.append(y)
        grads.append([t.grad.clone() for t in (x, wg, wu, wd, w)])
    assert_close("same_algorithm", outs[0], outs[1])
    for a, b in zip(*grads, strict=True):
        assert_close("same_algorithm", a, b)
    stats = routing_stats(e, w, E)
    assert sum(stats["load"]) == T * K and stats["imbalance"] >= 1.0 and 0 < stats["entropy"] <= math.log(E) + 1e-9


def test_situ_glu_definition_bounds_and_swiglu_limit():
    g, u = torch.randn(1000) * 50, torch.randn(1000) * 50
    got = situ_glu(g, u)
    expect = 4 * torch.tanh(g / 4) * torch.sigmoid(g) * 25 * torch.tanh(u / 25)
    assert torch.allclose(got, expect)
    assert got.abs().max() <= 100
    assert torch.allclose(situ_glu(g, u, beta=math.inf, linear_beta=math.inf), torch.nn.functional.silu(g) * u)


def test_mla_naive_equals_absorbed():
    torch.manual_seed(0)
    B, T, S, H, N, R, V, r = 2, 3, 7, 4, 16, 8, 12, 10
    qn, qr = torch.randn(B, T, H, N), torch.randn(B, T, H, R)
    ckv, kr = torch.randn(B, S, r), torch.randn(B, S, R)
    w = torch.randn(H * (N + V), r)
    mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)
    a = mla_naive(qn, qr, ckv, kr, w, mask, (N + R) ** -0.5)
    b = mla_absorbed(qn, qr, ckv, kr, w, mask, (N + R) ** -0.5)
    assert_close("same_algorithm", a, b)


def test_dequantize_mxfp4_matches_numpy_definition():
    w = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    packed, scale = quantize_mxfp4(w)
    got = dequantize_mxfp4(torch.from_numpy(packed), torch.from_numpy(scale), dtype=torch.float32)
    assert np.array_equal(got.numpy(), dequantize_mxfp4_np(packed, scale))
    # low nibble = even column: byte 0x21 in row 0 -> col0 = code 1 (0.5), col1 = code 2 (1.0)
    p = torch.zeros(1, 16, dtype=torch.uint8)
    p[0, 0] = 0x21
    s = torch.full((1, 1), 127, dtype=torch.uint8)
    d = dequantize_mxfp4(p, s, dtype=torch.float32)
    assert d[0, :2].tolist() == [0.5, 1.0]


def test_dequantize_fp8_block():
    w = torch.randn(130, 260).to(torch.float8_e4m3fn)
    s = torch.rand(2, 3) + 0.5
    got = dequantize_fp8_block(w, s, dtype=torch.float32)
    expect = w.float() * s.repeat_interleave(128, 0)[:130].repeat_interleave(128, 1)[:, :260]
    assert torch.equal(got, expect)


@pytest.mark.parametrize("bad", ["relu"])
def test_moe_route_rejects_unknown_score(bad):
    with pytest.raises(ValueError):
        moe_route(torch.zeros(1, 4), 2, score=bad)
