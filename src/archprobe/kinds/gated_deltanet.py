"""Gated DeltaNet (Qwen3-Next, Qwen3.5): a scalar-decay delta rule over grouped key/value heads."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.formulas import linear_state
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"in_proj_qkvz": "in_proj_qkvz", "in_proj_ba": "in_proj_ba", "conv1d": "conv1d",
         "A_log": "A_log", "dt_bias": "dt_bias", "norm": "norm", "out_proj": "out_proj",
         "in_proj_qkv": "in_proj_qkv", "in_proj_z": "in_proj_z", "in_proj_b": "in_proj_b",
         "in_proj_a": "in_proj_a", "g": "in_proj_z", "a": "in_proj_a", "b": "in_proj_b",
         "o_norm": "norm", "o": "out_proj"}


def attrs(m, H):
    return {"num_heads": m.num_heads, "head_dim": m.head_dim, "value_head_dim": m.value_head_dim,
            "conv_dim": m.conv_dim, "conv_kernel": m.conv_kernel}


def cache(m, c: CacheContext):
    return "gated_deltanet", linear_state(m.num_heads, m.head_dim, m.value_head_dim or m.head_dim, m.conv_dim,
                                          m.conv_kernel or 4, c.state_b, c.act_b)


@dataclass(frozen=True)
class Args:
    """archprobe.nn.gated_deltanet.GatedDeltaNet's arguments; toy defaults."""
    num_key_heads: int = 2
    num_value_heads: int = 4
    key_head_dim: int = 16
    value_head_dim: int = 16
    conv_kernel: int = 4
    layout: str = "grouped"              # "split": separate in_proj_qkv / z / b / a (Qwen3.5, OLMo-hybrid)
    beta_scale: float = 1.0              # 2: OLMo-hybrid's allow_neg_eigval
    norm_eps: float | None = None        # the output norm's eps when not the layer norms'
    chunk_size: int | None = None        # chunk of the chunked delta rule; None: the op's choice


def fields(card, i, has, out):
    """num_heads = value heads; conv_dim = 2 Hk dk + Hv dv gives the key heads."""
    from archprobe.validate.build import GDN_SOURCES, Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    hv = need_field(m.num_heads, f"{p}.mixer.num_heads")
    dk = need_field(m.head_dim, f"{p}.mixer.head_dim")
    dv = m.value_head_dim or m.v_head_dim or dk
    conv = need_field(m.conv_dim, f"{p}.mixer.conv_dim")
    hk, rest = divmod(conv - hv * dv, 2 * dk)
    if rest or hk <= 0 or hv % hk:
        raise Unsupported(f"{p}.mixer: conv_dim {conv} does not split into key heads of {dk} and "
                          f"{hv} value heads of {dv}")
    out.update(num_key_heads=hk, num_value_heads=hv, key_head_dim=dk, value_head_dim=dv,
               conv_kernel=need_field(m.conv_kernel, f"{p}.mixer.conv_kernel"),
               layout="grouped" if has("mixer.in_proj_qkvz") else "split",
               beta_scale=m.beta_scale if m.beta_scale is not None else 1.0, norm_eps=m.norm_eps)
    if any(has(f"mixer.{r}.bias") for r in GDN_SOURCES + ("in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b")):
        raise Unsupported(f"{p}.mixer: biases on the Gated DeltaNet projections or convs")


def build(a: Args, kind, model):
    from archprobe.nn.gated_deltanet import GatedDeltaNet

    return GatedDeltaNet(model.hidden_size, a.num_key_heads, a.num_value_heads, a.key_head_dim, a.value_head_dim,
                         a.conv_kernel, a.norm_eps if a.norm_eps is not None else model.norm_eps, a.chunk_size,
                         layout=a.layout, beta_scale=a.beta_scale)


KINDS = [Kind("gated_deltanet", "mixer", "GDN", "#5aa0e8", "linear_attention.gated_deltanet", attrs,
              required=("num_heads", "head_dim", "conv_dim"), recurrent=True, cache=cache,
              nn_kind="gated_deltanet", args=Args, fields=fields, build=build, roles=ROLES)]
