"""Mamba-2: a scalar-decay selective SSM per head, an [heads, head_dim, state_size] state per sequence."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.formulas import mamba2_state
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"in_proj": "in_proj", "out_proj": "out_proj", "conv1d": "conv1d", "A_log": "A_log", "D": "D",
         "dt_bias": "dt_bias", "norm": "norm"}
# roles stored as a bare Parameter (no `.weight` leaf)
BARE_ROLES = ("A_log", "D", "dt_bias")


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
    from archprobe.validate.layouts import MUP_FOLDS
    from archprobe.validate.plan import Unsupported, need_field

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


def detect(mods, H, cfg):
    """One depthwise conv [C, 1, K] beside three per-head vectors of one length (A_log, D, dt_bias), or, where
    no two such vectors stand (Gated DeltaNet's A_log, dt_bias), a vector the names call Mamba's D; groups and
    state size from the config, the rest from the conv's width. Tried after RG-LRU and Mamba-1. Names break
    ties only between same-shaped tensors (A_log vs D vs dt_bias)."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import (
        bind_roles,
        head_vector_groups,
        one_conv_layer,
        one_conv_writer,
        take,
        vec_len,
        vectors_by_length,
    )
    from archprobe.structure.names import rank, says

    layer = one_conv_layer(mods)
    if layer is None:
        return None
    pool, conv, vecs = layer.pool, layer.convs[0], layer.vecs
    C, K = conv.shape[0], conv.shape[-1]
    triple, pair = head_vector_groups(vecs, C)
    if triple is None and (pair is not None or not any(says(v.path, "ssm_d") for v in vecs)):
        return None
    writer = one_conv_writer(layer.mats, H)
    b = Bound(Mixer("unknown"))
    heads_v = triple or next(iter(vectors_by_length(vecs).values()))
    nh = vec_len(heads_v[0])
    a_log, d, dt = (rank(heads_v, "a_log", "ssm_d", "dt_bias") + [None] * 3)[:3]
    for m in (a_log, d, dt):
        take(pool, m)
    b.roles.update({k: m for k, m in (("A_log", a_log), ("D", d), ("dt_bias", dt)) if m is not None})
    inner = writer.shape[1] if writer is not None else None
    norm = next((v for v in pool if len(v.shape) == 1 and v.shape[0] == inner), None)
    reader = next((m for m in pool if len(m.shape) == 2 and m.shape[1] == H and m is not writer), None)
    N = cfg.first_int("ssm_state_size", "mamba_d_state", "state_size", "d_state")
    G = cfg.first_int("n_groups", "mamba_n_groups", "ngroups")
    if N and not G and inner and C > inner:
        G = (C - inner) // (2 * N) or None
    if G and not N and inner and C > inner:
        N = (C - inner) // (2 * G) or None
    mixer = Mixer("mamba2", num_heads=nh, head_dim=inner // nh if inner and nh else None, state_size=N,
                  n_groups=G, conv_dim=C, conv_kernel=K)
    mixer.evidence = [ev(heads_v[0], f"per-head vectors ({nh}) x{len(heads_v)} (A_log, D, dt_bias): Mamba-2"),
                      ev(conv, f"depthwise conv [{C}, 1, {K}]")]
    b.part = mixer
    bind_roles(b, pool, (("in_proj", reader), ("conv1d", conv), ("norm", norm), ("out_proj", writer)))
    b.part.confidence = 0.85
    b.leftover = pool
    return b


KINDS = [Kind("mamba2", "mixer", "Mamba2", "#7fb3d5", "ssm.mamba2", attrs,
              required=("num_heads", "head_dim", "state_size", "conv_dim"), recurrent=True, cache=cache,
              nn_kind="mamba2", args=Args,
              fields=fields, build=build, roles=ROLES,
              bare_roles=BARE_ROLES,
              detect=detect, detect_order=50)]
