"""RWKV-4 time mixing (transformers' `rwkv`): a per-channel WKV recurrence (decay w, current-token bonus u)
read through a receptance gate, on token-shifted inputs. The card writes it as one head per channel
(num_heads = the attention width A, head_dim 1: RWKV-4's state is per channel, not a [K, V] matrix) and the
token shift as what it is, a causal depthwise convolution of kernel 2 on the hidden width (conv_dim H)."""

from __future__ import annotations

from dataclasses import dataclass

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


def detect(mods, H, cfg):
    """Three token-shift mixes [1, 1, H] and two per-channel vectors [A] (decay, bonus) beside three [A, H]
    readers and an [H, A] writer. Names break ties only between same-shaped tensors (key / value /
    receptance / output, decay / bonus)."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.names import rank

    mixes = [m for m in mods if len(m.shape) == 3 and m.shape == (1, 1, H)]
    vecs = [m for m in mods if len(m.shape) == 1]
    if len(mixes) != 3 or len(vecs) != 2 or vecs[0].shape != vecs[1].shape:
        return None
    A = vecs[0].shape[0]
    mats = [m for m in mods if len(m.shape) == 2 and m.shape in ((A, H), (H, A))]
    if len(mats) != 4 or len(mats) + 5 != len(mods):
        return None

    writers = [m for m in mats if m.shape == (H, A)]
    if A != H:   # shapes alone tell the writer
        (output,), readers = writers, [m for m in mats if m.shape == (A, H)]
    else:
        output = rank(mats, "rwkv_output")[0]
        readers = [m for m in mats if m is not output]
    key, value, receptance = rank(readers, "k", "v", "rwkv_receptance")
    decay, bonus = rank(vecs, "rwkv_decay", "rwkv_bonus")
    mk, mv, mr = rank(mixes, "rwkv_mix_key", "rwkv_mix_value", "rwkv_mix_receptance")
    b = Bound(Mixer("rwkv", num_heads=A, head_dim=1, conv_dim=H, conv_kernel=2))
    b.part.evidence = [ev(decay, f"per-channel decay and bonus vectors [{A}]: an RWKV-4 WKV recurrence"),
                       ev(mk, f"three token-shift mixes [1, 1, {H}]: each input mixed with the previous token's")]
    b.part.confidence = 0.85
    b.roles.update({"time_decay": decay, "time_first": bonus, "time_mix_key": mk, "time_mix_value": mv,
                    "time_mix_receptance": mr, "key": key, "value": value, "receptance": receptance,
                    "output": output})
    return b


@dataclass(frozen=True)
class Args:
    """archprobe.nn.rwkv.RwkvTimeMix takes the hidden size only (its attention width is H, fields checks)."""


def fields(card, i, has, out):
    from archprobe.validate.plan import Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    width = need_field(m.num_heads, f"{p}.mixer.num_heads", "the attention width (one head per channel)")
    if width != card.hidden_size:
        raise Unsupported(f"{p}.mixer: an RWKV attention width {width} other than the hidden size")


def build(a: Args, kind, model):
    from archprobe.nn.rwkv import RwkvTimeMix

    return RwkvTimeMix(model.hidden_size)


# recurrent.rwkv: not in spec/contracts.md's vocabulary yet, an id of its own (as attention.moa)
KINDS = [Kind("rwkv", "mixer", "RWKV", "#16a085", "recurrent.rwkv", attrs, required=("num_heads", "conv_dim"),
              recurrent=True, detect=detect, detect_order=10, cache=cache, nn_kind="rwkv", args=Args,
              fields=fields, build=build, roles=ROLES,
              bare_roles=("time_decay", "time_first", "time_mix_key", "time_mix_value", "time_mix_receptance"))]
