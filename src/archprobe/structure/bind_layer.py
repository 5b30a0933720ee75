"""One decoder layer bound: its modules split into the mixer's and the FFN's by signature, the norms
and the residual from what is left.

Submodules (the first path component under the layer, or the loose modules at its root) are classed
by shape: an expert bank is an FFN; convolutions, a rank bottleneck or three or more readers of H
are a mixer; readers and one writer that close an H -> W -> H loop are an MLP. Names only decide a
group the shapes leave open. Norms are the 1-D [H] vectors left over: their number fixes the placement
(1: a parallel block, 2: pre-mixer / pre-FFN, 4: sandwich), names break ties in their order. Two [1, H]
pseudo-queries with their [H] norms are Attention Residuals; a vector whose length grows with depth is
a DenseFormer depth weight; leftover scalars or [H] gates named as such are gated residuals.
"""

from __future__ import annotations

from archprobe.kinds.moa import has_moa
from archprobe.structure.bind_ffn import Bound, bind_dense, bind_flat_moe, bind_moe, ev, has_bank
from archprobe.structure.bind_mixer import bind_mixer, has_mixer_signature
from archprobe.structure.card import Ffn, Layer, Mixer, Norm, Residual, Shared
from archprobe.structure.modules import Module, group_modules
from archprobe.structure.names import WORDS, words
from archprobe.structure.widths import mat, mlp_roles

MIXER_WORDS = WORDS["mixer_block"]
FFN_WORDS = WORDS["ffn_block"]
PLACEMENT_WORDS = {p: WORDS[p] for p in ("pre_mixer", "post_mixer", "pre_ffn", "post_ffn")}
EMBED_NORM_WORDS = WORDS["block0_embed_norm"]
GATE_WORDS = WORDS["residual_scale"]


def _groups(mods: dict[str, Module]) -> dict[str, list[Module]]:
    out: dict[str, list[Module]] = {}
    for m in mods.values():
        out.setdefault(m.head if "." in m.path else "", []).append(m)
    return out


def _classify(head: str, group: list[Module], H: int, cfg) -> str:
    if _kind_ffn(group, H, cfg) is not None:     # an FFN mechanism that knows itself (kinds/rwkv_channel.py)
        return "ffn"
    if has_moa(group, H):        # an expert bank of attention projections (JetMoE's MoA) is a mixer
        return "mixer"
    if has_bank(group) or (words(head) & FFN_WORDS and has_bank(group, H)):
        return "ffn"
    if has_mixer_signature(group, H):
        return "mixer"
    mats = [m for m in group if mat(m) is not None and len(m.shape) == 2 and m.shape != (1, H)]
    r = mlp_roles(mats, H) if mats else None
    if r is not None:
        # one fused reader twice the writer's width is a gate_up MLP or a GQA qkv ((nh + 2 kvh) hd = 2 nh hd):
        # the config's head counts decide, then the group's name
        if "gate_up" in r and not words(head) & FFN_WORDS and (
                words(head) & (MIXER_WORDS - {"mixer"}) or _is_qkv(r["gate_up"], H, cfg)):
            return "mixer"
        return "ffn"
    if mats:
        w = words(head)
        if w & FFN_WORDS:
            return "ffn"
        return "mixer"
    return "loose"


def _kind_ffn(group: list[Module], H: int, cfg) -> Bound | None:
    """An FFN mechanism's own detector (kinds/: its `detect`), tried before the built-in dense / MoE ones."""
    from archprobe.kinds import FFNS

    return next((b for k in FFNS.values() if k.detect is not None and (b := k.detect(group, H, cfg))), None)


def _is_qkv(m: Module, H: int, cfg) -> bool:
    nh = cfg.first_int("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads")
    kvh = cfg.first_int("num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num", "n_head_kv")
    hd = cfg.first_int("head_dim") or (H // nh if nh else None)
    return bool(nh and kvh and hd and max(m.shape) == (nh + 2 * kvh) * hd)


def bind_layer(index: int, layer: dict, H: int, cfg, notes: list[str]) -> tuple[Layer, dict[str, Module], list[Module]]:
    """(Layer, layer-relative role -> module, unexplained modules)."""
    mods = group_modules(layer)
    groups = _groups(mods)
    out = Layer(index, Mixer("none"), Ffn("none"))
    roles: dict[str, Module] = {}
    unexplained: list[Module] = []
    loose: list[Module] = list(groups.pop("", []))
    root_mats = [m for m in loose if mat(m) is not None and len(m.shape) == 2 and m.shape != (1, H)]
    kinds = {head: _classify(head, g, H, cfg) for head, g in groups.items()}
    if root_mats:
        groups["<root>"] = root_mats
        kinds["<root>"] = _classify("", root_mats, H, cfg)
        loose = [m for m in loose if m not in root_mats]
    mixer_done = ffn_done = False
    ffn_head = None
    for head, group in groups.items():
        kind = kinds[head]
        bound: Bound | None = None
        if kind == "mixer" and mixer_done and out.parallel_mixer is None:
            bound = bind_mixer(group, H, cfg)           # a second mixer on the same input (Falcon-H1)
            if bound is not None:
                out.parallel_mixer = bound.part
                prefix = "parallel_mixer."
        elif kind == "mixer" and not mixer_done:
            bound = bind_mixer(group, H, cfg)
            if bound is not None:
                out.mixer, mixer_done = bound.part, True
                prefix = "mixer."
        elif kind == "ffn" and ffn_done and out.ffn.kind in ("moe", "latent_moe") and out.ffn.shared is None:
            # an always-on MLP in a group of its own beside the routed experts (Granite's shared_mlp)
            bound = bind_dense([m for m in group if len(m.shape) == 2], H)
            if bound is not None:
                dense = bound.part
                out.ffn.shared = Shared(count=1, width=dense.width, gated=None)
                out.ffn.evidence.append(ev(next(iter(bound.roles.values())), f"always-on expert MLP, {dense.width} "
                                                                               "wide"))
                bound.roles = {f"shared.{r}": m for r, m in bound.roles.items()}
                prefix = "ffn."
        elif kind == "ffn" and not ffn_done:
            bound = _kind_ffn(group, H, cfg) or (bind_moe(group, H) if has_bank(group) else (
                bind_flat_moe(group, H) if has_bank(group, H) else None) or bind_dense(
                [m for m in group if len(m.shape) == 2], H, cfg.default("conv1d_transposed")))
            if bound is not None:
                if bound.part.kind == "dense":
                    bound.leftover += [m for m in group if len(m.shape) != 2]
                out.ffn, ffn_done = bound.part, True
                prefix = "ffn."
                ffn_head = head
        if bound is None:
            loose += [m for m in group if len(m.shape) <= 1 or m.shape == (1, H)]
            unexplained += [m for m in group if not (len(m.shape) <= 1 or m.shape == (1, H))]
            continue
        roles.update({prefix + r: m for r, m in bound.roles.items() if m is not None})
        for m in bound.leftover:
            role = _part_extra(bound.part, m, prefix, H)
            if role is not None and role in roles and role.endswith("sub_norm"):
                role = f"{prefix}scale.{m.leaf}"        # more than one inner-width vector: learned scales (Dory)
            if role is not None and role not in roles:
                roles[role] = m
            elif (head == "<root>" and (len(m.shape) <= 1 or m.shape == (1, H))) or m.shape == (H,):
                loose.append(m)       # a norm kept inside the mixer's container (DBRX's norm_attn_norm)
            else:
                unexplained.append(m)
    E = out.ffn.num_experts if out.ffn.kind in ("moe", "latent_moe") else None
    ob = next((m for m in loose if E and m.path == ffn_head and m.shape == (H,) and m.weight_leaf == "bias"), None)
    if ob is not None and "ffn.out" not in roles:     # `mlp.bias` [H]: the MoE's output bias (JetMoE)
        roles["ffn.out"] = ob
        loose = [m for m in loose if m is not ob]
    sel = next((m for m in loose + unexplained if E and m.shape == (E,)), None)
    if sel is not None and not out.ffn.router.selection_bias and "ffn.router.bias" not in roles:
        roles["ffn.router.bias"] = sel          # a selection bias kept in a container of its own (Kolibri)
        out.ffn.router.selection_bias = True
        loose = [m for m in loose if m is not sel]
        unexplained = [m for m in unexplained if m is not sel]
    if out.mixer.kind == "none" and out.ffn.kind == "none" and unexplained:
        out.mixer = Mixer("unknown")
    _norms_and_residual(out, loose, H, cfg, roles, unexplained, index)
    return out, roles, unexplained


def _part_extra(part, m: Module, prefix: str, H: int) -> str | None:
    """A leftover inside a bound part that its shape explains: a sub-norm on the part's inner width
    (BitNet), an output bias stored apart from o (named so), or a learnable activation scalar (xIELU's
    alpha/beta) inside an FFN."""
    inner = {getattr(part, "width", None), getattr(part, "expert_width", None)} - {None}
    if isinstance(part, Mixer):
        o_in = part.num_heads * part.head_dim if part.num_heads and part.head_dim else None
        inner = {o_in, part.v_head_dim and part.num_heads and part.v_head_dim * part.num_heads} - {None, 0}
    if isinstance(part, Mixer) and m.shape == (H,) and (words(m.path) | set(m.leaf.split("_"))) & WORDS["bias"]:
        return f"{prefix}o.bias"      # the output projection's bias kept beside it (GPT-NeoX-Japanese dense_bias)
    if m.shape == (H,) and any(words(m.path) & names for names in PLACEMENT_WORDS.values()):
        return None     # a layer norm kept in the part's container (DBRX's norm_attn_norm.norm_1 / norm_2)
    if len(m.shape) == 1 and m.shape[0] in inner:
        return f"{prefix}sub_norm"
    if isinstance(part, Ffn) and m.weight is not None and m.weight.info.numel <= 1:
        return f"{prefix}act.{m.leaf}"
    return None


def _norms_and_residual(out: Layer, loose: list[Module], H: int, cfg, roles: dict, unexplained: list,
                        index: int) -> None:
    queries = [m for m in loose if m.shape == (1, H)]
    vecs = [m for m in loose if m.shape == (H,)]
    other = [m for m in loose if m not in queries and m not in vecs]
    if len(queries) >= 2:                      # Attention Residuals: a pseudo-query and its norm per site
        qs = sorted(queries, key=lambda m: (not words(m.path) & WORDS["attn_residual_query"],
                                            m.path))[:2]
        for site, q in zip(("pre_mixer", "pre_ffn"), qs, strict=False):
            roles[f"residual.{site}.query"] = q
            norm = max(vecs, key=lambda v: (common_prefix_len(v.path, q.path), v.path), default=None) if vecs else None
            if norm is not None and common_prefix_len(norm.path, q.path) > 0 and len(vecs) > 2:
                vecs.remove(norm)
                roles[f"residual.{site}.norm"] = norm
        queries = [q for q in queries if q not in qs]
        out.residual = Residual("attnres", block_size=cfg.first_int("attn_res_block_size"))
    other += queries
    # a norm on the embeddings kept inside the first block (RWKV's blocks.0.pre_ln): the model's, not the layer's
    emb = [v for v in vecs if words(v.path) & EMBED_NORM_WORDS] if index == 0 and len(vecs) == 3 else []
    if len(emb) == 1:
        roles["embed_norm"] = emb[0]
        vecs.remove(emb[0])
    # norms
    layer_norm = _norm_kind(cfg)
    placements = _placements(vecs, cfg, out)
    for place, m in placements.items():
        roles[f"norm.{place}"] = m
        out.norm[place] = Norm(kind="layer" if m.bias is not None else layer_norm,
                               eps=norm_eps(cfg),
                               offset=bool(cfg.default("norm_offset")) or None, bias=m.bias is not None)
    if not placements and weightless_norm(cfg):   # OLMo: parameter-free LayerNorms, no tensor to see
        for place, part in (("pre_mixer", out.mixer), ("pre_ffn", out.ffn)):
            if part.kind != "none":
                out.norm[place] = Norm(kind=weightless_norm(cfg), eps=norm_eps(cfg), bias=False)
    vecs = [v for v in vecs if v not in placements.values()]
    other += vecs
    for m in other:
        w = words(m.path)
        if len(m.shape) == 1 and m.shape[0] in (index + 1, index + 2) and 2 <= m.shape[0] != H:
            roles["residual.depth_weights"] = m
            out.residual = Residual("depth_weights")
        elif len(m.shape) <= 1 and m.shape in ((), (1,), (H,)) and w & GATE_WORDS:
            roles[f"residual.gate.{m.leaf}"] = m
            if out.residual.kind == "identity":
                out.residual = Residual("gated")
        else:
            unexplained.append(m)


def common_prefix_len(a: str, b: str) -> int:
    """Characters two module paths share from the start (the nearer of two norms to a projection)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


NORM_EPS_KEYS = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps", "layernorm_epsilon",
                 "norm_epsilon")


def weightless_norm(cfg) -> str | None:
    """The kind of norm a model applies without parameters (so without tensors): the family's row (OLMo's
    LayerNorm, nanochat's RMSNorm), or a LayerNorm when the config turns its affine parameters off (OPT's
    layer_norm_elementwise_affine false; its pre-norm placement: a post-norm one is not read from this)."""
    if cfg.default("weightless_norm"):
        return cfg.default("weightless_norm")
    if cfg.get("layer_norm_elementwise_affine") is False and cfg.get("do_layer_norm_before") is not False:
        return "layer"
    return None


def norm_eps(cfg) -> float | None:
    """The norms' eps from its config key, else the family's hard-coded one (OPT's torch default); a family
    whose modeling file ignores the key (BioGPT's nn.LayerNorm(d) beside layer_norm_eps) has it fixed."""
    if cfg.default("norm_eps_fixed") is not None:
        return cfg.default("norm_eps_fixed")
    eps = cfg.first_float(*NORM_EPS_KEYS)
    return eps if eps is not None else cfg.default("norm_eps")


def _norm_kind(cfg) -> str:
    if cfg.default("norm_kind"):      # a bias-free LayerNorm the config has no key for (DBRX)
        return cfg.default("norm_kind")
    if cfg.get("rms_norm_eps") is not None or "rms" in str(cfg.get("norm_type", "")).lower():
        return "rms"
    if any(cfg.get(k) is not None for k in ("layer_norm_eps", "layer_norm_epsilon", "layernorm_epsilon",
                                            "norm_epsilon")):
        return "layer"
    return "rms"


MIXER_SIDE = WORDS["mixer_side"]
FFN_SIDE = WORDS["ffn_side"]


def _mixer_side(m: Module) -> int:
    """How much a norm's name says "before the mixer" rather than "before the FFN" (a tie-break only)."""
    w = words(m.path) | {m.leaf}
    return len(w & MIXER_SIDE) - len(w & FFN_SIDE)


def _placements(vecs: list[Module], cfg, out: Layer) -> dict[str, Module]:
    """Placement -> norm module, from how many [H] norms the layer has; names order them."""
    has_mixer, has_ffn = out.mixer.kind != "none", out.ffn.kind != "none"
    n = len(vecs)
    if n == 0:
        return {}
    if n == 1:
        if has_mixer and has_ffn:
            out.parallel = True
        return {"pre_mixer" if has_mixer or not has_ffn else "pre_ffn": vecs[0]}
    if n == 2:
        # a norm named after the FFN's output (OLMo 2's post_feedforward_layernorm) makes the pair post-norms
        # (apply_residual_connection_post_layernorm does not: pre-norms whose output is the residual, derive.py)
        post = any((words(m.path) | {m.leaf}) & PLACEMENT_WORDS["post_ffn"] for m in vecs)
        a, b = sorted(vecs, key=lambda m: (-_mixer_side(m), m.path))
        if cfg.get("do_layer_norm_before") is False or cfg.default("post_ln"):   # OPT-350m, GPT-1: norm(x + f(x))
            return {"post_mixer_sum": a, "post_ffn_sum": b}
        if bool(cfg.get("parallel_attn")) or cfg.get("use_parallel_residual") is True:
            out.parallel = True
        if post:
            return {"post_mixer": a, "post_ffn": b}
        return {"pre_mixer": a, "pre_ffn": b}
    order = ["pre_mixer", "post_mixer", "pre_ffn", "post_ffn"]
    picked: dict[str, Module] = {}
    rest = list(vecs)
    ambiguous = "post_attention_layernorm"   # Llama: before the FFN; Gemma 2: after the attention

    def named(m: Module, place: str) -> bool:
        w = words(m.path) | {m.leaf}
        if ambiguous in w:
            return False
        if place.startswith("pre_") and w & WORDS["post"]:      # post_norm1 is not a pre-norm for its "norm1"
            return False
        side, what = place.split("_")          # composed names: pre_mlp_layernorm, post_self_attn_norm, ...
        composed = side in w and bool(w & ({"mlp", "ffn", "feedforward", "moe"} if what == "ffn" else
                                           {"attn", "attention", "mixer"}))
        return composed or bool(w & PLACEMENT_WORDS[place])

    for place in order:          # unambiguous names first
        hit = next((m for m in rest if named(m, place)), None)
        if hit is not None:
            picked[place] = hit
            rest.remove(hit)
    numbered = sorted((m for m in rest if words(m.path) & WORDS["post"] and m.path[-1:] in "12"), key=lambda m: m.path)
    for place, m in zip(("post_mixer", "post_ffn"), numbered, strict=False):   # Peri-LN's post_norm1 / post_norm2
        if place not in picked:
            picked[place] = m
            rest.remove(m)
    amb = next((m for m in rest if ambiguous in words(m.path)), None)
    if amb is not None:          # Llama's meaning (before the FFN) unless a neighbour already holds that place
        place = "post_mixer" if "pre_ffn" in picked else "pre_ffn"
        if place not in picked:
            picked[place] = amb
            rest.remove(amb)
    for place, sign in (("post_mixer", 1), ("post_ffn", -1)):    # post_<mixer word>_norm, post_<ffn word>_norm (LFM3)
        side = lambda m: len(words(m.path) & MIXER_SIDE) - len(words(m.path) & (FFN_SIDE - WORDS["post"]))  # noqa: E731
        hit = next((m for m in rest if words(m.path) & WORDS["post"] and side(m) * sign > 0), None)
        if place not in picked and hit is not None:
            picked[place] = hit
            rest.remove(hit)
    for place in order:
        if place not in picked and rest:
            picked[place] = rest.pop(0)
    return picked


def describe(m: Module, why: str) -> dict:
    return ev(m, why)
