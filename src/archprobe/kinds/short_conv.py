"""LFM2's gated short convolution: only (kernel - 1) past inputs per channel are kept."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"in_proj": "in_proj", "conv1d": "conv1d", "out_proj": "out_proj"}


def cache(m, c: CacheContext):
    return "short_conv", (m.conv_kernel - 1) * m.conv_dim * c.act_b


@dataclass(frozen=True)
class Args:
    """archprobe.nn.short_conv.ShortConv's arguments."""
    conv_kernel: int = 4
    bias: bool = False


def fields(card, i, has, out):
    from archprobe.validate.build import Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    biases = {has(f"mixer.{r}.bias") for r in ("in_proj", "conv1d", "out_proj")}
    if len(biases) > 1:
        raise Unsupported(f"{p}.mixer: biases on some of in_proj / conv1d / out_proj only")
    out.update(conv_kernel=need_field(m.conv_kernel, f"{p}.mixer.conv_kernel"), bias=biases.pop())


def build(a: Args, kind, model):
    from archprobe.nn.short_conv import ShortConv

    return ShortConv(model.hidden_size, a.conv_kernel, a.bias)


KINDS = [Kind("short_conv", "mixer", "ShortConv", "#1abc9c", "conv.short",
              lambda m, H: {"conv_dim": m.conv_dim, "conv_kernel": m.conv_kernel},
              required=("conv_dim", "conv_kernel"), recurrent=True, cache=cache,
              nn_kind="short_conv", args=Args, fields=fields, build=build, roles=ROLES)]
