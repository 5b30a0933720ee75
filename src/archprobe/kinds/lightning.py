"""MiniMax-01's lightning attention: linear attention with a fixed per-head decay, a [heads, hd, hd] state."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.formulas import linear_state
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"lightning_qkv": "qkv_proj", "o": "out_proj", "g": "output_gate", "norm": "norm",
         "slope_rate": "slope_rate"}


def cache(m, c: CacheContext):
    """A [heads, hd, hd] state, no convolution."""
    return "lightning", linear_state(m.num_heads, m.head_dim, m.head_dim, 0, 1, c.state_b, c.act_b)


@dataclass(frozen=True)
class Args:
    """archprobe.nn.lightning.LightningAttention's arguments; toy defaults."""
    num_heads: int = 4
    head_dim: int = 16
    norm_eps: float = 1e-6               # its output norm's eps


def fields(card, i, has, out):
    from archprobe.validate.build import Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    if m.output_gate != "sigmoid_g_proj" or not has("mixer.norm") or not has("mixer.slope_rate"):
        raise Unsupported(f"{p}.mixer: lightning attention without its output gate, norm or slope_rate")
    out.update(num_heads=need_field(m.num_heads, f"{p}.mixer.num_heads"),
               head_dim=need_field(m.head_dim, f"{p}.mixer.head_dim"),
               norm_eps=need_field(m.norm_eps, f"{p}.mixer.norm_eps", "eps of the output RMSNorm"))


def build(a: Args, kind, model):
    from archprobe.nn.lightning import LightningAttention

    return LightningAttention(model.hidden_size, a.num_heads, a.head_dim, a.norm_eps)


KINDS = [Kind("lightning", "mixer", "Lightning", "#2e86c1", "linear_attention.lightning",
              lambda m, H: {"num_heads": m.num_heads, "head_dim": m.head_dim},
              required=("num_heads", "head_dim"), recurrent=True, cache=cache, nn_kind="lightning", args=Args,
              fields=fields, build=build, roles=ROLES)]
