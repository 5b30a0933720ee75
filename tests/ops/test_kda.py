"""kda_chunked == kda_recurrent == a float64 recurrence written here, for every T and chunk size,
with and without an initial state, under strong decay; final states too; gradients agree."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from archprobe.ops.kda import kda_chunked, kda_recurrent
from archprobe.testing import TOLERANCES, assert_close, assert_fast_gradients, compare
from tests.support.recurrences import REGIMES, f64, regime_inputs


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


def test_very_strong_unbounded_decay_stays_finite(default_form):
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


# --- issue 17: the decay regimes users meet, the op's own chunk choice, the per-head form, no subnormals ---


@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("chunk", [None, 16, 64])
def test_chunked_equals_float64_recurrence_in_every_decay_regime(regime, chunk, default_form):
    """Output and final state (from a non-zero initial state, T not a multiple of any chunk) against the
    float64 recurrence, at the op's own chunk choice and at fixed ones."""
    q, k, v, g, beta = regime_inputs(regime, seed=3)
    s0 = torch.randn(1, 2, 16, 8, generator=torch.Generator().manual_seed(5))
    ref, s_ref = kda_recurrent(*f64(q, k, v, g, beta), initial_state=s0.double(), output_final_state=True)
    out, s = kda_chunked(q, k, v, g, beta, initial_state=s0, output_final_state=True, chunk_size=chunk)
    assert_close("recurrent_vs_chunked", ref, out, name=f"{regime} C={chunk} output")
    assert_close("recurrent_vs_chunked", s_ref, s, name=f"{regime} C={chunk} final state")


@pytest.mark.parametrize("regime", ["k3", "k3_strong_end", "unbounded"])
def test_gradients_at_the_default_chunk(regime):
    """Gradients through the op as users call it (no chunk_size); T = 70 spans three chunks."""
    q, k, v, g, beta = regime_inputs(regime, T=70, K=8, V=8, seed=11)
    weight = torch.linspace(-1, 1, 70 * 2 * 8).view(1, 70, 2, 8)
    assert_fast_gradients("q k v g beta".split(), (q, k, v, g, beta), weight, kda_recurrent, kda_recurrent,
                          kda_chunked, bounds={"g": TOLERANCES[("decay_gradient", torch.float32)]})


@pytest.mark.parametrize("regime", ["mild", "unbounded", "extreme"])
def test_one_decay_per_head_as_gated_deltanet_passes_it(regime, default_form):
    """g as [B, T, H] and as [B, T, H] expanded over K (stride 0) run the per-head form; both equal the
    recurrence with the decay repeated over the channels; gradients too."""
    q, k, v, g, beta = regime_inputs(regime, per_head=True, seed=2)
    full = g.unsqueeze(-1).repeat(1, 1, 1, 16)
    ref, s_ref = kda_recurrent(*f64(q, k, v, full, beta), output_final_state=True)
    for gate in (g, g.unsqueeze(-1).expand(-1, -1, -1, 16)):
        out, s = kda_chunked(q, k, v, gate, beta, output_final_state=True)
        assert_close("recurrent_vs_chunked", ref, out, name=f"per-head {tuple(gate.shape)} output")
        assert_close("recurrent_vs_chunked", s_ref, s, name=f"per-head {tuple(gate.shape)} final state")
    rec3, _ = kda_recurrent(q, k, v, g, beta)   # the recurrence takes [B, T, H] gates too
    assert_close("same_algorithm", ref, rec3, name="recurrent with a [B, T, H] gate")
    weight = torch.linspace(-1, 1, 150 * 2 * 8).view(1, 150, 2, 8)
    assert_fast_gradients("q k v g beta".split(), (q, k, v, g, beta), weight, kda_recurrent, kda_recurrent,
                          kda_chunked, bounds={"g": TOLERANCES[("decay_gradient", torch.float32)]})


def subnormal_count(x: torch.Tensor) -> int:
    return int(((x != 0) & (x.abs() < torch.finfo(x.dtype).tiny)).sum())


@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("per_head", [False, True])
def test_no_subnormal_values_in_any_intermediate(regime, per_head, default_form):
    """Every tensor the chunked form multiplies (decayed products, decayed copies, the solved inverse, the
    state after each segment) holds normal floats or exact zeros: subnormal arithmetic is what made the
    op 10x slower on x86 without flush-to-zero (issue 17)."""
    import archprobe.ops.kda.chunked as chunked
    from archprobe.ops.chunking import chunk_major

    q, k, v, g, beta = regime_inputs(regime, T=128, K=32, V=16, per_head=per_head, seed=9)
    g4 = chunked.per_head_gate(g)
    C = chunked.choose_chunk(g4, 32, 16)
    qc, kc, gc = (chunk_major(x, C, torch.float32) for x in (q, k, g4))
    G = torch.ones(C, C).tril_() @ gc
    betac = chunk_major(beta.unsqueeze(-1), C, torch.float32)
    if per_head:   # solved on the undecayed K K^T, the decay put back on the inverse (as the op does)
        d, decay = chunked._decayed_per_head(qc, kc, G)
        inverse = chunked._solve(d.A_kk, betac, 0.0) * decay
    else:
        d = chunked._decayed(qc, kc, G, inference=True)
        inverse = chunked._solve(d.A_kk, betac, chunked.slowest_span(G))
    for name in ("A_kk", "P_qk", "q_decayed", "k_decayed", "k_to_end"):
        assert subnormal_count(getattr(d, name)) == 0, name
    assert subnormal_count(inverse) == 0
    out, s = kda_chunked(q, k, v, g, beta, output_final_state=True)
    assert subnormal_count(out) == 0 and subnormal_count(s) == 0


def test_the_op_picks_its_chunk_from_the_shape_and_the_decay():
    """Per-channel gates: 32 only for large heads (K * V > SMALL_HEAD) whose chunks of 32 are one sub-block
    (no channel decays past 2 * HALF_SPAN in one), else 16. Per-head gates: 32, halved only where a chunk
    would decay past what even the float64 solve holds. An explicit chunk_size is used as given."""
    import archprobe.ops.kda.chunked as chunked

    def full(value, K=128, T=256):
        return torch.full((1, T, 2, K), value)

    assert chunked.choose_chunk(regime_inputs("mild", T=256, K=128)[3], 128, 128) == 32
    for regime in ("k3", "k3_strong_end", "unbounded"):   # some channel decays past 60 in 32 tokens
        assert chunked.choose_chunk(regime_inputs(regime, T=256, K=128)[3], 128, 128) == 16, regime
    assert chunked.choose_chunk(full(-1.8), 128, 128) == 32       # 32 x 1.8 = 57.6: one sub-block
    assert chunked.choose_chunk(full(-1.9), 128, 128) == 16       # 60.8
    for regime in ("mild", "k3", "k3_strong_end", "unbounded"):   # small heads: always 16
        assert chunked.choose_chunk(regime_inputs(regime, T=256)[3], 16, 8) == 16, regime
    assert chunked.choose_chunk(full(-0.1, K=64), 64, 64) == 16
    assert chunked.choose_chunk(full(-0.1, K=64), 64, 128) == 32
    per_head = chunked.per_head_gate
    assert chunked.choose_chunk(per_head(full(-10.0, K=1)), 128, 128) == 32     # 32 x 10 = 320 <= 500
    assert chunked.choose_chunk(per_head(full(-20.0, K=1)), 128, 128) == 16     # 640 > 500
    assert chunked.choose_chunk(per_head(full(-40.0, K=1)), 128, 128) == 16     # not below MIN_CHUNK
    q, k, v, g, beta = regime_inputs("mild", T=100, K=16, V=8)
    calls = []
    real = chunked._kda_segment
    try:
        chunked._kda_segment = lambda *a: calls.append(a[-1]) or real(*a)
        kda_chunked(q, k, v, g, beta, chunk_size=64)
    finally:
        chunked._kda_segment = real
    assert set(calls) == {64}


def test_sub_blocks_keep_every_factor_within_range():
    """sub_block's choice: every channel of every block decays by at most 2 * HALF_SPAN inside it."""
    import archprobe.ops.kda.chunked as chunked
    from archprobe.ops.chunking import chunk_major

    for regime in REGIMES:
        g = chunk_major(regime_inputs(regime, T=128)[3], 32, torch.float32)
        G = torch.ones(32, 32).tril_() @ g
        s = chunked.sub_block(G)
        Gs = G.view(*G.shape[:2], 32 // s, s, G.shape[-1])
        assert s == 1 or (Gs[..., 0, :] - Gs[..., -1, :]).max() <= 2 * chunked.HALF_SPAN, regime


def test_decay_shared_by_every_channel_is_taken_out_only_where_it_grows_the_sub_blocks():
    """K3's strong end (~5 per token in every channel) runs on the relative decay G - h (the regime test
    above holds its values against the float64 recurrence); mild and unbounded gates keep the plain path."""
    from archprobe.ops.chunking import chunk_major
    from archprobe.ops.kda import chunked

    for regime, expected in (("mild", False), ("k3_strong_end", True), ("unbounded", False)):
        g = chunk_major(regime_inputs(regime, T=256, K=16)[3], 32, torch.float32)
        G = g.cumsum(-2)
        shared = chunked._shared_decay(g, G)
        assert (shared is not None) == expected, regime
        if shared is not None:
            h, relative = shared
            assert torch.equal(relative, G - h)
            assert chunked.sub_block(G - h) > chunked.sub_block(G)
            assert bool((h <= 0).all()) and bool((G - h <= 1e-4).all())   # every relative decay still a decay


def test_mild_gates_take_the_one_block_path_and_still_equal_the_recurrence(monkeypatch):
    """Mild gates (no decay in a chunk below exp(-30)) skip the sub-block machinery; K3's typical gates do
    not. (The chunked form at the op's own chunk: the fused kernel off.)"""
    from archprobe.ops.kda import chunked

    monkeypatch.setenv("ARCHPROBE_NATIVE", "0")
    calls = []
    real = chunked._one_block
    monkeypatch.setattr(chunked, "_one_block", lambda *a: calls.append(1) or real(*a))
    for regime, expected in (("mild", True), ("k3", False)):
        calls.clear()
        q, k, v, g, beta = regime_inputs(regime, T=100, seed=5)
        out, s = kda_chunked(q, k, v, g, beta, output_final_state=True)
        ref, s_ref = kda_recurrent(*(x.double() for x in (q, k, v, g, beta)), output_final_state=True)
        assert bool(calls) == expected, regime
        assert_close("recurrent_vs_chunked", ref, out, name=f"{regime} output")
        assert_close("recurrent_vs_chunked", s_ref, s, name=f"{regime} final state")


def test_a_token_decaying_past_the_floor_is_capped_only_where_its_factors_were_below_it():
    """`_capped`: with tokens decaying by up to hundreds per step ("extreme"), every in-chunk decay
    exp(G_r - G_s) computed from the capped gates equals the exact one, or both are below exp(floor);
    and the sub-blocks are never single tokens."""
    from archprobe.ops.chunking import chunk_major, exp_floor
    from archprobe.ops.kda import chunked

    g = chunk_major(regime_inputs("extreme", T=128, K=16)[3], 32, torch.float32)
    assert g.min().item() < exp_floor(torch.float32)
    G, capped = g.double().cumsum(-2), chunked._capped(g).double().cumsum(-2)
    pad = torch.nn.functional.pad
    G, capped = pad(G, (0, 0, 1, 0)), pad(capped, (0, 0, 1, 0))   # the chunk's start as token 0
    exact = G.unsqueeze(-2) - G.unsqueeze(-3)                       # [r, s] = G_r - G_s
    ours = capped.unsqueeze(-2) - capped.unsqueeze(-3)
    lower = torch.ones(33, 33, dtype=torch.bool).tril().unsqueeze(-1)
    floor = exp_floor(torch.float32)
    same = (exact - ours).abs() < 1e-3
    both_below = (exact <= floor + 1e-9) & (ours <= floor + 1e-9)
    assert bool((same | both_below | ~lower).all())
    assert chunked.sub_block(capped[..., 1:, :].float()) >= 2


@pytest.mark.parametrize("per_token", [-31.0, -45.0, -100.0])
def test_every_channel_decaying_past_the_floor_each_token_stays_exact(per_token, default_form):
    """Every channel decays past exp(-30) on every token (so all of it is shared and all of it capped): the
    shared decay must come from the capped gates too, or the relative decay G - h grows past 0 and the
    factors overflow (caught in review: NaN at -45 and -100)."""
    gen = torch.Generator().manual_seed(4)
    q, k = (F.normalize(torch.randn(1, 100, 2, 16, generator=gen), dim=-1) for _ in range(2))
    v, beta = torch.randn(1, 100, 2, 8, generator=gen), torch.rand(1, 100, 2, generator=gen)
    g = per_token * (1 + 0.1 * torch.rand(1, 100, 2, 16, generator=gen))
    out, s = kda_chunked(q, k, v, g, beta, output_final_state=True)
    ref, s_ref = kda_recurrent(*f64(q, k, v, g, beta), output_final_state=True)
    assert bool(torch.isfinite(out).all())
    assert_close("recurrent_vs_chunked", ref, out, name=f"{per_token} output")
    assert_close("recurrent_vs_chunked", s_ref, s, name=f"{per_token} final state")


def test_no_tokens_gives_an_empty_read_out_and_the_state_as_given(default_form):
    """T = 0 (a prompt that was all padding): the chunked form answers as the recurrence does."""
    q = k = torch.randn(2, 0, 3, 16)
    v, g, beta = torch.randn(2, 0, 3, 8), -torch.rand(2, 0, 3, 16), torch.rand(2, 0, 3)
    s0 = torch.randn(2, 3, 16, 8)
    for initial in (None, s0):
        out, s = kda_chunked(q, k, v, g, beta, initial_state=initial, output_final_state=True)
        ref, s_ref = kda_recurrent(q, k, v, g, beta, initial_state=initial, output_final_state=True)
        assert out.shape == ref.shape == (2, 0, 3, 8)
        assert torch.equal(s, s_ref)
