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
    from archprobe.validate.plan import Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    biases = {has(f"mixer.{r}.bias") for r in ("in_proj", "conv1d", "out_proj")}
    if len(biases) > 1:
        raise Unsupported(f"{p}.mixer: biases on some of in_proj / conv1d / out_proj only")
    out.update(conv_kernel=need_field(m.conv_kernel, f"{p}.mixer.conv_kernel"), bias=biases.pop())


def build(a: Args, kind, model):
    from archprobe.nn.short_conv import ShortConv

    return ShortConv(model.hidden_size, a.conv_kernel, a.bias)


def detect(mods, H, cfg):
    """One depthwise conv on the hidden width ([H, 1, K]) gated by a [3H, H] input (LFM2). Tried last of the
    conv kinds: per-head vectors beside the conv make it Mamba-2 or Gated DeltaNet."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import bind_roles, one_conv_layer, one_conv_writer

    layer = one_conv_layer(mods)
    if layer is None or layer.convs[0].shape[0] != H:
        return None
    pool, conv, mats = layer.pool, layer.convs[0], layer.mats
    C, K = conv.shape[0], conv.shape[-1]
    reader = next((m for m in mats if m.shape == (3 * H, H)), None)
    if reader is None:
        return None
    writer = one_conv_writer(mats, H)
    b = Bound(Mixer("short_conv", conv_dim=C, conv_kernel=K,
                    evidence=[ev(conv, f"depthwise conv [{C}, 1, {K}] on the hidden width, gated by a [3H, H] "
                                       "input: a short-convolution block")]))
    bind_roles(b, pool, (("in_proj", reader), ("conv1d", conv), ("out_proj", writer)))
    b.part.confidence = 0.85
    b.leftover = pool
    return b


KINDS = [Kind("short_conv", "mixer", "ShortConv", "#1abc9c", "conv.short",
              lambda m, H: {"conv_dim": m.conv_dim, "conv_kernel": m.conv_kernel},
              required=("conv_dim", "conv_kernel"), recurrent=True, cache=cache,
              nn_kind="short_conv", args=Args, fields=fields, build=build, roles=ROLES,
              detect=detect, detect_order=70)]
