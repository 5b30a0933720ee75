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
# roles stored as a bare Parameter (no `.weight` leaf)
BARE_ROLES = ("A_log", "dt_bias")


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
    from archprobe.validate.layouts import GDN_SOURCES
    from archprobe.validate.plan import Unsupported, need_field

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


def detect(mods, H, cfg):
    """Two forms. One depthwise conv [C, 1, K] over q | k | v beside two per-head vectors of one length
    (A_log, dt_bias: a scalar decay per head) and no third (Mamba-2's D); or three convs on q, k, v with no
    per-channel vector of their width (KDA's decay bias) and per-head a / b projections (OLMo-hybrid). Tried
    after RG-LRU and Mamba-1. Names break ties only between same-shaped tensors (A_log vs dt_bias, q vs k)."""
    from archprobe.structure.mixer_shapes import conv_layer, vec_len

    layer = conv_layer(mods)
    if layer is None:
        return None
    if len(layer.convs) >= 3:
        if any(vec_len(v) == layer.convs[0].shape[0] for v in layer.vecs):
            return None
        return _split(layer, H, cfg)
    return _one_conv(layer, H, cfg)


def _one_conv(layer, H, cfg):
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import bind_roles, head_vector_groups, one_conv_writer, take, vec_len
    from archprobe.structure.names import rank

    pool, conv, vecs = layer.pool, layer.convs[0], layer.vecs
    C, K = conv.shape[0], conv.shape[-1]
    triple, pair = head_vector_groups(vecs, C)
    if pair is None or triple is not None:
        return None
    writer = one_conv_writer(layer.mats, H)
    b = Bound(Mixer("unknown"))
    nv = vec_len(pair[0])
    a_log, dt = rank(pair, "a_log", "dt_bias")
    take(pool, a_log)
    take(pool, dt)
    b.roles.update({"A_log": a_log, "dt_bias": dt})
    vd = writer.shape[1] // nv if writer is not None and nv else None
    norm = next((v for v in pool if len(v.shape) == 1 and v.shape[0] == vd), None)
    readers = sorted([m for m in pool if len(m.shape) == 2 and m.shape[1] == H and m is not writer],
                     key=lambda m: -m.shape[0])
    dk = cfg.first_int("linear_key_head_dim")
    nk = cfg.first_int("linear_num_key_heads")
    if vd and not dk:
        dk = ((C - nv * vd) // (2 * nk)) if nk else vd
    mixer = Mixer("gated_deltanet", num_heads=nv, head_dim=dk, value_head_dim=vd, conv_dim=C, conv_kernel=K)
    mixer.evidence = [ev(dt, f"per-head decay vectors ({nv}): a scalar decay per head (gated delta rule)"),
                      ev(conv, f"depthwise conv [{C}, 1, {K}]")]
    b.part = mixer
    bind_roles(b, pool, [*_readers(readers, C, nv, vd), ("conv1d", conv), ("norm", norm), ("out_proj", writer)])
    b.part.confidence = 0.85
    b.leftover = pool
    return b


def _readers(readers, C, nv, vd):
    """Gated DeltaNet's input projections by their widths (C = the conv's q|k|v width, nv value heads of vd):
    Qwen3-Next's grouped `in_proj_qkvz` [C + nv vd] and `in_proj_ba` [2 nv]; Qwen3.5's separate
    `in_proj_qkv` [C], `in_proj_z` [nv vd], `in_proj_b` / `in_proj_a` [nv] (names order b and a); or all of
    them in one block-ordered `in_proj` [C + nv vd + 2 nv] (rows q | k | v | z | b | a, Lara)."""
    from archprobe.structure.names import rank

    z = nv * vd if vd else -1
    width = {C + z: "in_proj_qkvz", 2 * nv: "in_proj_ba", C: "in_proj_qkv", z: "in_proj_z", C + z + 2 * nv: "in_proj"}
    out = []
    for m in readers:           # one module per role; a second of the same width stays unexplained
        role = width.get(m.shape[0]) if m.shape[0] != nv else None
        if role is not None and role not in {r for r, _ in out}:
            out.append((role, m))
    heads = rank([m for m in readers if m.shape[0] == nv], "beta_proj", "alpha_proj")
    out += list(zip(("in_proj_b", "in_proj_a"), heads, strict=False))
    return out


def _split(layer, H, cfg):
    """Gated DeltaNet with separate q/k/v projections and convs and per-head a/b projections (OLMo-hybrid)."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import bind_roles, vec_len, vectors_by_length
    from archprobe.structure.names import rank

    pool, convs, vecs, mats = layer.pool, layer.convs, layer.vecs, layer.mats
    pair = next((v for n, v in sorted(vectors_by_length(vecs).items()) if len(v) >= 2), None)
    if pair is None:
        return None
    nv = vec_len(pair[0])
    a_log, dt = rank(pair[:2], "a_log", "dt_bias")
    writer = next(iter(rank([m for m in mats if m.shape[0] == H], "mixer_out")), None)
    vd_total = writer.shape[1] if writer is not None else None
    heads_in = [m for m in mats if m.shape == (nv, H)]
    a_p, b_p = (rank(heads_in, "alpha_proj", "beta_proj") + [None, None])[:2]
    readers = [m for m in mats if m.shape[1] == H and m is not writer and m not in heads_in]
    wide = [m for m in readers if m.shape[0] == vd_total]
    v, g = (rank(wide, "v", "output_gate") + [None, None])[:2]
    qk = [m for m in readers if m not in wide]
    q, k = (rank(qk, "q", "k") + [None, None])[:2]
    vd = vd_total // nv if vd_total and nv else None
    nk = cfg.first_int("linear_num_key_heads") or nv
    dk = (q.shape[0] // nk) if q is not None and nk else None
    o_norm = next((m for m in vecs if vec_len(m) == vd and m not in pair), None)
    qc, kc, vc = (rank(convs, "q_conv", "k_conv", "v_conv") + [None] * 3)[:3]
    mixer = Mixer("gated_deltanet", num_heads=nv, head_dim=dk, value_head_dim=vd,
                  conv_dim=sum(c.shape[0] for c in convs), conv_kernel=convs[0].shape[-1],
                  output_gate="full_rank" if g is not None else None)
    mixer.evidence = [ev(dt, f"per-head decay vectors ({nv}): a scalar decay per head (gated delta rule)"),
                      ev(convs[0], "depthwise convs on q, k, v")]
    b = Bound(mixer)
    bind_roles(b, pool, (("q", q), ("k", k), ("v", v), ("g", g), ("a", a_p), ("b", b_p), ("A_log", a_log),
                         ("dt_bias", dt), ("o_norm", o_norm), ("o", writer), ("q_conv", qc), ("k_conv", kc),
                         ("v_conv", vc)))
    mixer.confidence = 0.8
    b.leftover = pool
    return b


KINDS = [Kind("gated_deltanet", "mixer", "GDN", "#5aa0e8", "linear_attention.gated_deltanet", attrs,
              required=("num_heads", "head_dim", "conv_dim"), recurrent=True, cache=cache,
              nn_kind="gated_deltanet", args=Args, fields=fields, build=build, roles=ROLES,
              bare_roles=BARE_ROLES,
              detect=detect, detect_order=60)]
