"""RWKV-4 channel mixing (transformers' `rwkv` `feed_forward`): the FFN half of an RWKV block. A squared-ReLU
MLP H -> F -> H on a token-shifted input, gated by a receptance sigmoid(receptance(x_r)) [H, H]. Its state
per sequence is the last input [H], kept in the activation dtype."""

from __future__ import annotations

from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"time_mix_key": "time_mix_key", "time_mix_receptance": "time_mix_receptance", "key": "key",
         "value": "value", "receptance": "receptance"}


def attrs(f, H):
    return {"width": f.width}


def cache(f, c: CacheContext):
    """The token shift's last input: one hidden vector per sequence."""
    return "rwkv_channel", (c.hidden_size or 0) * c.act_b


def detect(mods, H, cfg):
    """Two token-shift mixes [1, 1, H] beside a reader [F, H], a writer [H, F] and a square gate [H, H]; names
    break the tie only when F == H."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Ffn
    from archprobe.structure.names import rank, says

    mixes = [m for m in mods if m.shape == (1, 1, H)]
    mats = [m for m in mods if len(m.shape) == 2]
    if len(mixes) != 2 or len(mats) != 3 or len(mods) != 5:
        return None
    square = [m for m in mats if m.shape == (H, H)]
    receptance = rank(square, "rwkv_receptance")[0] if square else None
    rest = [m for m in mats if m is not receptance]
    if receptance is None or len(rest) != 2:
        return None
    a, b = rest
    if a.shape != (b.shape[1], b.shape[0]) or H not in a.shape:
        return None
    key = a if a.shape[1] == H and (a.shape != b.shape or says(a.path, "k")) else b
    value = b if key is a else a
    if key.shape[1] != H or value.shape[0] != H:
        return None
    F = key.shape[0]
    mk, mr = rank(mixes, "rwkv_mix_key")
    f = Ffn("rwkv_channel", activation="relu2", gated=False, bias=False, width=F)
    f.evidence = [ev(mk, f"two token-shift mixes [1, 1, {H}] and a receptance gate [{H}, {H}]: RWKV-4 "
                         f"channel mixing {H} -> {F} -> {H}")]
    f.confidence = 0.85
    return Bound(f, {"time_mix_key": mk, "time_mix_receptance": mr, "key": key, "value": value,
                     "receptance": receptance})


def build(cfg, kind):
    from archprobe.nn.rwkv import RwkvChannelMix

    return RwkvChannelMix(cfg.hidden_size, cfg.intermediate_size)


# recurrent.rwkv_channel: an id of its own beside recurrent.rwkv (not in spec/contracts.md yet)
KINDS = [Kind("rwkv_channel", "ffn", "RWKV-CM", "#1abc9c", "recurrent.rwkv_channel", attrs, cache=cache,
              required=("width",), recurrent=True, detect=detect, build=build, roles=ROLES,
              bare_roles=("time_mix_key", "time_mix_receptance"))]
