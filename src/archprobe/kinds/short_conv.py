"""LFM2's gated short convolution: only (kernel - 1) past inputs per channel are kept."""

from __future__ import annotations

from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"in_proj": "in_proj", "conv1d": "conv1d", "out_proj": "out_proj"}


def cache(m, c: CacheContext):
    return "short_conv", (m.conv_kernel - 1) * m.conv_dim * c.act_b


def fields(card, i, has, out):
    from archprobe.validate.plan import Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    biases = {has(f"mixer.{r}.bias") for r in ("in_proj", "conv1d", "out_proj")}
    if len(biases) > 1:
        raise Unsupported(f"{p}.mixer: biases on some of in_proj / conv1d / out_proj only")
    out.update(short_conv_kernel_size=need_field(m.conv_kernel, f"{p}.mixer.conv_kernel"), short_conv_bias=biases.pop())


def build(cfg, kind):
    from archprobe.nn.short_conv import ShortConv

    return ShortConv(cfg.hidden_size, cfg.short_conv_kernel_size, cfg.short_conv_bias)


KINDS = [Kind("short_conv", "mixer", "ShortConv", "#1abc9c", "conv.short",
              lambda m, H: {"conv_dim": m.conv_dim, "conv_kernel": m.conv_kernel},
              required=("conv_dim", "conv_kernel"), recurrent=True, cache=cache,
              nn_kind="short_conv", fields=fields, build=build, roles=ROLES)]
