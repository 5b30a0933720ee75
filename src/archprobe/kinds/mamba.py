"""Mamba-1: a selective SSM with a per-channel [C, N] state (Mamba, Falcon-Mamba)."""

from __future__ import annotations

from archprobe.kinds.formulas import mamba2_state
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"in_proj": "in_proj", "conv1d": "conv1d", "x_proj": "x_proj", "dt_proj": "dt_proj", "A_log": "A_log",
         "D": "D", "out_proj": "out_proj", "dt_norm": "dt_norm", "b_norm": "b_norm", "c_norm": "c_norm"}


def cache(m, c: CacheContext):
    """A [C, N] state per sequence + (kernel - 1) conv inputs."""
    return "mamba", mamba2_state(1, m.conv_dim, m.state_size, m.conv_dim, m.conv_kernel or 4, c.state_b, c.act_b)


def fields(card, i, has, out):
    from archprobe.validate.plan import Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    weighted = has("mixer.dt_norm") or has("mixer.b_norm")
    eps = m.ssm_norm_eps
    if weighted:
        eps = need_field(eps, f"{p}.mixer.ssm_norm_eps", "eps of the stored RMS norms on dt, B and C")
    out.update(mamba_inner=need_field(m.conv_dim, f"{p}.mixer.conv_dim"),
               ssm_state_size=need_field(m.state_size, f"{p}.mixer.state_size"),
               mamba_dt_rank=need_field(m.dt_rank, f"{p}.mixer.dt_rank"),
               mamba_conv_kernel=need_field(m.conv_kernel, f"{p}.mixer.conv_kernel"),
               mamba_proj_bias=has("mixer.in_proj.bias"),
               mamba_ssm_norms="weighted" if weighted else ("weightless" if eps is not None else None),
               mamba_ssm_norm_eps=eps if eps is not None else 1e-6)
    if has("mixer.in_proj.bias") != has("mixer.out_proj.bias"):
        raise Unsupported(f"{p}.mixer: a bias on only one of in_proj / out_proj")


def build(cfg, kind):
    from archprobe.nn.mamba import MambaMixer

    return MambaMixer(cfg.hidden_size, cfg.mamba_inner, cfg.ssm_state_size, cfg.mamba_dt_rank,
                      cfg.mamba_conv_kernel, proj_bias=cfg.mamba_proj_bias, ssm_norms=cfg.mamba_ssm_norms,
                      ssm_norm_eps=cfg.mamba_ssm_norm_eps)


KINDS = [Kind("mamba", "mixer", "Mamba", "#76a5c9", "ssm.mamba",
              lambda m, H: {"state_size": m.state_size, "conv_dim": m.conv_dim, "conv_kernel": m.conv_kernel},

              required=("state_size", "conv_dim", "dt_rank"), recurrent=True, cache=cache, nn_kind="mamba",
              fields=fields, build=build, roles=ROLES)]
