"""kda_chunked == kda_recurrent == a float64 recurrence written here, for every T and chunk size,
with and without an initial state, under strong decay; final states too; gradients agree."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from archprobe.ops.kda import kda_chunked, kda_recurrent
from archprobe.testing import TOLERANCES, assert_close, assert_fast_gradients, compare


def reference_f64(q, k, v, g, beta, scale, s0):
    """The gated delta rule, token by token, written out independently in float64."""
    q, k, v, g, beta = (x.double() for x in (q, k, v, g, beta))
    B, T, H, K = k.shape
    S = s0.double().clone() if s0 is not None else torch.zeros(B, H, K, v.shape[-1], dtype=torch.float64)
    outs = []
    for t in range(T):
        for b in range(B):
            for h in range(H):
                St = torch.diag(g[b, t, h].exp()) @ S[b, h]
                kt = k[b, t, h]
                St = St + torch.outer(kt, beta[b, t, h] * (v[b, t, h] - St.T @ kt))
                S[b, h] = St
        outs.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t] * scale))
    return torch.stack(outs, 1), S


def make(B, T, H, K, V, strong, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    k = F.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    v = torch.randn(B, T, H, V, generator=gen)
    if strong:
        g = -5.0 + 0.05 * torch.rand(B, T, H, K, generator=gen)
    else:
        g = -5.0 * torch.sigmoid(torch.randn(B, T, H, K, generator=gen) - 2)
    beta = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    return q, k, v, g, beta


@pytest.mark.parametrize("T", [1, 63, 64, 65, 1000])
@pytest.mark.parametrize("strong", [False, True])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunked_matches_recurrent_and_float64(T, strong, with_state):
    B, H, K, V = 1, 2, 16, 8
    q, k, v, g, beta = make(B, T, H, K, V, strong, seed=T)
    s0 = torch.randn(B, H, K, V) if with_state else None
    ref64 = None
    if T <= 65:
        ref64, s64 = reference_f64(q, k, v, g, beta, K ** -0.5, s0)
    rec, s_rec = kda_recurrent(q, k, v, g, beta, initial_state=s0, output_final_state=True)
    if ref64 is None:  # T = 1000: the float64 run of the op itself stands in (a loop in Python is too slow)
        ref64, s64 = kda_recurrent(q.double(), k.double(), v.double(), g.double(), beta.double(),
                                   initial_state=None if s0 is None else s0.double(), output_final_state=True)
    assert_close("recurrent_vs_chunked", ref64, rec, name="recurrent fp32 vs fp64")
    for C in (16, 32, 64, 128):   # one sub-block, two, four
        out, s = kda_chunked(q, k, v, g, beta, initial_state=s0, output_final_state=True, chunk_size=C)
        assert out.dtype == q.dtype and s.dtype == torch.float32
        assert_close("recurrent_vs_chunked", ref64, out, name=f"chunked C={C} output")
        assert_close("recurrent_vs_chunked", s64, s, name=f"chunked C={C} final state")


def test_float64_reference_agrees_with_op_in_float64():
    q, k, v, g, beta = make(2, 20, 2, 8, 4, strong=False)
    ref, s_ref = reference_f64(q, k, v, g, beta, 8 ** -0.5, None)
    out, s = kda_recurrent(q.double(), k.double(), v.double(), g.double(), beta.double(), output_final_state=True)
    assert torch.allclose(out, ref, atol=1e-12) and torch.allclose(s, s_ref, atol=1e-12)


def test_very_strong_unbounded_decay_stays_finite():
    q, k, v, g, beta = make(1, 130, 2, 16, 8, strong=False)
    g = g * 40  # -exp(A)*softplus can decay far faster than K3's -5 bound
    out, _ = kda_chunked(q, k, v, g, beta)
    rec, _ = kda_recurrent(q, k, v, g, beta)
    assert torch.isfinite(out).all()
    assert_close("recurrent_vs_chunked", rec, out)


@pytest.mark.parametrize("strong", [False, True])
def test_gradients_match(strong):
    """Gradients against a float64 recurrence; the chunked error may not exceed 2x the fp32 recurrence's
    error (the flash-attention rule) or the fp32 bound, whichever is larger; for dg the bound is the
    decay-gradient one (testing.TOLERANCES says why)."""
    q, k, v, g, beta = make(1, 40, 2, 8, 8, strong=strong)
    weight = torch.linspace(-1, 1, 40 * 2 * 8).view(1, 40, 2, 8)

    assert_fast_gradients("q k v g beta".split(), (q, k, v, g, beta), weight, kda_recurrent, kda_recurrent,
                          lambda *a: kda_chunked(*a, chunk_size=16),
                          bounds={"g": TOLERANCES[("decay_gradient", torch.float32)]})


def test_bad_chunk_size():
    q, k, v, g, beta = make(1, 4, 1, 4, 4, strong=False)
    with pytest.raises(ValueError):
        kda_chunked(q, k, v, g, beta, chunk_size=24)


@pytest.mark.parametrize("strong", [False, True])
def test_long_sequences_run_as_segments_exactly(monkeypatch, strong):
    """A sequence longer than one segment runs as a chain (the state carried across); the last segment
    ends in a partial chunk. Output, final state and gradients equal the single-pass recurrence."""
    import archprobe.ops.kda.chunked as chunked

    monkeypatch.setattr(chunked, "SEGMENT_BYTES", 1)      # the floor: 256-token segments
    q, k, v, g, beta = make(1, 700, 2, 16, 8, strong=strong, seed=7)
    assert chunked.segment_tokens(1, 2, 16, 8, 32) == 256
    s0 = torch.randn(1, 2, 16, 8)
    ref, s_ref = kda_recurrent(q.double(), k.double(), v.double(), g.double(), beta.double(),
                               initial_state=s0.double(), output_final_state=True)
    out, s = kda_chunked(q, k, v, g, beta, initial_state=s0, output_final_state=True, chunk_size=32)
    assert_close("recurrent_vs_chunked", ref, out, name="segmented output")
    assert_close("recurrent_vs_chunked", s_ref, s, name="segmented final state")

    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    xs = [t.clone().requires_grad_(True) for t in (q, k, v, g, beta)]
    (kda_chunked(*xs, chunk_size=32)[0] * weight).sum().backward()
    xr = [t.double().requires_grad_(True) for t in (q, k, v, g, beta)]
    (kda_recurrent(*xr)[0] * weight.double()).sum().backward()
    for name, a, b in zip("q k v g beta".split(), xr, xs, strict=True):
        assert compare(a.grad, b.grad)["rel_rms"] <= 1e-4, name
