"""Mamba-2: a scalar-decay selective SSM per head, an [heads, head_dim, state_size] state per sequence."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.formulas import mamba2_state
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"in_proj": "in_proj", "out_proj": "out_proj", "conv1d": "conv1d", "A_log": "A_log", "D": "D",
         "dt_bias": "dt_bias", "norm": "norm"}


def attrs(m, H):
    return {"num_heads": m.num_heads, "head_dim": m.head_dim, "state_size": m.state_size, "n_groups": m.n_groups,
            "conv_dim": m.conv_dim, "conv_kernel": m.conv_kernel}


def cache(m, c: CacheContext):
    return "mamba2", mamba2_state(m.num_heads, m.head_dim, m.state_size, m.conv_dim, m.conv_kernel or 4,
                                  c.state_b, c.act_b)


@dataclass(frozen=True)
class Args:
    """archprobe.nn.mamba2.Mamba2Mixer's arguments; toy defaults."""
    num_heads: int = 4
    head_dim: int = 16
    state_size: int = 16
    n_groups: int = 1
    conv_kernel: int = 4
    dt_min: float = 0.0
    norm: bool = True                    # False: no gated norm before out_proj (Falcon-H1)


def fields(card, i, has, out):
    from archprobe.validate.build import MUP_FOLDS, Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    if (m.layout or {}).get("norm_before_gate"):
        raise Unsupported(f"{p}.mixer.layout norm_before_gate: a Mamba-2 norm before its gate")
    unknown = sorted(set((m.layout or {}).get("mup_multipliers") or {}) - set(MUP_FOLDS))
    if unknown:
        raise Unsupported(f"{p}.mixer.layout.mup_multipliers {unknown}: no rule folds them")
    out["norm"] = has("mixer.norm")
    out.update(num_heads=need_field(m.num_heads, f"{p}.mixer.num_heads"),
               head_dim=need_field(m.head_dim, f"{p}.mixer.head_dim"),
               state_size=need_field(m.state_size, f"{p}.mixer.state_size"),
               n_groups=need_field(m.n_groups, f"{p}.mixer.n_groups"),
               conv_kernel=need_field(m.conv_kernel, f"{p}.mixer.conv_kernel"))


def build(a: Args, kind, model):
    from archprobe.nn.mamba2 import Mamba2Mixer

    return Mamba2Mixer(model.hidden_size, a.num_heads, a.head_dim, a.state_size, a.n_groups, a.conv_kernel,
                       dt_min=a.dt_min, norm_eps=model.norm_eps, norm=a.norm)


KINDS = [Kind("mamba2", "mixer", "Mamba2", "#7fb3d5", "ssm.mamba2", attrs,
              required=("num_heads", "head_dim", "state_size", "conv_dim"), recurrent=True, cache=cache,
              nn_kind="mamba2", args=Args,
              fields=fields, build=build, roles=ROLES)]
