"""The fused C recurrences behind kda_chunked's and ssd_chunked's defaults (ops/native/recurrences.c via
ops/native/delta_rule.py and ops/native/ssd.py): equal to the float64 recurrences over shapes that exercise
every strip width and thread split, and (SSD) every path of its scaled state; taken only where they apply;
their shape checks stand between a caller's mistake and the C loop; they leave the caller's floating-point
mode as it was; the compile cache and the fallback where no compiler works."""

from __future__ import annotations

import platform
import random

import pytest
import torch
import torch.nn.functional as F

from archprobe.ops import native
from archprobe.ops.kda import kda_chunked, kda_recurrent
from archprobe.ops.native import delta_rule as kda_native
from archprobe.ops.native import ssd as ssd_native
from archprobe.ops.ssd import ssd_chunked, ssd_recurrent
from archprobe.testing import assert_close
from tests.support.native import require_native
from tests.support.recurrences import f64, regime_inputs, ssd_reference


@pytest.fixture(autouse=True)
def _native_on(monkeypatch):
    monkeypatch.delenv("ARCHPROBE_NATIVE", raising=False)
    require_native()


def inputs(B, T, H, K, V, regime="k3", per_head=False, seed=0):
    return regime_inputs(regime, B, T, H, K, V, seed=seed, per_head=per_head)


def counted(monkeypatch, binding=kda_native) -> list:
    """A list that grows by one each time the binding's kernel is asked (True where it answered)."""
    calls = []
    real = binding.forward

    def forward(*a):
        out = real(*a)
        calls.append(out is not None)
        return out
    monkeypatch.setattr(binding, "forward", forward)
    return calls


def through_kernel(op, binding, *args, **kw):
    """op at its defaults, asserting it took the fused kernel."""
    with pytest.MonkeyPatch.context() as mp:
        calls = counted(mp, binding)
        out = op(*args, **kw)
    assert calls == [True], "the op's defaults did not take the fused kernel"
    return out


def fused(*args, **kw):
    return through_kernel(kda_chunked, kda_native, *args, **kw)


def equal_in_float32(ref, ref_state, out, state, name):
    """float32 results, each within the fast-form tolerance of the float64 recurrence's."""
    assert out.dtype == torch.float32 and state.dtype == torch.float32, name
    assert_close("recurrent_vs_chunked", ref, out, name=name + " output")
    assert_close("recurrent_vs_chunked", ref_state, state, name=name + " final state")


def test_a_random_sweep_equals_the_float64_recurrence():
    """Every strip width (V below, at and past a vector, partial last strips), odd K, one token, per-head
    and per-channel gates in every regime, with and without an initial state, 1 to 3 threads."""
    rng = random.Random(7)
    regimes = ["mild", "k3", "k3_strong_end", "unbounded", "extreme"]
    threads = torch.get_num_threads()
    try:
        for case in range(40):
            B, T, H = rng.randint(1, 2), rng.choice([1, 2, 17, 64, 130]), rng.randint(1, 3)
            K, V = rng.choice([1, 3, 16, 33, 64]), rng.choice([1, 5, 16, 31, 64, 100, 129, 200])
            regime, per_head = rng.choice(regimes), rng.random() < 0.3
            torch.set_num_threads(rng.randint(1, 3))
            q, k, v, g, beta = inputs(B, T, H, K, V, regime, per_head, seed=case)
            s0 = torch.randn(B, H, K, V) if rng.random() < 0.5 else None
            scale = rng.choice([None, 0.3])
            out, s = fused(q, k, v, g, beta, scale=scale, initial_state=s0, output_final_state=True)
            ref, s_ref = kda_recurrent(*f64(q, k, v, g, beta), scale=scale, initial_state=f64(s0)[0],
                                       output_final_state=True)
            equal_in_float32(ref, s_ref, out, s, f"case {case}: B={B} T={T} H={H} K={K} V={V} {regime} "
                             f"per_head={per_head}")
    finally:
        torch.set_num_threads(threads)


def test_strided_and_low_precision_inputs():
    """Views with any strides are read as their values; bf16 inputs give a bf16 read-out and a float32
    state, as the recurrence does."""
    q, k, v, g, beta = inputs(1, 40, 2, 16, 24, seed=3)
    qt, kt = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k))   # non-contiguous views
    assert not qt.is_contiguous()
    out, s = fused(qt, kt, v, g, beta, output_final_state=True)
    ref, s_ref = kda_recurrent(*f64(q, k, v, g, beta), output_final_state=True)
    assert_close("recurrent_vs_chunked", ref, out, name="strided output")
    bf = [x.bfloat16() for x in (q, k, v, g, beta)]
    out, s = fused(*bf, output_final_state=True)
    ref, _ = kda_recurrent(*bf, output_final_state=True)
    assert out.dtype == torch.bfloat16 and s.dtype == torch.float32
    assert (out.float() - ref.float()).abs().max() <= 0.02 * ref.float().abs().max()


def test_taken_only_where_it_applies(monkeypatch):
    """Autograd, float64 and an explicit chunk_size run the chunked form; under no_grad a tensor that
    requires a gradient does not stop the kernel."""
    q, k, v, g, beta = inputs(1, 20, 2, 8, 8)
    assert kda_native.forward(q, k, v, g, beta, 0.3, None) is not None
    assert kda_native.forward(*f64(q, k, v, g, beta), 0.3, None) is None
    assert kda_chunked(*f64(q, k, v, g, beta))[0].dtype == torch.float64
    leaf = q.clone().requires_grad_(True)
    assert kda_native.forward(leaf, k, v, g, beta, 0.3, None) is None
    with torch.no_grad():
        assert kda_native.forward(leaf, k, v, g, beta, 0.3, None) is not None
    calls = counted(monkeypatch)
    kda_chunked(q, k, v, g, beta, chunk_size=16)
    assert calls == []


def test_disabled_by_the_environment(monkeypatch):
    q, k, v, g, beta = inputs(1, 20, 2, 8, 8)
    monkeypatch.setenv("ARCHPROBE_NATIVE", "0")
    assert native.library("recurrences") is None and native.unavailable_reason("recurrences") == "ARCHPROBE_NATIVE=0"
    assert kda_native.forward(q, k, v, g, beta, 0.3, None) is None
    out, _ = kda_chunked(q, k, v, g, beta)   # the chunked form
    assert_close("recurrent_vs_chunked", kda_recurrent(*f64(q, k, v, g, beta))[0], out, name="fallback")


@pytest.mark.parametrize("bad", ["k", "v", "g", "beta", "state"])
def test_shapes_the_kernel_cannot_take_never_reach_it(bad):
    """The C loop trusts its shapes: one that does not broadcast to its own stops in Python (the binding
    returns None) and the op answers as its torch form does: an error, never a read out of bounds."""
    q, k, v, g, beta = inputs(2, 10, 3, 8, 8)
    state = torch.zeros(2, 3, 8, 8)
    wrong = {"k": k[:, :9], "v": v[:, :, :2], "g": g[..., :5], "beta": beta[:, :, :2], "state": state[:, :, :4]}[bad]
    args = {"k": k, "v": v, "g": g, "beta": beta, "state": state}
    args[bad] = wrong
    assert kda_native.forward(q, args["k"], args["v"], args["g"], args["beta"], 0.3, args["state"]) is None
    with pytest.raises((RuntimeError, ValueError)):
        kda_chunked(q, args["k"], args["v"], args["g"], args["beta"], initial_state=args["state"])


def test_empty_dimensions_fall_back_to_the_torch_form():
    """K, V = 0 (or N, P = 0): the kernel is not called (it would leave its output unwritten)."""
    q, k, v, g, beta = inputs(1, 5, 2, 8, 8)
    assert kda_native.forward(q[..., :0], k[..., :0], v, g[..., :0], beta, 0.3, None) is None
    assert kda_native.forward(q, k, v[..., :0], g, beta, 0.3, None) is None
    x, dt, A, Bm, Cm = ssd_inputs(1, 5, 2, 4, 3)
    assert ssd_native.forward(x, dt, A, Bm[..., :0], Cm[..., :0], None) is None
    y, S = ssd_chunked(x, dt, A, Bm[..., :0], Cm[..., :0], output_final_state=True)
    assert y.shape == (1, 5, 2, 4) and bool((y == 0).all())


def test_a_decay_past_the_floor_forgets_the_state_as_the_recurrence_does():
    """A log-decay of -inf (or below -30) is a decay of exactly 0 in the kernel, so even a huge state is
    forgotten, not kept at exp(-30) of itself."""
    q, k, v, g, beta = inputs(1, 20, 2, 8, 8, seed=8)
    s0 = torch.full((1, 2, 8, 8), 1e12)
    g[:, 0] = -float("inf")
    g[:, 5, :, :4] = -31.0
    out, s = fused(q, k, v, g, beta, initial_state=s0, output_final_state=True)
    ref, s_ref = kda_recurrent(*f64(q, k, v, g, beta), initial_state=s0.double(), output_final_state=True)
    assert_close("recurrent_vs_chunked", ref, out, name="after a forgetting decay")
    assert_close("recurrent_vs_chunked", s_ref, s, name="after a forgetting decay, state")


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64", "i686", "i386"),
                    reason="flush-to-zero is set through x86's MXCSR")
def test_no_subnormal_in_the_state_and_the_callers_float_mode_untouched():
    """Decays that drive the state below float32's smallest normal leave exact zeros there (the kernel's
    threads flush them), and the calling thread computes subnormals again afterwards."""
    q, k, v, g, beta = inputs(1, 300, 2, 16, 40, regime="mild")
    g[:, 150:] = -0.62   # then nothing new comes in, and 150 x 0.62 = 93 walks the state to ~1e-41
    k[:, 150:] = 0.0
    out, s = fused(q, k, v, g, beta, output_final_state=True)
    ref, _ = kda_recurrent(q, k, v, g, beta, output_final_state=True)
    tiny = torch.finfo(torch.float32).tiny

    def subnormals(x):
        return int(((x != 0) & (x.abs() < tiny)).sum())
    assert subnormals(ref) > 0           # the test reaches the subnormal range (torch's recurrence goes there)
    assert subnormals(s) == 0 and subnormals(out) == 0

    def product(a, b):
        return a * b
    assert product(1e-300, 1e-20) > 0.0                          # float64 subnormal in this thread
    assert float(torch.tensor([1e-30]) * torch.tensor([1e-10])) > 0.0   # float32 subnormal in torch


def test_a_broken_compiler_falls_back_with_a_reason(monkeypatch, tmp_path):
    """CC pointing at a compiler that fails: no library, a one-line reason, the op still answers."""
    monkeypatch.setenv("CC", "false")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("ARCHPROBE_CACHE", raising=False)   # else it owns the cache (cachedir.py)
    native._load.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="not available .*no working C compiler"):
            assert native.library("recurrences") is None
        assert native.unavailable_reason("recurrences")
        q, k, v, g, beta = inputs(1, 20, 2, 8, 8)
        out, _ = kda_chunked(q, k, v, g, beta)
        assert_close("recurrent_vs_chunked", kda_recurrent(*f64(q, k, v, g, beta))[0], out, name="fallback")
    finally:
        native._load.cache_clear()


def test_the_library_is_built_once_into_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("ARCHPROBE_CACHE", raising=False)   # else it owns the cache (cachedir.py)
    native._load.cache_clear()
    try:
        assert native.library("recurrences") is not None
        built = list((tmp_path / "archprobe" / "native").glob("recurrences-*.so"))
        assert len(built) == 1
        mtime = built[0].stat().st_mtime_ns
        native._load.cache_clear()
        assert native.library("recurrences") is not None
        assert [p.stat().st_mtime_ns for p in (tmp_path / "archprobe" / "native").glob("*.so")] == [mtime]
    finally:
        native._load.cache_clear()


def test_infinite_and_nan_gates_answer_as_the_recurrence():
    """A -inf log-decay (a channel forgetting at once) gives the recurrence's finite answer; a NaN one
    propagates, as in the recurrence; a decay per head of every size, through the in-loop exp."""
    q, k, v, g, beta = inputs(1, 50, 2, 16, 20, seed=4)
    g[:, 10, :, 3] = -float("inf")
    out, s = fused(q, k, v, g, beta, output_final_state=True)
    ref, s_ref = kda_recurrent(*f64(q, k, v, g, beta), output_final_state=True)
    assert bool(torch.isfinite(out).all())
    assert_close("recurrent_vs_chunked", ref, out, name="-inf gate")
    g[:, 20, 1, 5] = float("nan")
    out, s = fused(q, k, v, g, beta, output_final_state=True)
    assert bool(torch.isnan(out[:, 20:, 1]).any()) and bool(torch.isfinite(out[:, :20]).all())
    per_head = torch.linspace(-40.0, 0.0, 50 * 2).view(1, 50, 2)   # one decay per head, across the floor
    out, s = fused(q, k, v, per_head, beta, output_final_state=True)
    ref, s_ref = kda_recurrent(*f64(q, k, v, per_head, beta), output_final_state=True)
    assert_close("recurrent_vs_chunked", ref, out, name="per-head decays")
    assert_close("recurrent_vs_chunked", s_ref, s, name="per-head decays, state")



# --- Mamba-2's SSD ---

def ssd_inputs(Bsz, T, H, P, N, dt_scale=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(Bsz, T, H, P, generator=gen)
    dt = F.softplus(torch.randn(Bsz, T, H, generator=gen)) * dt_scale
    A = -(1 + 15 * torch.rand(H, generator=gen))
    return x, dt, A, torch.randn(Bsz, T, H, N, generator=gen), torch.randn(Bsz, T, H, N, generator=gen)


def ssd_fused(*args, **kw):
    return through_kernel(ssd_chunked, ssd_native, *args, **kw)


def test_ssd_random_sweep_equals_the_float64_recurrence():
    """Every strip width, one token and odd lengths (the two-token passes and the single tail), decays from
    none to past the floor (the scaled state kept, folded, or zeroed), with and without a state, 1-3 threads."""
    rng = random.Random(11)
    threads = torch.get_num_threads()
    try:
        for case in range(40):
            Bsz, T, H = rng.randint(1, 2), rng.choice([1, 2, 3, 17, 64, 131]), rng.randint(1, 3)
            P, N = rng.choice([1, 5, 16, 31, 64, 100, 129]), rng.choice([1, 3, 16, 64])
            dt_scale = rng.choice([0.0, 0.001, 0.05, 0.5, 3.0, 40.0])
            torch.set_num_threads(rng.randint(1, 3))
            x, dt, A, Bm, Cm = ssd_inputs(Bsz, T, H, P, N, dt_scale, seed=case)
            S0 = torch.randn(Bsz, H, P, N) if rng.random() < 0.5 else None
            y, S = ssd_fused(x, dt, A, Bm, Cm, initial_state=S0, output_final_state=True)
            ref_y, ref_S = ssd_reference(x, dt, A, Bm, Cm, S0)
            equal_in_float32(ref_y, ref_S, y, S, f"case {case}: B={Bsz} T={T} H={H} P={P} N={N} dt x{dt_scale}")
    finally:
        torch.set_num_threads(threads)


def test_ssd_scaled_state_folds_exactly_over_long_decays():
    """A mild decay for thousands of tokens walks the scale c past 2^-10 many times (each a fold), then a
    token decaying past the floor zeroes the state, then growth-free tokens start it again."""
    x, dt, A, Bm, Cm = ssd_inputs(1, 3000, 2, 20, 8, dt_scale=0.01, seed=2)
    dt[:, 1500] = 100.0   # a decay of exp(-100 .. -1600): below the floor, S becomes 0
    y, S = ssd_fused(x, dt, A, Bm, Cm, output_final_state=True)
    ref_y, ref_S = ssd_reference(x, dt, A, Bm, Cm)
    assert_close("recurrent_vs_chunked", ref_y, y, name="long mild decay, output")
    assert_close("recurrent_vs_chunked", ref_S, S, name="long mild decay, final state")
    assert_close("recurrent_vs_chunked", ref_y[:, 1500:], y[:, 1500:], name="after the zeroing decay")


def test_ssd_strided_inputs_and_the_recurrent_contract():
    """Views are read as their values; float64 and bf16 inputs give float32 results, as ssd_recurrent does."""
    x, dt, A, Bm, Cm = ssd_inputs(2, 40, 3, 16, 8, seed=5)
    xt = x.transpose(1, 2).contiguous().transpose(1, 2)
    y, S = ssd_fused(xt, dt, A, Bm, Cm, output_final_state=True)
    ref_y, ref_S = ssd_reference(x, dt, A, Bm, Cm)
    assert_close("recurrent_vs_chunked", ref_y, y, name="strided")
    for dtype in (torch.float64, torch.bfloat16):
        args = [t.to(dtype) for t in (x, dt, A, Bm, Cm)]
        y, S = ssd_fused(*args, output_final_state=True)
        ref_y, _ = ssd_recurrent(*args, output_final_state=True)
        assert y.dtype == ref_y.dtype == torch.float32 and S.dtype == torch.float32
        assert (y - ref_y).abs().max() <= 1e-4 * ref_y.abs().max()


def test_ssd_taken_only_where_it_applies(monkeypatch):
    x, dt, A, Bm, Cm = ssd_inputs(1, 20, 2, 8, 4)
    assert ssd_native.forward(x, dt, A, Bm, Cm, None) is not None
    leaf = x.clone().requires_grad_(True)
    assert ssd_native.forward(leaf, dt, A, Bm, Cm, None) is None
    with torch.no_grad():
        assert ssd_native.forward(leaf, dt, A, Bm, Cm, None) is not None
    monkeypatch.setenv("ARCHPROBE_NATIVE", "0")
    assert ssd_native.forward(x, dt, A, Bm, Cm, None) is None


@pytest.mark.parametrize("bad", ["dt", "A", "B", "C", "state"])
def test_ssd_shapes_the_kernel_cannot_take_never_reach_it(bad):
    x, dt, A, Bm, Cm = ssd_inputs(2, 10, 3, 8, 4)
    state = torch.zeros(2, 3, 8, 4)
    args = {"dt": dt, "A": A, "B": Bm, "C": Cm, "state": state}
    args[bad] = {"dt": dt[:, :9], "A": A[:2], "B": Bm[..., :3], "C": Cm[:, :, :2], "state": state[:, :, :7]}[bad]
    assert ssd_native.forward(x, args["dt"], args["A"], args["B"], args["C"], args["state"]) is None


def test_ssd_inputs_that_broadcast_run_in_both_forms(monkeypatch):
    """B and C shared across the batch ([1, T, H, N] for B = 2), as the chunked form always took them."""
    x, dt, A, Bm, Cm = ssd_inputs(2, 30, 2, 8, 4, seed=9)
    B1, C1 = Bm[:1], Cm[:1]
    ref_y, ref_S = ssd_reference(x, dt, A, B1.expand(2, -1, -1, -1), C1.expand(2, -1, -1, -1))
    y, S = ssd_fused(x, dt, A, B1, C1, output_final_state=True)
    assert_close("recurrent_vs_chunked", ref_y, y, name="broadcast B, C")
    monkeypatch.setenv("ARCHPROBE_NATIVE", "0")
    y, S = ssd_chunked(x, dt, A, B1, C1, output_final_state=True)
    assert_close("recurrent_vs_chunked", ref_y, y, name="broadcast B, C, chunked")


def test_ssd_large_states_within_the_documented_range():
    """The scaled state stays exact for states up to ~1e30 and C down to 1e-30 (documented bounds ~3e35, ~1e-35)."""
    x, dt, A, Bm, Cm = ssd_inputs(1, 200, 2, 16, 8, dt_scale=0.05, seed=10)
    for xs, cs in ((1e14, 1.0), (1.0, 1e-30)):
        y, S = ssd_fused(x * xs, dt, A, Bm * xs, Cm * cs, output_final_state=True)
        ref_y, ref_S = ssd_reference(x * xs, dt, A, Bm * xs, Cm * cs)
        assert_close("recurrent_vs_chunked", ref_y, y, name=f"x, B x{xs}, C x{cs}")
        assert_close("recurrent_vs_chunked", ref_S, S, name=f"x, B x{xs}, C x{cs}, state")


def test_ssd_nan_and_inf_steps_answer_as_the_recurrence():
    """An infinite dt decays the state to 0 at once and its input is inf (NaN downstream, as in the
    recurrence); a NaN dt propagates; neither crashes or reads out of bounds."""
    x, dt, A, Bm, Cm = ssd_inputs(1, 30, 2, 8, 4, seed=6)
    for bad in (float("nan"), float("inf")):
        d = dt.clone()
        d[:, 10, 0] = bad
        y, _ = ssd_fused(x, d, A, Bm, Cm, output_final_state=True)
        ref_y, _ = ssd_recurrent(x, d, A, Bm, Cm)
        assert torch.equal(torch.isfinite(y), torch.isfinite(ref_y)), bad
        assert bool(torch.isfinite(y[:, :10]).all()) and bool(torch.isfinite(y[:, :, 1]).all())


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64", "i686", "i386"),
                    reason="flush-to-zero is set through x86's MXCSR")
def test_ssd_state_never_subnormal():
    """No new input, and a decay that walks the state through float32's subnormal range: exact zeros."""
    x, dt, A, Bm, Cm = ssd_inputs(1, 300, 1, 16, 8, seed=7)
    A = torch.tensor([-1.0])
    dt[:, 100:] = 0.9
    x[:, 100:] = 0.0
    y, S = ssd_fused(x, dt, A, Bm, Cm, output_final_state=True)
    ref_y, _ = ssd_recurrent(x, dt, A, Bm, Cm)
    tiny = torch.finfo(torch.float32).tiny

    def subnormals(t):
        return int(((t != 0) & (t.abs() < tiny)).sum())
    assert subnormals(ref_y) > 0
    assert subnormals(y) == 0 and subnormals(S) == 0


def test_the_build_command_says_where_or_why_not(monkeypatch, capsys):
    """`python -m archprobe.ops.native` (make install runs it) names the library, or why there is none."""
    assert native.main() == 0
    assert "recurrences-" in capsys.readouterr().out
    monkeypatch.setenv("ARCHPROBE_NATIVE", "0")
    assert native.main() == 0
    assert "not built (ARCHPROBE_NATIVE=0)" in capsys.readouterr().out



def test_a_truncated_or_replaced_library_in_the_cache_is_rebuilt_not_loaded(tmp_path):
    """A cached library whose bytes are not what its build recorded (truncated by a full disk, replaced by
    someone else) is rebuilt: loading a truncated one would kill the process (SIGBUS). Run in fresh
    processes, so a failure shows as a dead child instead of a dead test run."""
    import subprocess
    import sys

    env = {**__import__("os").environ, "XDG_CACHE_HOME": str(tmp_path), "ARCHPROBE_CACHE": "",
           "PYTHONPATH": "src"}
    probe = ("from archprobe.ops import native; lib = native.library('recurrences'); "
             "print(lib is not None, native.unavailable_reason('recurrences'))")
    first = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0 and first.stdout.startswith("True"), first.stderr
    (built,) = (tmp_path / "archprobe" / "native").glob("recurrences-*.so")
    data = built.read_bytes()
    for damage in (data[: len(data) // 2], b"\x7fELF" + bytes(200), data[:-1] + bytes([data[-1] ^ 1])):
        built.write_bytes(damage)
        again = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0 and again.stdout.startswith("True"), (again.returncode, again.stderr)
        assert native._cached(built.parent, built.name) is not None


def test_a_cache_directory_others_can_write_is_not_used(tmp_path, monkeypatch):
    """A cache directory writable by group or others, or reached through a link (where another user could
    plant a library or swap the directory), is skipped; a library file writable by others, or not matching
    its recorded hash, is not read."""
    shared = tmp_path / "archprobe" / "native"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("ARCHPROBE_CACHE", raising=False)   # else it owns the cache (cachedir.py)
    assert shared not in native._cache_dirs()
    shared.chmod(0o700)
    assert native._cache_dirs()[0] == shared
    (shared / "x.so").write_bytes(b"library bytes")
    (shared / "x.so.sha256").write_text(native._digest(b"library bytes"))
    (shared / "x.so").chmod(0o600)
    (shared / "x.so.sha256").chmod(0o600)
    assert native._cached(shared, "x.so") == b"library bytes"
    (shared / "x.so").chmod(0o666)
    assert native._cached(shared, "x.so") is None
    (shared / "x.so").chmod(0o600)
    (shared / "x.so").write_bytes(b"other bytes")
    assert native._cached(shared, "x.so") is None
    link = tmp_path / "linked"
    link.symlink_to(shared)
    assert native._cached(link, "x.so") is None and native._open_dir(link) is None


def test_directories_it_creates_are_private_whatever_the_umask(tmp_path, monkeypatch):
    import os
    old = os.umask(0)
    try:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "fresh" / "cache"))
        monkeypatch.delenv("ARCHPROBE_CACHE", raising=False)   # else it owns the cache (cachedir.py)
        assert native._cache_dirs()[0] == tmp_path / "fresh" / "cache" / "archprobe" / "native"
        for d in (tmp_path / "fresh", tmp_path / "fresh" / "cache", tmp_path / "fresh" / "cache" / "archprobe"):
            assert d.stat().st_mode & 0o077 == 0, d
    finally:
        os.umask(old)


def test_a_cache_that_cannot_be_written_still_gives_the_kernels(tmp_path, monkeypatch):
    """A cache that refuses the write (a full disk, a read-only home): the library is built in the
    process's own directory and loaded from there; nothing raises out of the op."""
    import errno

    def full(*a):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(native, "_write_private", full)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("ARCHPROBE_CACHE", raising=False)   # else it owns the cache (cachedir.py)
    native._load.cache_clear()
    try:
        assert native.library("recurrences") is not None, native.unavailable_reason("recurrences")
        assert not list((tmp_path / "archprobe" / "native").glob("*.so"))
    finally:
        native._load.cache_clear()


def test_a_compiler_that_hangs_is_stopped_with_its_children(tmp_path, monkeypatch):
    """A compiler that never returns costs COMPILE_SECONDS once (no second flag set), and the processes
    it started are killed with it."""
    import time

    pidfile = tmp_path / "child.pid"
    fake = tmp_path / "hangcc"
    fake.write_text("#!/bin/sh\n"
                    "if [ \"$1\" = --version ]; then echo 'hangcc 1.0'; exit 0; fi\n"
                    f"sleep 600 & echo $! > {pidfile}\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ARCHPROBE_CACHE", raising=False)   # else it owns the cache (cachedir.py)
    monkeypatch.setattr(native, "COMPILE_SECONDS", 2)
    native._load.cache_clear()
    try:
        start = time.monotonic()
        with pytest.warns(RuntimeWarning, match="did not finish"):
            assert native.library("recurrences") is None
        assert time.monotonic() - start < 30
        pid = int(pidfile.read_text())
        def running(pid):   # a killed child may linger as a zombie until init reaps it: that is not running
            try:
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
            except OSError:
                return False
        for _ in range(50):
            if not running(pid):
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the compiler's child {pid} is still running")
    finally:
        native._load.cache_clear()


def test_ssd_slow_decays_over_long_sequences_do_not_drift():
    """A decay within 1e-5 of 1 for 20k tokens: the scale's log summed in float64 keeps the kernel at the
    chunked form's accuracy (on this input: 2.8e-6 in the final state, the chunked form 3.3e-6; with the
    log kept in float32, 1.4e-5)."""
    x, dt, A, Bm, Cm = ssd_inputs(1, 20000, 1, 8, 4, seed=12)
    dt = torch.ones_like(dt)
    A = torch.tensor([-1e-5])
    y, S = ssd_fused(x, dt, A, Bm, Cm, output_final_state=True)
    ref_y, ref_S = ssd_reference(x, dt, A, Bm, Cm)
    assert_close("recurrent_vs_chunked", ref_y, y, name="slow decay, output")
    assert float((S.double() - ref_S).norm() / ref_S.norm()) < 5e-6


def test_ssd_takes_exactly_the_shapes_the_torch_form_takes():
    """dt as [B, T, 1], A as [1] or a state without its batch: the torch form refuses them, so the kernel
    must too (a call must not work or fail by whether a compiler is present)."""
    x, dt, A, Bm, Cm = ssd_inputs(1, 10, 2, 8, 4)
    assert ssd_native.forward(x, dt[..., :1], A, Bm, Cm, None) is None
    assert ssd_native.forward(x, dt, A[:1], Bm, Cm, None) is None
    assert ssd_native.forward(x, dt, A, Bm, Cm, torch.zeros(2, 8, 4)) is None
