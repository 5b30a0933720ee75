"""A stateful FFN (RWKV channel mixing, kinds/rwkv_channel.py) inside HybridDecoder: where it runs it is
checked against the block computed here by hand from the layer's own modules (pre, sandwich and post
blocks, and depth_weights mixing after the block), with its state carried token by token through the
cache; where it would not run right (parallel and norm_residual blocks, gated and AttnRes residuals) the
model refuses to be built, naming the layer and the field."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from archprobe.nn.decoder import HybridConfig, HybridDecoder  # noqa: E402
from archprobe.testing import assert_close  # noqa: E402


def _config(**over) -> HybridConfig:
    kw = dict(vocab_size=64, hidden_size=32, num_hidden_layers=3, mixer_args={"gqa": dict(num_heads=4, num_kv_heads=2)},
              intermediate_size=48, mixer_types=("gqa",) * 3, ffn_types=("rwkv_channel", "dense", "rwkv_channel"))
    kw.update(over)
    return HybridConfig(**kw)


def _model(cfg: HybridConfig) -> HybridDecoder:
    torch.manual_seed(0)
    model = HybridDecoder(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():     # norms, token-shift mixes and depth weights off their initial values
            if p.dim() <= 1 or p.shape[:2] == (1, 1):
                p.add_(torch.randn_like(p) * 0.3)
    return model


def _by_hand(model: HybridDecoder, ids: torch.Tensor) -> torch.Tensor:
    """The final hidden state written out: per layer, x + post(mixer(pre(x))), then x + post(ffn(pre(x))) with
    the FFN's token shift over the whole sequence; depth_weights then mixes h_0..h_{i+1}."""
    cfg = model.config
    x = model.embed_tokens(ids)
    history = [x]

    def norm(layer, name, t):
        n = getattr(layer, name, None)
        return n(t) if n is not None else t

    for layer in model.layers:
        a, _ = layer.self_attn(norm(layer, "input_layernorm", x))
        x = x + norm(layer, "post_mixer_norm", a)
        h = norm(layer, "post_attention_layernorm", x)
        ffn = layer.ffn
        f = ffn(h)[0] if getattr(ffn, "stateful", False) else ffn(h)
        x = x + norm(layer, "post_ffn_norm", f)
        if cfg.residual == "depth_weights":
            history.append(x)
            x = sum(w * t for w, t in zip(layer.dwa_weights, history, strict=True))
    return model.norm(x)


@pytest.mark.parametrize("over", [{}, {"block": "sandwich"}, {"block": "post"}, {"residual": "depth_weights"},
                                  {"residual": "depth_weights", "block": "sandwich"}],
                         ids=["pre", "sandwich", "post", "depth_weights", "depth_weights-sandwich"])
def test_sequential_blocks_equal_the_block_by_hand_and_decode_token_by_token(over):
    model = _model(_config(**over))
    ids = torch.randint(0, 64, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got, _ = model.hidden_states(model.embed_tokens(ids))
        want = _by_hand(model, ids)
        assert_close("same_algorithm", want, got, name=f"stateful FFN, {over or 'pre'}")
        full = model(ids)
        caches, steps = None, []
        for t in range(ids.shape[1]):       # the FFN's last input travels in the layer's cache
            logits, caches = model(ids[:, t:t + 1], caches=caches, use_cache=True)
            steps.append(logits)
    assert_close("same_algorithm", full, torch.cat(steps, 1), name=f"stateful FFN decode, {over or 'pre'}")


@pytest.mark.parametrize("over,field", [
    ({"block": "parallel"}, "block = 'parallel'"),
    ({"block": "parallel_shared"}, "block = 'parallel_shared'"),
    ({"block": "norm_residual"}, "block = 'norm_residual'"),
    ({"residual": "gated"}, "residual = 'gated'"),
    ({"residual": "attnres_full"}, "residual = 'attnres_full'"),
    ({"residual": "attnres_block", "attn_res_block_size": 2}, "residual = 'attnres_block'"),
])
def test_other_blocks_and_residuals_refuse_at_construction(over, field):
    """Refused when the layer is built, for the whole model or, for a block, one layer's override."""
    for kw in (over, {"layer_overrides": {1: over}} if "block" in over else over):
        with pytest.raises(ValueError) as err:
            HybridDecoder(_config(**kw, ffn_types=("dense", "rwkv_channel", "dense")))
        message = str(err.value)
        assert message.startswith("layer 1: ffn_types[1] = 'rwkv_channel' keeps a state") and field in message
    HybridDecoder(_config(**over, ffn_types=("dense",) * 3))     # the same block with stateless FFNs builds


def test_a_stateful_ffn_beside_another_layers_parallel_block_builds():
    """Only the stateful FFN's own layer is held to the rule: a parallel block on another layer is fine."""
    HybridDecoder(_config(ffn_types=("rwkv_channel", "dense", "rwkv_channel"),
                          layer_overrides={1: {"block": "parallel"}}))
