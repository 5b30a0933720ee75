"""archprobe.nn.rwkv against transformers' RwkvModel (its CPU path: the WKV loop in float32), built from a
tiny config with seeded random weights, saved with save_pretrained and loaded into ours by checkpoint name;
and our incremental decoding (a prefill, then one token at a time) against our own full forward."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from safetensors.torch import load_file  # noqa: E402

from archprobe.nn.loading import load_strict  # noqa: E402
from archprobe.nn.rwkv import RwkvModel, wkv  # noqa: E402
from archprobe.testing import assert_close  # noqa: E402
from tests.support.tiny_models import build  # noqa: E402

CONFIG = dict(vocab_size=96, hidden_size=32, num_hidden_layers=3, intermediate_size=80, context_length=64,
              rescale_every=0)   # rescale_every: transformers halves weights at eval for fp16; off, as stored


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    from transformers import RwkvConfig
    from transformers import RwkvModel as TheirModel

    def noise(model):          # seeded noise on top of the family's init: decays, bonuses and mixes all differ
        gen = torch.Generator().manual_seed(1)
        for t in model.parameters():
            t.add_(0.1 * torch.randn(t.shape, generator=gen) * (t.shape[-1] ** -0.5 if t.dim() > 1 else 1))

    folder = tmp_path_factory.mktemp("rwkv")
    theirs = build(RwkvConfig(**CONFIG), folder, adjust=noise, model_class=TheirModel)
    ours = RwkvModel(CONFIG["vocab_size"], CONFIG["hidden_size"], CONFIG["num_hidden_layers"],
                     CONFIG["intermediate_size"], eps=RwkvConfig(**CONFIG).layer_norm_epsilon, head=False)
    load_strict(ours, load_file(str(folder / "model.safetensors")), what="RwkvModel")
    return theirs, ours.eval()


def test_full_forward_matches_transformers(pair):
    theirs, ours = pair
    ids = torch.randint(0, CONFIG["vocab_size"], (2, 11), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = theirs(ids).last_hidden_state
        got, _ = ours(ids)
    assert ref.abs().mean() > 0.1
    assert_close("cross_implementation", ref, got, name="rwkv hidden states")


def test_states_after_a_prefill_match_transformers(pair):
    """transformers keeps per layer: channel mixing's last input, time mixing's last input, then the WKV
    numerator, denominator and max exponent ([B, H, layers] each); ours keeps the same five per block."""
    theirs, ours = pair
    ids = torch.randint(0, CONFIG["vocab_size"], (2, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        state = theirs(ids, use_cache=True).state
        _, caches = ours(ids, use_cache=True)
    for i, ((last_x, num, den, top), ffn_last) in enumerate(caches):
        for ref, got, what in ((state[0], ffn_last, "channel-mix input"), (state[1], last_x, "time-mix input"),
                               (state[2], num, "numerator"), (state[3], den, "denominator"),
                               (state[4], top, "max exponent")):
            assert_close("cross_implementation", ref[:, :, i], got, name=f"layer {i} {what}")


def test_token_by_token_equals_full_forward(pair):
    _, ours = pair
    ids = torch.randint(0, CONFIG["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full, _ = ours(ids)
        out, caches = ours(ids[:, :5], use_cache=True)
        steps = [out]
        for t in range(5, 12):
            out, caches = ours(ids[:, t:t + 1], caches=caches)
            steps.append(out)
    assert_close("same_algorithm", full, torch.cat(steps, 1), name="rwkv decode")


def test_wkv_is_the_weighted_average_it_says():
    """The stable recurrence against the formula computed directly in float64 (no rescaling)."""
    gen = torch.Generator().manual_seed(5)
    B, T, A = 2, 9, 6
    decay, bonus = torch.randn(A, generator=gen), torch.randn(A, generator=gen)
    k, v = 3 * torch.randn(B, T, A, generator=gen), torch.randn(B, T, A, generator=gen)
    got, _ = wkv(decay, bonus, k, v)
    w, u, kd, vd = decay.double().exp(), bonus.double(), k.double(), v.double()
    ref = torch.empty(B, T, A, dtype=torch.float64)
    for t in range(T):
        past = torch.stack([-(t - 1 - i) * w + kd[:, i] for i in range(t)], 1) if t else kd.new_zeros(B, 0, A)
        weights = torch.cat([past, (u + kd[:, t])[:, None]], 1).exp()
        values = torch.cat([vd[:, :t], vd[:, t:t + 1]], 1)
        ref[:, t] = (weights * values).sum(1) / weights.sum(1)
    assert_close("cross_implementation", ref.float(), got, name="wkv")
