"""Mamba-1: a selective SSM with a per-channel [C, N] state (Mamba, Falcon-Mamba)."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.formulas import mamba2_state
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"in_proj": "in_proj", "conv1d": "conv1d", "x_proj": "x_proj", "dt_proj": "dt_proj", "A_log": "A_log",
         "D": "D", "out_proj": "out_proj", "dt_norm": "dt_norm", "b_norm": "b_norm", "c_norm": "c_norm"}
# roles stored as a bare Parameter (no `.weight` leaf)
BARE_ROLES = ("A_log", "D", "dt_norm", "b_norm", "c_norm")


def cache(m, c: CacheContext):
    """A [C, N] state per sequence + (kernel - 1) conv inputs."""
    return "mamba", mamba2_state(1, m.conv_dim, m.state_size, m.conv_dim, m.conv_kernel or 4, c.state_b, c.act_b)


@dataclass(frozen=True)
class Args:
    """archprobe.nn.mamba.MambaMixer's arguments; toy defaults."""
    inner: int = 128
    state_size: int = 16
    dt_rank: int = 4
    conv_kernel: int = 4
    proj_bias: bool = False
    ssm_norms: str | None = None         # RMS norms on dt, B, C: "weighted" (Jamba) / "weightless" (FalconMamba)
    ssm_norm_eps: float = 1e-6


def fields(card, i, has, out):
    from archprobe.validate.plan import Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    weighted = has("mixer.dt_norm") or has("mixer.b_norm")
    eps = m.ssm_norm_eps
    if weighted:
        eps = need_field(eps, f"{p}.mixer.ssm_norm_eps", "eps of the stored RMS norms on dt, B and C")
    out.update(inner=need_field(m.conv_dim, f"{p}.mixer.conv_dim"),
               state_size=need_field(m.state_size, f"{p}.mixer.state_size"),
               dt_rank=need_field(m.dt_rank, f"{p}.mixer.dt_rank"),
               conv_kernel=need_field(m.conv_kernel, f"{p}.mixer.conv_kernel"),
               proj_bias=has("mixer.in_proj.bias"),
               ssm_norms="weighted" if weighted else ("weightless" if eps is not None else None),
               ssm_norm_eps=eps if eps is not None else 1e-6)
    if has("mixer.in_proj.bias") != has("mixer.out_proj.bias"):
        raise Unsupported(f"{p}.mixer: a bias on only one of in_proj / out_proj")


def build(a: Args, kind, model):
    from archprobe.nn.mamba import MambaMixer

    return MambaMixer(model.hidden_size, a.inner, a.state_size, a.dt_rank, a.conv_kernel, proj_bias=a.proj_bias,
                      ssm_norms=a.ssm_norms, ssm_norm_eps=a.ssm_norm_eps)


def detect(mods, H, cfg):
    """Mamba (v1, Jamba): A_log [C, N] over the conv's width C beside D [C], x_proj [dt_rank + 2N, C] and
    dt_proj [C, dt_rank] (+ bias); Jamba's dt / B / C norms. Tried after RG-LRU (whose block gates settle it)."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import bind_roles, one_conv_layer, one_conv_writer, vec_len
    from archprobe.structure.names import rank

    layer = one_conv_layer(mods)
    if layer is None:
        return None
    pool, conv, vecs, mats = layer.pool, layer.convs[0], layer.vecs, layer.mats
    C = conv.shape[0]
    writer = one_conv_writer(mats, H)
    a_grid = next((m for m in mats if m.shape[0] == C and m.shape[1] <= 256 and m is not writer
                   and not any(r.shape == (m.shape[1], C) for r in mats)), None)
    if a_grid is None or not any(vec_len(v) == C for v in vecs):
        return None
    C, N = a_grid.shape
    d = next(v for v in vecs if vec_len(v) == C)
    x_proj = next((m for m in mats if m.shape[1] == C and m.shape[0] > 2 * N and m is not writer), None)
    r = x_proj.shape[0] - 2 * N if x_proj is not None else None
    dt_proj = next((m for m in mats if m.shape == (C, r)), None) if r else None
    in_proj = next((m for m in mats if m.shape[1] == H and m.shape[0] in (C, 2 * C)), None)
    mixer = Mixer("mamba", conv_dim=C, conv_kernel=conv.shape[-1], state_size=N, head_dim=C, num_heads=1, dt_rank=r)
    mixer.evidence = [ev(a_grid, f"A_log [{C}, {N}]: a diagonal state of {N} per channel (Mamba-1)"),
                      ev(conv, f"depthwise conv [{C}, 1, {conv.shape[-1]}]")]
    b = Bound(mixer)
    roles = [("in_proj", in_proj), ("conv1d", conv), ("x_proj", x_proj), ("dt_proj", dt_proj), ("A_log", a_grid),
             ("D", d), ("out_proj", writer)]
    small = [v for v in vecs if v is not d and vec_len(v) in (N, r)]       # Jamba's dt / B / C layernorms
    for v in rank([v for v in small if vec_len(v) == r], "dt_norm")[:1]:
        roles.append(("dt_norm", v))
    bc = rank([v for v in small if vec_len(v) == N], "b_norm", "c_norm")
    roles += list(zip(("b_norm", "c_norm"), bc, strict=False))
    bind_roles(b, pool, roles)
    mixer.confidence = 0.85
    b.leftover = pool
    return b


KINDS = [Kind("mamba", "mixer", "Mamba", "#76a5c9", "ssm.mamba",
              lambda m, H: {"state_size": m.state_size, "conv_dim": m.conv_dim, "conv_kernel": m.conv_kernel},

              required=("state_size", "conv_dim", "dt_rank"), recurrent=True, cache=cache, nn_kind="mamba", args=Args,
              fields=fields, build=build, roles=ROLES,
              bare_roles=BARE_ROLES,
              detect=detect, detect_order=40)]
