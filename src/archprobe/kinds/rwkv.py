"""RWKV-4 time mixing (transformers' `rwkv`): a per-channel WKV recurrence (decay w, current-token bonus u)
read through a receptance gate, on token-shifted inputs. The card writes it as one head per channel
(num_heads = the attention width A, head_dim 1: RWKV-4's state is per channel, not a [K, V] matrix) and the
token shift as what it is, a causal depthwise convolution of kernel 2 on the hidden width (conv_dim H)."""

from __future__ import annotations

from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"time_decay": "time_decay", "time_first": "time_first", "time_mix_key": "time_mix_key",
         "time_mix_value": "time_mix_value", "time_mix_receptance": "time_mix_receptance", "key": "key",
         "value": "value", "receptance": "receptance", "output": "output"}


def attrs(m, H):
    return {"width": m.num_heads, "conv_dim": m.conv_dim}


def cache(m, c: CacheContext):
    """Numerator, denominator and max exponent per channel (recurrent state) + the last input (token shift).
    Channel mixing's own last input belongs to the FFN."""
    return "rwkv", 3 * m.num_heads * c.state_b + ((m.conv_kernel or 2) - 1) * m.conv_dim * c.act_b


def fields(card, i, has, out):
    from archprobe.validate.build import Unsupported, _need

    m = card.layers[i].mixer
    p = f"layers.{i}"
    width = _need(m.num_heads, f"{p}.mixer.num_heads", "the attention width (one head per channel)")
    if width != card.hidden_size:
        raise Unsupported(f"{p}.mixer: an RWKV attention width {width} other than the hidden size")


def build(cfg, kind):
    from archprobe.nn.rwkv import RwkvTimeMix

    return RwkvTimeMix(cfg.hidden_size)


# recurrent.rwkv: not in spec/contracts.md's vocabulary yet, an id of its own (as attention.moa)
KINDS = [Kind("rwkv", "mixer", "RWKV", "#16a085", "recurrent.rwkv", attrs, cache=cache, nn_kind="rwkv",
              fields=fields, build=build, roles=ROLES)]
