"""Kimi Delta Attention: a gated delta rule with a per-channel decay, a [heads, K, V] state per sequence."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.formulas import linear_state
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "q_conv": "q_conv1d", "k_conv": "k_conv1d",
         "v_conv": "v_conv1d", "f_a": "f_a_proj", "f_b": "f_b_proj", "g_a": "g_a_proj", "g_b": "g_b_proj",
         "g": "g_proj", "b": "b_proj", "A_log": "A_log", "dt_bias": "dt_bias", "o_norm": "o_norm", "f": "f_proj"}
# roles stored as a bare Parameter (no `.weight` leaf)
BARE_ROLES = ("A_log", "dt_bias")


def attrs(m, H):
    a = {"num_heads": m.num_heads, "head_dim": m.head_dim, "conv_kernel": m.conv_kernel,
         "gate_lower_bound": m.gate_lower_bound, "output_gate": m.output_gate}
    if m.a_log_stored is not None:
        a["a_log_stored"] = m.a_log_stored
    return a


def cache(m, c: CacheContext):
    h, d = m.num_heads, m.head_dim
    return "kda", linear_state(h, d, d, 3 * h * d, m.conv_kernel or 4, c.state_b, c.act_b)


def act_width(m):
    # KDA as the modules run it for inference (the fused recurrence, ops/native): projections, conv,
    # normalised q/k, gate, their float32 copies and the read-out: ~20 h d per token alive at once
    # (measured, tests/memory/test_measured.py; the chunked form held ~24 h d and [C, C] products)
    return 20 * (m.num_heads or 0) * (m.head_dim or 0)


@dataclass(frozen=True)
class Args:
    """archprobe.nn.kda.KimiDeltaAttention's arguments; toy defaults (K3's bounded gate)."""
    num_heads: int = 4
    head_dim: int = 16
    conv_kernel: int = 4
    gate: str = "bounded"                # bounded (K3) | softplus (Kimi Linear)
    gate_lower_bound: float = -5.0
    output_gate: str = "full_rank"       # full_rank (g_proj) | low_rank (g_a_proj, g_b_proj)
    a_log_len: int | None = None         # the stored A_log length (K3 pads it to 128); None: num_heads
    decay_rank: int | None = None        # 0: a full-rank decay projection f_proj (Bailing); None: head_dim
    chunk_size: int | None = None        # chunk of kda_chunked; None: the op's choice (the fused kernel on CPU)


def fields(card, i, has, out):
    from archprobe.validate.plan import Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    out.update(num_heads=need_field(m.num_heads, f"{p}.mixer.num_heads"),
               head_dim=need_field(m.head_dim, f"{p}.mixer.head_dim"),
               conv_kernel=need_field(m.conv_kernel, f"{p}.mixer.conv_kernel"),
               gate="bounded" if m.gate_lower_bound is not None else "softplus",
               gate_lower_bound=m.gate_lower_bound if m.gate_lower_bound is not None else -5.0,
               output_gate="full_rank" if has("mixer.g") else "low_rank", a_log_len=m.a_log_stored,
               decay_rank=0 if has("mixer.f") else None)
    if has("mixer.f") and (has("mixer.f_a") or has("mixer.f_b")):
        raise Unsupported(f"{p}.mixer: both a full-rank and a low-rank decay projection")


def build(a: Args, kind, model):
    from archprobe.nn.kda import KimiDeltaAttention

    return KimiDeltaAttention(model.hidden_size, a.num_heads, a.head_dim, conv_kernel=a.conv_kernel, gate=a.gate,
                              gate_lower_bound=a.gate_lower_bound, output_gate=a.output_gate,
                              a_log_len=a.a_log_len, norm_eps=model.norm_eps, chunk_size=a.chunk_size,
                              decay_rank=a.decay_rank)


def detect(mods, H, cfg):
    """Three depthwise convs [D, 1, K] (q, k, v) beside a per-channel decay bias [D], or one [3D, 1, K] over
    q | k | v beside three [D, H] readers and that bias; a low-rank [r, H] -> [D, r] decay pair. Tried before
    the one-conv kinds: a fused q | k | v conv is one conv too. Names break ties only between same-shaped
    tensors (q / k / v, the decay pair vs the output gate's)."""
    from archprobe.structure.mixer_shapes import conv_layer, vec_len
    from archprobe.structure.names import rank, says

    layer = conv_layer(mods)
    if layer is None:
        return None
    convs, vecs, mats = layer.convs, layer.vecs, layer.mats
    if len(convs) >= 3:     # without a vector of the convs' width, q / k / v convs are Gated DeltaNet's
        D = convs[0].shape[0] if any(vec_len(v) == convs[0].shape[0] for v in vecs) else None
    else:
        D = len(convs) == 1 and _fused_width(convs[0], vecs, mats, H)
    if not D:
        return None
    writer = next(iter(rank([m for m in mats if m.shape == (H, D)], "mixer_out")[::-1]), None)
    named = [m for m in mats if m.shape == (H, D) and says(m.path, "mixer_out")]
    writer = named[0] if named else writer
    return _bind(layer.pool, convs, vecs, mats, writer, H, cfg, D)


def _fused_width(conv, vecs, mats, H):
    """KDA with one depthwise conv over q | k | v (transformers' `conv1d` [3D, 1, K]): the per-channel width D
    when three readers [D, H] and a per-channel decay bias [D] stand beside it; None otherwise."""
    C = conv.shape[0]
    D = C // 3
    if C % 3 or sum(m.shape == (D, H) for m in mats) < 3 or not any(v.shape == (D,) for v in vecs):
        return None
    return D


def _bind(pool, convs, vecs, mats, writer, H, cfg, D):
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import bind_roles, vec_len
    from archprobe.structure.names import rank, says

    b = Bound(Mixer("kda"))
    fused_conv = convs[0] if convs[0].shape[0] == 3 * D else None
    qkv_convs = rank([c for c in convs if c.shape[0] == D], "q_conv", "k_conv", "v_conv")[:3]
    readers = [m for m in mats if m.shape == (D, H) and m is not writer]
    gate = None
    if len(readers) >= 4:
        gate = rank(readers, "output_gate")[0]
        readers.remove(gate)
    q, k, v = (rank(readers, "q", "k", "v") + [None] * 3)[:3]
    small = [m for m in mats if m.shape[1] == H and m.shape[0] < D and m is not writer]
    pairs = []
    for a in small:
        up = next((u for u in mats if u.shape == (D, a.shape[0]) and u not in [p[1] for p in pairs]), None)
        if up is not None:
            pairs.append((a, up))
    pairs.sort(key=lambda p: (not says(p[0].path, "kda_f"), p[0].path))
    f_pair = pairs[0] if pairs else None
    g_pair = pairs[1] if len(pairs) > 1 and gate is None else None
    f_full = None
    if f_pair is None and gate is not None and len(readers) >= 4:   # a full-rank decay projection (Bailing)
        f_full = next((m for m in readers if m not in (q, k, v)), None)
    paired = {id(p[0]) for p in pairs}
    beta = next((m for m in sorted(small, key=lambda m: m.shape[0]) if id(m) not in paired and D % m.shape[0] == 0),
                None)
    heads = beta.shape[0] if beta is not None else cfg.first_int("num_heads", "num_attention_heads")
    dt = next((m for m in vecs if m.shape == (D,)), None)
    hd = D // heads if heads else None
    o_norm = next((m for m in vecs if m.shape == (hd,)), None) if hd else None
    a_log = next((m for m in vecs if m is not dt and m is not o_norm and vec_len(m) != D), None)
    m = b.part
    m.num_heads, m.head_dim, m.conv_kernel, m.conv_dim = heads, hd, convs[0].shape[-1], 3 * D
    m.output_gate = "full_rank" if gate is not None else ("low_rank" if g_pair is not None else None)
    m.gate_lower_bound = cfg.first_float("gate_lower_bound")
    if m.gate_lower_bound is None and cfg.get("kda_safe_gate") is True:     # Bailing: kda_lower_bound * sigmoid
        m.gate_lower_bound = cfg.first_float("kda_lower_bound")
    if a_log is not None:
        m.a_log_stored = a_log.weight.info.numel
    m.evidence = [ev(convs[0], f"one depthwise conv [{3 * D}, 1, K] over q | k | v" if fused_conv is not None
                     else f"three depthwise convs [{D}, 1, K] (q, k, v)")]
    if dt is not None:
        m.evidence.append(ev(dt, f"channel-wise decay bias: {D} = {heads} heads x {hd}"))
    if f_pair is not None:
        m.evidence += [ev(f_pair[0], f"low-rank decay down-projection [{f_pair[0].shape[0]}, H]"),
                       ev(f_pair[1], "decay up-projection to heads x head_dim")]
    if beta is not None:
        m.evidence.append(ev(beta, f"write-strength (beta) projection [{beta.shape[0]}, H]"))
    roles = [("q", q), ("k", k), ("v", v), ("g", gate), ("b", beta), ("dt_bias", dt), ("A_log", a_log),
             ("o_norm", o_norm), ("o", writer), ("f", f_full)]
    roles += list(zip(("q_conv", "k_conv", "v_conv"), qkv_convs, strict=False))
    roles.append(("conv1d", fused_conv))
    if f_pair:
        roles += [("f_a", f_pair[0]), ("f_b", f_pair[1])]
    if g_pair:
        roles += [("g_a", g_pair[0]), ("g_b", g_pair[1])]
    bind_roles(b, pool, roles)
    m.confidence = 0.9
    b.leftover = pool
    return b


KINDS = [Kind("kda", "mixer", "KDA", "#3a7bd5", "linear_attention.kda", attrs,
              required=("num_heads", "head_dim"), recurrent=True, cache=cache, act_width=act_width,
              nn_kind="kda", args=Args, fields=fields, build=build, roles=ROLES,
              bare_roles=BARE_ROLES,
              detect=detect, detect_order=20)]
