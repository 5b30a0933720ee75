"""Our ops against flash-linear-attention's pure-torch references (`fla/ops/<op>/naive.py` from the
fla-core package that `make install` adds as a test peer): KDA, the gated delta rule (Gated DeltaNet:
our KDA with the head's decay on every key channel), simple GLA (Mamba-2's SSD: B the key, C the
query, dt x the value, dt A the decay) and AttnRes.

The `fla.ops` package imports its Triton kernels before anything else, and Triton does not import on
this CPU machine, so each reference is loaded from its own file; it needs only torch and einops.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from archprobe.ops import attn_res_mix, kda_chunked, kda_recurrent, ssd_chunked, ssd_recurrent
from archprobe.testing import assert_close


def fla_reference(op: str):
    spec = importlib.util.find_spec("fla")   # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("flash-linear-attention (fla-core) is not installed; `make install` adds it")
    path = Path(next(iter(spec.submodule_search_locations))) / "ops" / op / "naive.py"
    if not path.is_file():
        pytest.skip(f"this fla-core has no {path.name} for {op}")
    module_spec = importlib.util.spec_from_file_location(f"fla_reference_{op}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def assert_matches(refs: dict, out, state, name: str) -> None:
    """Our (output, final state) against every FLA reference's."""
    for ref_name, (o_ref, s_ref) in refs.items():
        assert_close("cross_implementation", o_ref, out, name=f"{name} vs fla {ref_name}, output")
        assert_close("cross_implementation", s_ref, state, name=f"{name} vs fla {ref_name}, state")


def kda_inputs(T, H=2, K=16, V=12, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(1, T, H, K, generator=gen), dim=-1)
    k = F.normalize(torch.randn(1, T, H, K, generator=gen), dim=-1)
    v = torch.randn(1, T, H, V, generator=gen)
    g = -5 * torch.sigmoid(torch.randn(1, T, H, K, generator=gen))   # K3's bounded gate: strong decay
    beta = torch.sigmoid(torch.randn(1, T, H, generator=gen))
    state = torch.randn(1, H, K, V, generator=gen)
    return q, k, v, g, beta, state


@pytest.mark.parametrize("T", [1, 50, 128])
def test_kda_matches_fla_naive_recurrent_and_chunk(T):
    fla = fla_reference("kda")
    q, k, v, g, beta, state = kda_inputs(T)
    refs = {"naive_recurrent_kda": fla.naive_recurrent_kda(q, k, v, g, beta, initial_state=state,
                                                           output_final_state=True)}
    if T % 64 == 0:   # FLA's naive chunk form takes whole chunks of 64 only
        refs["naive_chunk_kda"] = fla.naive_chunk_kda(q, k, v, g, beta, initial_state=state, output_final_state=True)
    for name, fn in (("kda_recurrent", kda_recurrent),
                     ("kda_chunked", lambda *a, **kw: kda_chunked(*a, chunk_size=32, **kw))):
        assert_matches(refs, *fn(q, k, v, g, beta, initial_state=state, output_final_state=True), name)


@pytest.mark.parametrize("T", [1, 50, 128])
def test_gated_delta_rule_matches_fla_naive(T):
    fla = fla_reference("gated_delta_rule")
    q, k, v, _, beta, state = kda_inputs(T)
    g = -3 * torch.sigmoid(torch.randn(1, T, 2, generator=torch.Generator().manual_seed(1)))   # one per head
    refs = {name: getattr(fla, name)(q, k, v, g=g, beta=beta, initial_state=state, output_final_state=True)
            for name in ("naive_recurrent_gated_delta_rule", "naive_chunk_gated_delta_rule")}   # (their orders differ)
    assert_matches(refs, *kda_chunked(q, k, v, g.unsqueeze(-1).expand_as(q), beta, initial_state=state,
                                      output_final_state=True, chunk_size=32), "kda_chunked")


@pytest.mark.parametrize("T", [1, 50, 128])
def test_ssd_matches_fla_simple_gla(T):
    fla = fla_reference("simple_gla")
    gen = torch.Generator().manual_seed(2)
    H, P, N = 3, 8, 6
    x, Bm, Cm = torch.randn(1, T, H, P, generator=gen), torch.randn(1, T, H, N, generator=gen), \
        torch.randn(1, T, H, N, generator=gen)
    dt = F.softplus(torch.randn(1, T, H, generator=gen))
    A = -torch.linspace(0.5, 4.0, H)
    state = torch.randn(1, H, P, N, generator=gen)
    o_ref, s_ref = fla.naive_recurrent_simple_gla(Cm, Bm, dt[..., None] * x, dt * A, scale=1.0,
                                                  initial_state=state.mT, output_final_state=True)
    for name, fn in (("ssd_recurrent", ssd_recurrent), ("ssd_chunked", ssd_chunked)):
        y, S = fn(x, dt, A, Bm, Cm, initial_state=state, output_final_state=True)
        assert_close("cross_implementation", o_ref, y, name=f"{name} vs fla naive_recurrent_simple_gla, output")
        assert_close("cross_implementation", s_ref, S.mT, name=f"{name} vs fla naive_recurrent_simple_gla, state")


def test_attnres_matches_fla_naive():
    fla = fla_reference("attnres")
    gen = torch.Generator().manual_seed(0)
    sources = torch.randn(5, 2, 7, 32, generator=gen) * torch.linspace(0.5, 3, 5)[:, None, None, None]
    query = torch.randn(32, generator=gen)
    ref = fla.naive_attnres(query, list(sources), torch.ones(32), rms_eps=1e-5)
    assert_close("cross_implementation", ref, attn_res_mix(sources, query, eps=1e-5))
