"""The token mixer of a layer from shapes; config numbers (heads, head dims) where shapes cannot say.

* linear attention and SSMs: depthwise convolutions [C, 1, K]. Three of them beside a low-rank
  [r, H] -> [D, r] decay pair and a per-channel [D] vector: KDA. One, beside three per-head vectors of
  the same length (A_log, D, dt_bias): Mamba-2. One, beside two per-head vectors: Gated DeltaNet. One
  of width H with a [3H, H] input: a short-convolution block (LFM2).
* a rank bottleneck: an [w, H] reader with w <= H/2, a norm [r] on the latent and an [X, r] up-projection:
  MLA (w - r is the decoupled rope key); without the norm and rope part: a shared low-rank K/V.
* softmax attention: one writer [H, Wo] and readers [Wq | Wk | Wv, H] (or one fused reader); Wk < Wq
  means fewer K/V heads. Per-head [hd] vectors are q/k norms, an [nh] vector the attention sinks.
Names break ties only between same-shaped tensors (q vs k vs v, A_log vs D vs dt_bias).
"""

from __future__ import annotations

import re

from archprobe.kinds import MIXERS
from archprobe.structure.bind_ffn import Bound, ev
from archprobe.structure.bind_moa import bind_moa
from archprobe.structure.card import Mixer
from archprobe.structure.modules import Module
from archprobe.structure.names import rank, says
from archprobe.structure.widths import bias_says_transposed, mat, split_io

ROPE_MAX = 256


def _output_projection(cands: list[Module]) -> Module | None:
    """The output projection among the [H, W] matrices shapes leave: where an output gate [W, H] has the same
    shape (W = H, as in the demo's Gated MLA), names break the tie: an output's words first, a gate's last."""
    return min(cands, key=lambda m: (says(m.path, "output_gate"), not says(m.path, "mixer_out"), m.path),
               default=None)


def vec_len(m: Module) -> int | None:
    """The length of a vector stored with extra unit dims ([1, 1, n, 1] -> n); None for other shapes."""
    big = [d for d in m.shape if d != 1]
    return big[0] if len(big) == 1 and len(m.shape) >= 1 else (1 if m.shape and not big else None)


def _take(pool: list[Module], m: Module | None) -> Module | None:
    if m is not None and m in pool:
        pool.remove(m)
    return m


def _bind(b: Bound, pool: list[Module], pairs) -> None:
    """Bind each (role, module) pair whose module is present, taking it out of the layer's pool."""
    for role, m in pairs:
        if _take(pool, m) is not None:
            b.roles[role] = m


def bind_mixer(mods: list[Module], H: int, cfg) -> Bound | None:
    for kind in MIXERS.values():      # a mechanism that brings its own detector (archprobe.kinds) first
        found = kind.detect(mods, H, cfg) if kind.detect is not None else None
        if found is not None:
            return found
    convs = [m for m in mods if len(m.shape) == 3 and m.shape[1] == 1 and m.shape[0] > 1 and m.shape[2] > 1]
    if convs:
        return _linear(mods, convs, H, cfg)
    return bind_moa(mods, H, cfg) or _mla(mods, H, cfg) or _lightning(mods, H, cfg) or _attention(mods, H, cfg)


# --- linear attention / SSM ----------------------------------------------------------------------------
def _linear(mods: list[Module], convs: list[Module], H: int, cfg) -> Bound | None:
    pool = list(mods)
    vecs = [m for m in pool if vec_len(m) is not None and mat(m) is None and m not in convs]
    mats = [m for m in pool if len(m.shape) == 2 and m not in vecs]
    K = convs[0].shape[-1]
    if len(convs) >= 3 and not any(vec_len(v) == convs[0].shape[0] for v in vecs):
        return _gdn_split(pool, convs, vecs, mats, H, cfg)
    fused_kda = len(convs) == 1 and _fused_kda_width(convs[0], vecs, mats, H)
    if len(convs) >= 3 or fused_kda:
        D = fused_kda or convs[0].shape[0]
        writer = next(iter(rank([m for m in mats if m.shape == (H, D)], "mixer_out")[::-1]), None)
        named = [m for m in mats if m.shape == (H, D) and says(m.path, "mixer_out")]
        writer = named[0] if named else writer
        return _kda(pool, convs, vecs, mats, writer, H, cfg, D)
    # the writer maps some inner width back to H; a low-rank pair's up-projection ([X, r] beside [r, H]) is not it
    writer = next((m for m in mats if m.shape[0] == H and m.shape[1] != H
                   and not any(r.shape == (m.shape[1], H) for r in mats)), None) or next(
        iter(rank([m for m in mats if m.shape == (H, H)], "mixer_out")), None)
    conv = convs[0]
    C = conv.shape[0]
    blocks = [m for m in mats + [m for m in pool if len(m.shape) == 3 and m not in convs]
              if len(m.shape) == 3 and m.shape[1] == m.shape[2] and m.shape[0] * m.shape[1] == C]
    if len(blocks) >= 2:
        return _rg_lru(pool, conv, blocks, vecs, mats, writer, H)
    a_grid = next((m for m in mats if m.shape[0] == C and m.shape[1] <= 256 and m is not writer
                   and not any(r.shape == (m.shape[1], C) for r in mats)), None)
    if a_grid is not None and any(vec_len(v) == C for v in vecs):
        return _mamba1(pool, conv, a_grid, vecs, mats, writer, H)
    sizes: dict[int, list[Module]] = {}
    for v in vecs:
        sizes.setdefault(vec_len(v), []).append(v)
    triple = next((v for n, v in sizes.items() if len(v) >= 3 and n < C), None)
    pair = next((v for n, v in sizes.items() if len(v) == 2 and n < C), None)
    b = Bound(Mixer("unknown"))
    if triple is not None or (pair is None and any(says(v.path, "ssm_d") for v in vecs)):
        heads_v = triple or next(iter(sizes.values()))
        nh = vec_len(heads_v[0])
        a_log, d, dt = (rank(heads_v, "a_log", "ssm_d", "dt_bias") + [None] * 3)[:3]
        for m in (a_log, d, dt):
            _take(pool, m)
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
        _bind(b, pool, (("in_proj", reader), ("conv1d", conv), ("norm", norm), ("out_proj", writer)))
    elif pair is not None:
        nv = vec_len(pair[0])
        a_log, dt = rank(pair, "a_log", "dt_bias")
        _take(pool, a_log)
        _take(pool, dt)
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
        _bind(b, pool, [*_gdn_readers(readers, C, nv, vd), ("conv1d", conv), ("norm", norm), ("out_proj", writer)])
    elif C == H:
        reader = next((m for m in mats if m.shape == (3 * H, H)), None)
        if reader is None:
            return None
        b.part = Mixer("short_conv", conv_dim=C, conv_kernel=K,
                       evidence=[ev(conv, f"depthwise conv [{C}, 1, {K}] on the hidden width, gated by a [3H, H] "
                                          "input: a short-convolution block")])
        _bind(b, pool, (("in_proj", reader), ("conv1d", conv), ("out_proj", writer)))
    else:
        return None
    b.part.confidence = 0.85
    b.leftover = pool
    return b


def _gdn_readers(readers: list[Module], C: int, nv: int, vd: int | None) -> list[tuple[str, Module]]:
    """Gated DeltaNet's input projections by their widths (C = the conv's q|k|v width, nv value heads of vd):
    Qwen3-Next's grouped `in_proj_qkvz` [C + nv vd] and `in_proj_ba` [2 nv]; Qwen3.5's separate
    `in_proj_qkv` [C], `in_proj_z` [nv vd], `in_proj_b` / `in_proj_a` [nv] (names order b and a); or all of
    them in one block-ordered `in_proj` [C + nv vd + 2 nv] (rows q | k | v | z | b | a, Lara)."""
    z = nv * vd if vd else -1
    width = {C + z: "in_proj_qkvz", 2 * nv: "in_proj_ba", C: "in_proj_qkv", z: "in_proj_z", C + z + 2 * nv: "in_proj"}
    out: list[tuple[str, Module]] = []
    for m in readers:           # one module per role; a second of the same width stays unexplained
        role = width.get(m.shape[0]) if m.shape[0] != nv else None
        if role is not None and role not in {r for r, _ in out}:
            out.append((role, m))
    heads = rank([m for m in readers if m.shape[0] == nv], "beta_proj", "alpha_proj")
    out += list(zip(("in_proj_b", "in_proj_a"), heads, strict=False))
    return out


def _rg_lru(pool, conv, blocks, vecs, mats, writer, H) -> Bound:
    """Griffin's RG-LRU (RecurrentGemma): block-diagonal input and recurrence gates [heads, b, b] (+ [heads, b]
    biases), a per-channel recurrence parameter [C], two [C, H] input branches (x through the conv, y a gate)."""
    C = conv.shape[0]
    ig, rg = rank(blocks[:2], "input_gate", "recurrent_gate")
    a = next((v for v in vecs if vec_len(v) == C), None)
    xs = rank([m for m in mats if m.shape == (C, H) and m is not writer], "linear_x", "linear_y")
    gate_biases = [m for m in pool if len(m.shape) == 2 and m.shape == blocks[0].shape[:2]]
    igb, rgb = (rank(gate_biases, "input_gate_bias", "recurrent_gate_bias")
                + [None, None])[:2]
    mixer = Mixer("rg_lru", conv_dim=C, conv_kernel=conv.shape[-1], num_heads=blocks[0].shape[0],
                  head_dim=blocks[0].shape[1])
    mixer.evidence = [ev(ig, f"block-diagonal gate {list(ig.shape)} over a {C}-wide recurrence (RG-LRU)"),
                      ev(conv, f"depthwise conv [{C}, 1, {conv.shape[-1]}]")]
    b = Bound(mixer)
    _bind(b, pool, (("x", xs[0] if xs else None), ("y", xs[1] if len(xs) > 1 else None), ("conv1d", conv),
                    ("input_gate", ig), ("input_gate.bias", igb), ("recurrent_gate", rg),
                    ("recurrent_gate.bias", rgb), ("a_param", a), ("o", writer)))
    mixer.confidence = 0.8
    b.leftover = pool
    return b


def _mamba1(pool, conv, a_grid, vecs, mats, writer, H) -> Bound:
    """Mamba (v1, Jamba): A_log [C, N], D [C], x_proj [dt_rank + 2N, C], dt_proj [C, dt_rank] (+ bias)."""
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
    _bind(b, pool, roles)
    mixer.confidence = 0.85
    b.leftover = pool
    return b


def _gdn_split(pool, convs, vecs, mats, H, cfg) -> Bound | None:
    """Gated DeltaNet with separate q/k/v projections and convs and per-head a/b projections (OLMo-hybrid)."""
    sizes: dict[int, list[Module]] = {}
    for v in vecs:
        sizes.setdefault(vec_len(v), []).append(v)
    pair = next((v for n, v in sorted(sizes.items()) if len(v) >= 2), None)
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
    _bind(b, pool, (("q", q), ("k", k), ("v", v), ("g", g), ("a", a_p), ("b", b_p), ("A_log", a_log),
                    ("dt_bias", dt), ("o_norm", o_norm), ("o", writer), ("q_conv", qc), ("k_conv", kc),
                    ("v_conv", vc)))
    mixer.confidence = 0.8
    b.leftover = pool
    return b


def _fused_kda_width(conv: Module, vecs: list[Module], mats: list[Module], H: int) -> int | None:
    """KDA with one depthwise conv over q | k | v (transformers' `conv1d` [3D, 1, K]): the per-channel width D
    when three readers [D, H] and a per-channel decay bias [D] stand beside it; None otherwise."""
    C = conv.shape[0]
    D = C // 3
    if C % 3 or sum(m.shape == (D, H) for m in mats) < 3 or not any(v.shape == (D,) for v in vecs):
        return None
    return D


def _kda(pool, convs, vecs, mats, writer, H, cfg, D) -> Bound:
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
    for role, mod in roles:
        if _take(pool, mod) is not None:
            b.roles[role] = mod
    m.confidence = 0.9
    b.leftover = pool
    return b


def _lightning(mods: list[Module], H: int, cfg) -> Bound | None:
    """Linear attention with a fixed per-head decay (MiniMax's lightning attention): a [heads, 1, 1] slope
    rate beside a fused qkv; the precomputed decay buffers ([heads, block, 1], [1, heads, block, block])."""
    rate = next((m for m in mods if len(m.shape) == 3 and m.shape[1:] == (1, 1) and m.shape[0] > 1), None)
    if rate is None:
        return None
    nh = rate.shape[0]
    mats = [m for m in mods if len(m.shape) == 2]
    writer = next(iter(rank([m for m in mats if m.shape[0] == H], "mixer_out")), None)
    if writer is None or writer.shape[1] % nh:
        return None
    inner = writer.shape[1]
    qkv = next((m for m in mats if m.shape == (3 * inner, H)), None)
    gate = next((m for m in mats if m.shape == (inner, H) and m is not writer), None)
    norm = next((m for m in mods if m.shape == (inner,)), None)
    buffers = [m for m in mods if m is not rate and len(m.shape) >= 3 and nh in m.shape]
    mixer = Mixer("lightning", num_heads=nh, head_dim=inner // nh, fused_qkv=qkv is not None,
                  output_gate="sigmoid_g_proj" if gate is not None else None)
    mixer.evidence = [ev(rate, f"per-head decay rate [{nh}, 1, 1]: linear attention with a fixed decay"),
                      ev(writer, f"output projection [H, {inner}]")]
    b = Bound(mixer)
    pool = list(mods)
    _bind(b, pool, [("qkv", qkv), ("o", writer), ("g", gate), ("norm", norm), ("slope_rate", rate),
                    *[(f"decay.{m.leaf}", m) for m in buffers]])
    mixer.confidence = 0.8
    b.leftover = pool
    return b


# --- MLA ---------------------------------------------------------------------------------------------------
def _mla(mods: list[Module], H: int, cfg) -> Bound | None:
    mats = [m for m in mods if len(m.shape) == 2 and not says(m.path, "indexer")]
    vecs = [m for m in mods if len(m.shape) == 1 and not says(m.path, "indexer")]
    kvs, qs = [], []
    for down in mats:
        w, inp = down.shape
        if inp != H or w > H // 2:
            continue
        for up in mats:
            if up is down:
                continue
            r = up.shape[1]
            norm = next((n for n in vecs if n.shape == (r,)), None)
            if r < w <= r + ROPE_MAX and up.shape[0] > r and norm is not None:
                kvs.append((w - r, not says(down.path, "mla_kv_down"), down.path,
                            (down, norm, up)))
            elif r == w and up.shape[0] > w and up.shape[1] != H:
                qs.append((not says(down.path, "mla_q_down"), down.path, (down, norm, up)))
    kv = min(kvs, key=lambda t: t[:3])[3] if kvs else None
    qs = [q for q in qs if kv is None or (q[2][0] is not kv[0] and q[2][2] is not kv[2])]
    q_lora = min(qs, key=lambda t: t[:2])[2] if qs else None
    if kv is None:      # a shared low-rank K/V without MLA's latent norm / rope key: [r, H] read back by [X, r]
        cands = []
        for down in mats:
            r = down.shape[0]
            if down.shape[1] != H or r > H // 4 or any(n.shape == (r,) for n in vecs):
                continue
            ups = [u for u in mats if u is not down and u.shape[1] == r and u.shape[0] != H]
            if ups:
                cands.append((r, down.path, down, ups))
        if cands:
            _, _, down, ups = min(cands, key=lambda c: c[:2])
            return _lowrank(mods, down, ups, H, cfg)
        return None
    pool = list(mods)
    down, norm, up = kv
    r, rope = up.shape[1], down.shape[0] - up.shape[1]
    taken = (down, up, *(q_lora[0::2] if q_lora else ()))    # the q-LoRA up [heads * d, r] may be [H, r] too
    writer = _output_projection([m for m in mats if m.shape[0] == H and all(m is not t for t in taken)])
    nh = cfg.first_int("num_attention_heads", "n_heads", "num_heads")
    v_dim = writer.shape[1] // nh if writer is not None and nh else cfg.first_int("v_head_dim")
    nope = up.shape[0] // nh - v_dim if nh and v_dim else cfg.first_int("qk_nope_head_dim")
    mixer = Mixer("mla", num_heads=nh, kv_lora_rank=r, rope_dim=rope, nope_dim=nope, v_head_dim=v_dim,
                  q_lora_rank=q_lora[2].shape[1] if q_lora else None, cache_width_per_token=down.shape[0],
                  head_dim=(nope + rope) if nope is not None else None)
    mixer.evidence = [ev(down, f"KV down-projection H={H} -> {down.shape[0]} = latent {r} + rope {rope}"),
                      ev(norm, f"norm on the {r}-wide latent"),
                      ev(up, f"up-projection from the {r}-wide latent to K/V of all heads")]
    b = Bound(mixer)
    roles = [("kv_a", down), ("kv_a_norm", norm), ("kv_b", up), ("o", writer)]
    if q_lora is not None:
        roles += [("q_a", q_lora[0]), ("q_a_norm", q_lora[1]), ("q_b", q_lora[2])]
        mixer.evidence.append(ev(q_lora[0], f"query low-rank down-projection (q-LoRA {q_lora[2].shape[1]})"))
    else:
        q = next((m for m in mats if m.shape[1] == H and m not in (down, writer) and m.shape[0] > down.shape[0]), None)
        roles.append(("q", q))
    _bind(b, pool, roles)
    rope_norm = next((m for m in pool if m.shape == (rope,) and not says(m.path, "indexer")), None) if rope else None
    if rope_norm is not None:                 # a norm on the decoupled rope key alone (dots)
        b.roles["k_rope_norm"] = _take(pool, rope_norm)
    _gates_and_indexer(b, pool, H, nh, writer)
    mixer.confidence = 0.95
    b.leftover = pool
    return b


def _lowrank(mods, down, ups, H, cfg) -> Bound:
    pool = list(mods)
    r = down.shape[0]
    nh = cfg.first_int("num_attention_heads", "n_heads", "num_heads")
    mixer = Mixer("lowrank_kv", num_heads=nh, kv_lora_rank=r, cache_width_per_token=r, confidence=0.75)
    mixer.evidence = [ev(down, f"shared K/V down-projection H={H} -> {r}: cache width {r} vs hidden {H}"),
                      ev(ups[0], f"up-projection from the {r}-wide latent")]
    b = Bound(mixer)
    writer = next((m for m in pool if len(m.shape) == 2 and m.shape[0] == H and m.shape[1] != r), None)
    q = next((m for m in pool if len(m.shape) == 2 and m.shape[1] == H and m not in (down, writer)), None)
    up_roles = [("kv_b", ups[0])] if len(ups) == 1 else list(zip(("k_b", "v_b"), rank(ups, "kv_up_k", "kv_up_v"),
                                                                                   strict=False))
    if q is not None and writer is not None:
        hd = cfg.first_int("head_dim") or (writer.shape[1] // nh if nh else None)
        mixer.head_dim = hd
        if hd and ups[0].shape[0] % hd == 0:
            mixer.num_kv_heads = ups[0].shape[0] // hd // (2 if len(ups) == 1 else 1)
    _bind(b, pool, (("kv_a", down), *up_roles, ("q", q), ("o", writer)))
    b.leftover = pool
    return b


# --- softmax attention ------------------------------------------------------------------------------------
def _value_heads_apart(readers: list[tuple[Module, int]], Wo: int, nh: int | None):
    """(q, k, v) where the value heads differ in width from the q/k heads (MiMo-V2-Flash: 192 vs 128):
    q = nh dqk, k = kvh dqk, v = kvh dv and o reads nh dv, so Wq / Wk = Wo / Wv with Wv != Wk. Three widths:
    the one assignment that fits (the widest of q and k being q). Two equal widths wider than the third, the
    third being o's own width: q and k of as many heads (names order them) and the values (kvh = nh); the usual
    layout has its equal pair (k, v) no wider than q. None otherwise."""
    if not nh or len(readers) != 3 or Wo % nh:
        return None
    widths = {w for _, w in readers}
    if len(widths) == 3:
        fits = [(q, k, v) for q, wq in readers for k, wk in readers for v, wv in readers
                if len({id(q), id(k), id(v)}) == 3 and wq > wk and wq * wv == wk * Wo and wv != wk
                and wq % nh == 0 and wk % (wq // nh) == 0]
        return fits[0] if len(fits) == 1 else None
    pair_w = max(widths)
    pair = [m for m, w in readers if w == pair_w]
    odd = [(m, w) for m, w in readers if w != pair_w]
    if len(pair) != 2 or len(odd) != 1 or odd[0][1] != Wo or pair_w % nh:
        return None
    q, k = rank(pair, "q", "k")
    return q, k, odd[0][0]


def _attention(mods: list[Module], H: int, cfg, transposed_hint: bool | None = None) -> Bound | None:
    mats = [m for m in mods if len(m.shape) == 2 and not says(m.path, "indexer") and m.shape != (1, H)]
    if not mats:
        return None
    hint = bias_says_transposed(mats) if transposed_hint is None else transposed_hint
    if hint is None:
        hint = cfg.default("conv1d_transposed")
    for transposed in ([hint] if hint is not None else [False, True]):
        readers, writers = split_io(mats, H, transposed)
        if len(writers) == 1 and readers:
            break
    else:
        return None
    o, Wo = writers[0]
    nh = cfg.first_int("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads",
                       "decoder_attention_heads")
    hd = cfg.first_int("head_dim", "kv_channels", "attention_head_size")
    kvh = cfg.first_int("num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num",
                        "n_head_kv", "num_kv")
    pool = list(mods)
    vecs = [m for m in pool if len(m.shape) == 1]
    mixer = Mixer("gqa")
    if transposed:
        mixer.layout["transposed"] = True
    b = Bound(mixer)
    roles: list[tuple[str, Module | None]] = [("o", o)]
    if not nh and hd:
        nh = Wo // hd
    per_head = [v for v in vecs if hd and v.shape == (hd,)] or [v for v in vecs if nh and v.shape[0] * nh == Wo]
    if not hd and nh and Wo % nh == 0:
        hd = Wo // nh
    if not nh and per_head:
        hd = per_head[0].shape[0]
        nh = Wo // hd if Wo % hd == 0 else None
    if len(readers) == 1:
        qkv, W = readers[0]
        if nh and hd and (not kvh or (nh + 2 * kvh) * hd != W) and W > nh * hd and (W - nh * hd) % (2 * hd) == 0:
            kvh = (W - nh * hd) // (2 * hd)    # the shape over the config (Falcon's multi_query keeps num_kv_heads)
        if not (nh and hd and kvh and (nh + 2 * kvh) * hd == W) and W == 3 * Wo:
            kvh = nh
        mixer.fused_qkv = True
        if nh and hd and kvh:
            mixer.layout["qkv_split"] = [nh * hd, kvh * hd, kvh * hd]
            layout = cfg.default("qkv_layout")
            if not layout and kvh == nh and cfg.get("use_parallel_residual") is not None:
                layout = "per_head"   # GPT-NeoX's own key: its lineage fuses qkv per head (a tie-break, no row)
            if layout:
                mixer.layout["qkv_interleaved"] = layout
        roles.append(("qkv", qkv))
        mixer.evidence = [ev(qkv, f"fused QKV projection [{W}, H]")]
        Wq = Wo
    else:
        by_width: dict[int, list] = {}
        for m, w in readers:
            by_width.setdefault(w, []).append(m)
        kv_w = next((w for w, ms in sorted(by_width.items()) if len(ms) == 2 and w != Wo and w != 2 * Wo), None)
        qkv_v = _value_heads_apart(readers, Wo, nh)
        if qkv_v is not None:         # value heads of another width than q/k heads (MiMo-V2-Flash)
            q, k, v = qkv_v
            hd = (q.shape[1] if transposed else q.shape[0]) // nh
            mixer.v_head_dim = Wo // nh
            kv_w = k.shape[1] if transposed else k.shape[0]
            rest = [m for m, w in readers if m not in qkv_v]
        elif kv_w is not None:
            k, v = rank(by_width[kv_w], "k", "v")
            rest = [m for m, w in readers if m not in (k, v)]
            q = next(iter(rank(rest, "q")), None)
            rest = [m for m in rest if m is not q]
        else:
            same = rank([m for m, w in readers if w == Wo], "q", "k", "v")
            rest = [m for m, w in readers if w != Wo]
            q = next(iter(rank([m for m, w in readers if w == 2 * Wo], "q")), None)
            if q is not None:
                rest.remove(q)
                k, v = (same + [None, None])[:2]
                rest += same[2:]
            else:
                q, k, v = (same + [None] * 3)[:3]
                rest += same[3:]
            kv_w = k.shape[0] if k is not None and not transposed else (k.shape[1] if k is not None else None)
        Wq = (q.shape[1] if transposed else q.shape[0]) if q is not None else Wo
        if kv_w and hd and not cfg.first_int("num_key_value_heads", "n_kv_heads", "num_kv_heads",
                                              "multi_query_group_num", "n_head_kv"):
            kvh = kv_w // hd if kv_w % hd == 0 else None
        elif kv_w and hd:
            kvh = kv_w // hd if kv_w % hd == 0 else kvh
        roles += [("q", q), ("k", k), ("v", v)]
        if Wq == 2 * Wo:
            mixer.output_gate = "fused_in_q_proj"
        gate = next((m for m in rest if (m.shape[0] if not transposed else m.shape[1]) == Wo), None)
        if gate is not None:
            roles.append(("g", gate))
            mixer.output_gate = "sigmoid_g_proj"
        if q is not None and k is not None:
            mixer.evidence = [ev(q, f"query projection {list(q.shape)}"),
                              ev(k, f"key projection {list(k.shape)}: {kvh} KV heads of {hd}")]
    mixer.num_heads, mixer.head_dim, mixer.num_kv_heads = nh, hd, kvh
    if kvh and nh:
        mixer.kind = "mqa" if kvh == 1 and nh > 1 else "mha" if kvh == nh else "gqa"
    mixer.bias = {r: (m.bias is not None) for r, m in roles if m is not None}
    # q/k norms: per head [hd] or full [nh*hd] / [kvh*hd]
    norms = [v for v in vecs if v.shape[0] in {x for x in (hd, (nh or 0) * (hd or 0), (kvh or 0) * (hd or 0)) if x}]
    if len(norms) == 4 and all(v.shape == (hd,) for v in norms) and all(v.bias is None for v in norms):
        # differential attention: lambda_q1, lambda_k1, lambda_q2, lambda_k2 re-weight two softmax maps
        # (the pair a vector belongs to changes lambda's sign, so only its name can say: `q1`, `k2`, ...; a name
        # that does not say keeps its leaf as role, which validate refuses rather than guess)
        for v in sorted(norms, key=lambda v: v.path):
            tag = re.search(r"([qk])_?([12])$", v.leaf)
            roles.append((f"lambda_{tag.group(1)}{tag.group(2)}" if tag else f"lambda.{v.leaf}", v))
        mixer.layout["differential"] = True
        norms = []
    if len(norms) >= 2:
        qn, kn = rank(norms, "q_norm", "k_norm")[:2]
        if nh and kvh and nh != kvh and qn.shape[0] == (kvh or 0) * (hd or 0) and kn.shape[0] == nh * hd:
            qn, kn = kn, qn
        if qn.shape[0] != hd and nh and kvh and hd and (qn.shape[0], kn.shape[0]) != (nh * hd, kvh * hd):
            norms = []    # two [H] vectors that do not fit q and k (DBRX keeps its layer norms in here)
        else:
            roles += [("q_norm", qn), ("k_norm", kn)]
            mixer.qk_norm = "per_head" if qn.shape[0] == hd else "full"
    if len(norms) < 2 and nh and hd:        # per-head norm weights stored [heads, hd] (Cohere's qk LayerNorm)
        grid = [m for m in pool if len(m.shape) == 2 and m.shape[1] == hd and m.shape[0] in (nh, kvh)
                and m not in [r[1] for r in roles]]
        if len(grid) >= 2:
            qn = next((m for m in grid if m.shape[0] == nh), grid[0])
            kn = next((m for m in grid if m is not qn), None)
            roles += [("q_norm", qn), ("k_norm", kn)]
            mixer.qk_norm = "per_head_weights"
    sinks = next((v for v in vecs if nh and v.shape == (nh,) and v not in [r[1] for r in roles]), None)
    if sinks is not None:
        roles.append(("sinks", sinks))
        mixer.sinks = True
    v_mod = next((m for r, m in roles if r == "v"), None)
    if v_mod is not None and kvh:       # a dynamic mask from the values: dt [kv heads, Wv] and A [kv heads] (Doge)
        vw = v_mod.shape[1] if transposed else v_mod.shape[0]
        dt = next((m for m in pool if len(m.shape) == 2 and m.shape == (kvh, vw)), None)
        a_vec = next((m for m in pool if m.shape == (kvh,)), None)
        if dt is not None and a_vec is not None:
            roles += [("mask_dt", dt), ("mask_A", a_vec)]
            mixer.layout["dynamic_mask"] = True
    _bind(b, pool, roles)
    _gates_and_indexer(b, pool, H, nh, o)
    mixer.evidence.append(ev(o, f"output projection [H, {Wo}]"))
    mixer.confidence = 0.9 if nh and hd and kvh else 0.6
    b.leftover = pool
    return b


def _gates_and_indexer(b: Bound, pool: list[Module], H: int, nh: int | None, o: Module | None) -> None:
    mixer = b.part
    gate = next((m for m in pool if len(m.shape) == 2 and m.shape[1] == H and o is not None
                 and m.shape[0] == o.shape[1] and not says(m.path, "indexer")), None)
    if gate is not None and mixer.output_gate is None:
        b.roles["g"] = _take(pool, gate)
        mixer.output_gate = "sigmoid_g_proj"
        mixer.evidence.append(ev(gate, f"[{gate.shape[0]}, H] beside the output projection: a gate on the "
                                       "attention output"))
    hg = next((m for m in pool if nh and m.shape == (nh, H) and not says(m.path, "indexer")), None)
    if hg is not None:
        b.roles["head_gate"] = _take(pool, hg)
        mixer.layout["head_gate"] = list(hg.shape)
    idx = [m for m in pool if says(m.path, "indexer")]
    if idx:
        # DSA: a key norm [d] (+ bias), the key projection [d, H] beside it, per-head weights [heads, H], and the
        # query projection [heads * d, latent] that reads something narrower than H (the q-LoRA latent)
        mixer.indexer = {"index_topk": None, "index_heads": None, "index_dim": None}
        norm = next((m for m in idx if len(m.shape) == 1), None)
        d = norm.shape[0] if norm is not None else None
        wk = next((m for m in idx if d and m.shape == (d, H)), None)
        wts = next((m for m in idx if len(m.shape) == 2 and m.shape[1] == H and m is not wk), None)
        wq = next((m for m in idx if len(m.shape) == 2 and m.shape[1] != H), None)
        if wts is not None and wq is not None and d and wq.shape[0] == wts.shape[0] * d:
            mixer.indexer.update(index_heads=wts.shape[0], index_dim=d)
            for role, m in (("wq_b", wq), ("wk", wk), ("k_norm", norm), ("weights_proj", wts)):
                b.roles[f"indexer.{role}"] = _take(pool, m)
        for m in [m for m in idx if m in pool]:      # a layout the shapes do not explain keeps its leaf
            b.roles[f"indexer.{m.path.split('indexer.', 1)[-1]}"] = _take(pool, m)


def has_mixer_signature(mods: list[Module], H: int) -> bool:
    """Convs, a rank bottleneck, or three or more readers of H: a mixer (an MLP has at most two)."""
    if any(len(m.shape) == 3 and m.shape[1] == 1 and m.shape[2] > 1 for m in mods):
        return True
    mats = [m for m in mods if mat(m) is not None and len(m.shape) == 2]
    for transposed in (False, True):
        readers, writers = split_io(mats, H, transposed)
        if len(readers) >= 3 and writers:
            return True
    return False
