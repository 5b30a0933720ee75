"""Mamba-2: a scalar-decay selective SSM per head, an [heads, head_dim, state_size] state per sequence."""

from __future__ import annotations

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


def fields(card, i, has, out):
    from archprobe.validate.layouts import MUP_FOLDS
    from archprobe.validate.plan import Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    if (m.layout or {}).get("norm_before_gate"):
        raise Unsupported(f"{p}.mixer.layout norm_before_gate: a Mamba-2 norm before its gate")
    unknown = sorted(set((m.layout or {}).get("mup_multipliers") or {}) - set(MUP_FOLDS))
    if unknown:
        raise Unsupported(f"{p}.mixer.layout.mup_multipliers {unknown}: no rule folds them")
    out["mamba_norm"] = has("mixer.norm")
    out.update(mamba_num_heads=need_field(m.num_heads, f"{p}.mixer.num_heads"),
               mamba_head_dim=need_field(m.head_dim, f"{p}.mixer.head_dim"),
               ssm_state_size=need_field(m.state_size, f"{p}.mixer.state_size"),
               mamba_n_groups=need_field(m.n_groups, f"{p}.mixer.n_groups"),
               mamba_conv_kernel=need_field(m.conv_kernel, f"{p}.mixer.conv_kernel"))


def build(cfg, kind):
    from archprobe.nn.mamba2 import Mamba2Mixer

    return Mamba2Mixer(cfg.hidden_size, cfg.mamba_num_heads, cfg.mamba_head_dim, cfg.ssm_state_size,
                       cfg.mamba_n_groups, cfg.mamba_conv_kernel, dt_min=cfg.time_step_min,
                       norm_eps=cfg.rms_norm_eps, norm=cfg.mamba_norm)


KINDS = [Kind("mamba2", "mixer", "Mamba2", "#7fb3d5", "ssm.mamba2", attrs,
              required=("num_heads", "head_dim", "state_size", "conv_dim"), recurrent=True, cache=cache,
              nn_kind="mamba2",
              fields=fields, build=build, roles=ROLES)]
