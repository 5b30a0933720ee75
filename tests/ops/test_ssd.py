"""Mamba-2's SSD: the chunked form equals the recurrent one, and both equal a float64 recurrence
written here (outputs and final states, with and without an initial state, strong decay, gradients)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from archprobe.ops.ssd import ssd_chunked, ssd_recurrent
from archprobe.testing import assert_close, assert_fast_gradients
from tests.support.recurrences import ssd_reference as reference


def make(Bsz, T, H, P, N, strong=False, seed=0, mild=False):
    """mild: a chunk's decay stays within the factored form's span; strong: up to ~-20 per step."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(Bsz, T, H, P, generator=gen)
    dt = torch.nn.functional.softplus(torch.randn(Bsz, T, H, generator=gen)) * (8.0 if strong else 0.02 if mild
                                                                                 else 0.5)
    A = -torch.linspace(0.5, 4.0, H)                       # A = -exp(A_log): up to ~-20 per step when strong
    Bm = torch.randn(Bsz, T, H, N, generator=gen)
    Cm = torch.randn(Bsz, T, H, N, generator=gen)
    return x, dt, A, Bm, Cm


@pytest.mark.parametrize("T", [1, 63, 64, 65, 200])
@pytest.mark.parametrize("chunk", [16, 32, 64])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("decay", ["mild", "moderate", "strong"])
def test_chunked_equals_recurrent_and_float64(T, chunk, with_state, decay):
    """mild runs the factored form, strong the [C, C] decays (checked), moderate either by chunk size."""
    import archprobe.ops.ssd as ssd

    x, dt, A, Bm, Cm = make(2, T, 3, 8, 5, strong=decay == "strong", mild=decay == "mild")
    if T > 1 and decay != "moderate":   # (one token spans no decay: factored at any strength)
        assert (ssd.decay_factors(dt, A.repeat(2), chunk)[3] is not None) == (decay == "mild")
    S0 = torch.randn(2, 3, 8, 5) if with_state else None
    ref_y, ref_S = reference(x, dt, A, Bm, Cm, S0)
    y_r, S_r = ssd_recurrent(x, dt, A, Bm, Cm, initial_state=S0, output_final_state=True)
    y_c, S_c = ssd_chunked(x, dt, A, Bm, Cm, initial_state=S0, output_final_state=True, chunk_size=chunk)
    for name, y, S in (("recurrent", y_r, S_r), ("chunked", y_c, S_c)):
        assert_close("recurrent_vs_chunked", ref_y, y, name=f"{name} output")
        assert_close("recurrent_vs_chunked", ref_S, S, name=f"{name} final state")


def test_long_sequences_run_as_segments_exactly(monkeypatch):
    """A 300-token run as 64-token segments (the state carried across, the last one partial): output,
    final state and gradients as the float64 recurrence has them."""
    import archprobe.ops.ssd as ssd

    monkeypatch.setattr(ssd, "SEGMENT_BYTES", 1)   # the smallest segment: one chunk
    x, dt, A, Bm, Cm = make(1, 300, 2, 4, 3, strong=True)
    S0 = torch.randn(1, 2, 4, 3)
    ref_y, ref_S = reference(x, dt, A, Bm, Cm, S0)
    y, S = ssd.ssd_chunked(x, dt, A, Bm, Cm, initial_state=S0, output_final_state=True, chunk_size=64)
    assert_close("recurrent_vs_chunked", ref_y, y, name="segmented output")
    assert_close("recurrent_vs_chunked", ref_S, S, name="segmented final state")
    weight = torch.linspace(-1, 1, 300 * 2 * 4).view(1, 300, 2, 4)
    assert_fast_gradients(("x", "dt", "A", "B", "C"), (x, dt, A, Bm, Cm), weight, reference, ssd_recurrent,
                          lambda *a: ssd.ssd_chunked(*a, chunk_size=64))


def test_empty_sequence_keeps_the_state(default_form):
    x, dt, A, Bm, Cm = make(1, 0, 2, 4, 3)
    S0 = torch.randn(1, 2, 4, 3)
    y, S = ssd_chunked(x, dt, A, Bm, Cm, initial_state=S0, output_final_state=True)
    assert y.shape == (1, 0, 2, 4) and torch.equal(S, S0)


def test_gradients_match_the_recurrence():
    """Against float64 autograd through the reference: the chunked error may not exceed 2x the fp32
    recurrence's error or the fp32 bound, whichever is larger (A's gradient sums over every token)."""
    x, dt, A, Bm, Cm = make(1, 40, 2, 4, 3, strong=True)
    weight = torch.linspace(-1, 1, 40 * 2 * 4).view(1, 40, 2, 4)

    assert_fast_gradients(("x", "dt", "A", "B", "C"), (x, dt, A, Bm, Cm), weight, reference, ssd_recurrent,
                          lambda *a: ssd_chunked(*a, chunk_size=16))


# --- issue 17: the decay regimes of benchmarks/gdn_ssd.py at the op's defaults, no subnormals ---

def regime_inputs(regime, T=300, H=3, P=8, N=6, seed=0):
    """dt as Mamba-2 feeds it (softplus) with A = -(1..16), as benchmarks/gdn_ssd.py draws them: mild,
    typical, strong, and "extreme" (a chunk's decay far past float32's range in a few tokens)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(1, T, H, P, generator=gen)
    z = torch.randn(1, T, H, generator=gen)
    dt = {"mild": F.softplus(z - 4), "typical": F.softplus(z), "strong": F.softplus(z + 2) * 2,
          "extreme": 50 * torch.rand(1, T, H, generator=gen)}[regime]
    A = -(1 + 15 * torch.rand(H, generator=gen))
    return x, dt, A, torch.randn(1, T, H, N, generator=gen), torch.randn(1, T, H, N, generator=gen)


REGIMES = ["mild", "typical", "strong", "extreme"]


@pytest.mark.parametrize("regime", REGIMES)
def test_every_regime_at_the_defaults_equals_the_float64_recurrence(regime, monkeypatch, default_form):
    """No chunk_size given (the fused kernel, or the chunked form at the op's own chunk), an initial state,
    several segments (the last partial)."""
    import archprobe.ops.ssd as ssd

    monkeypatch.setattr(ssd, "SEGMENT_BYTES", 64 * 3 * (8 + 2 * 6) * 4)   # segments of 64 or 96 tokens
    x, dt, A, Bm, Cm = regime_inputs(regime)
    S0 = torch.randn(1, 3, 8, 6)
    ref_y, ref_S = reference(x, dt, A, Bm, Cm, S0)
    y, S = ssd.ssd_chunked(x, dt, A, Bm, Cm, initial_state=S0, output_final_state=True)
    assert_close("recurrent_vs_chunked", ref_y, y, name=f"{regime} output")
    assert_close("recurrent_vs_chunked", ref_S, S, name=f"{regime} final state")


def subnormal_count(x: torch.Tensor) -> int:
    return int(((x != 0) & (x.abs() < torch.finfo(x.dtype).tiny)).sum())


@pytest.mark.parametrize("regime", REGIMES)
def test_no_subnormal_value_in_any_intermediate(regime, monkeypatch):
    """The factors, and after every segment every buffer the fast form multiplies (the chunk states, C B^T
    times the decays, the decays, U and its decayed copy, B and the scaled C, the output rows) hold normal
    floats or exact zeros:
    subnormal arithmetic is what makes x86 10-100x slower without flush-to-zero (issue 17). (The chunked
    form: the fused kernel off.)"""
    import archprobe.ops.ssd as ssd

    monkeypatch.setenv("ARCHPROBE_NATIVE", "0")

    x, dt, A, Bm, Cm = regime_inputs(regime, T=256, H=4, P=16, N=16, seed=3)
    factors = ssd.decay_factors(dt, A, ssd.DEFAULT_CHUNK)
    assert [subnormal_count(f) for f in factors if f is not None] == [0] * (len(factors) - (factors[3] is None))
    seen = []
    segment = ssd._segment

    def checked(x, B, C, fac, mask, v, out):
        segment(x, B, C, fac, mask, v, out)
        used = [torch.stack(v.S), v.G, v.x2, v.Bc, v.Cc, v.y] + ([v.decay] if fac[3] is None else [])
        seen.append([subnormal_count(t) for t in used])

    monkeypatch.setattr(ssd, "_segment", checked)
    monkeypatch.setattr(ssd, "SEGMENT_BYTES", 64 * 4 * (16 + 2 * 16) * 4)
    with torch.no_grad():
        y, S = ssd.ssd_chunked(x, dt, A, Bm, Cm, initial_state=torch.randn(1, 4, 16, 16), output_final_state=True)
    segments = -(-256 // ssd.segment_tokens(4, 16, 16, ssd.DEFAULT_CHUNK))
    assert len(seen) == segments > 1 and all(counts == [0] * len(counts) for counts in seen), seen
    assert subnormal_count(y) == 0 and subnormal_count(S) == 0


def test_results_do_not_share_the_reused_buffers(default_form):
    """The no-grad path keeps its buffers between calls: a result must not change under a later call."""
    x, dt, A, Bm, Cm = regime_inputs("typical", T=100)
    y1, S1 = ssd_chunked(x, dt, A, Bm, Cm, output_final_state=True)
    kept = (y1.clone(), S1.clone())
    ssd_chunked(x * 2, dt, A, Bm * 3, Cm, initial_state=torch.randn_like(S1), output_final_state=True)
    assert torch.equal(y1, kept[0]) and torch.equal(S1, kept[1])
