"""The card -> the HybridConfig it describes: every number from a card field, presence from a card role.

Nothing here knows a family: each mixer kind's spec (archprobe.kinds) reads its module's arguments from the
card (its `fields` hook, which uses this module's readers: `need_field`, `card_rope`, `yarn_mscale`,
`head_gate_kind`) into `HybridConfig.mixer_args`, under the kind's own names; the FFN, norms and residual are
read here.

Refusals are data: a field validate needs that the card leaves unknown raises `NeedsField` (the CLI
prints it in one line with how to set it with `--card`); a mechanism archprobe.nn does not implement
raises `Unsupported` naming the one missing piece.
"""

from __future__ import annotations

import math

from archprobe import kinds
from archprobe.errors import ArchprobeError
from archprobe.kinds import FFNS as FFN_KINDS

# the norm placements archprobe.nn's DecoderLayer has (and their modules), the latent MoE's module names
NORM_MODULES = {"pre_mixer": "input_layernorm", "pre_ffn": "post_attention_layernorm",
                "post_mixer": "post_mixer_norm", "post_ffn": "post_ffn_norm",
                "post_mixer_sum": "post_mixer_sum_norm", "post_ffn_sum": "post_ffn_sum_norm"}
LATENT_NAMES = ("latent_down", "latent_up", "latent_norm")


class Unsupported(ArchprobeError):
    """The card describes something archprobe.nn cannot run (yet); the message names the one piece."""


class NeedsField(ArchprobeError):
    """A field validate needs is `unknown` on the card."""

    def __init__(self, path: str, what: str = ""):
        super().__init__(f"validate needs card field {path}{' (' + what + ')' if what else ''}, which the card "
                         f"leaves unknown", hint=f"write the card (archprobe card SOURCE -o card.yaml), set "
                         f"`{path}: <value>`, and pass --card card.yaml")
        self.path = path


def need_field(value, path: str, what: str = ""):
    if value is None:
        raise NeedsField(path, what)
    return value


def _norm_kind(norm, path: str, has_weight: bool, has_bias: bool) -> str:
    kind = need_field(getattr(norm, "kind", None), f"{path}.kind", "rms or layer")
    offset = bool(getattr(norm, "offset", False))
    if kind == "rms":
        if not has_weight:
            return "rms_noweight"
        if has_bias:
            raise Unsupported(f"{path}: an RMSNorm with a bias")
        return "zero_centered" if offset else "rms"
    if kind == "layer":
        if not has_weight:
            return "layer_noweight"
        if offset:
            if not has_bias:
                raise Unsupported(f"{path}: a (1 + w) LayerNorm without a bias")
            return "layer_offset"
        return "layer" if has_bias else "layer_nobias"
    raise Unsupported(f"{path}.kind {kind!r}: archprobe.nn knows rms and layer norms")


def card_rope(card, head_dim: int | None, rope_dim: int | None = None, layer: int | None = None):
    """The Rope of layer `layer` (its mixer's layer_rope over the model's) for a head of `head_dim` (or
    exactly `rope_dim` channels for MLA). A layer rope naming its own type brings its own scaling."""
    from archprobe.nn.rope import ROPE_TYPES, Rope

    own = card.layers[layer].mixer.layer_rope if layer is not None else None
    r = card.rope
    if own is not None:   # a layer rope with a type is a whole rope dict (rope_parameters[layer type])
        merged = {name: getattr(own, name) if getattr(own, name) is not None else getattr(r, name)
                  for name in ("theta", "type", "interleaved", "inverse")}
        scaled = own if own.type is not None else r
        r = type(r)(factor=scaled.factor, original_max_position=scaled.original_max_position,
                    scaling=scaled.scaling, partial_rotary_factor=scaled.partial_rotary_factor, **merged)
    theta = need_field(r.theta, "rope.theta", "the rotary base; or embed.pos_kind none / layers.N.mixer.rope false "
                  "for attention without rope")
    kind = r.type or "default"
    if kind not in ROPE_TYPES:
        raise Unsupported(f"rope.type {kind!r} (archprobe.nn knows {', '.join(ROPE_TYPES)})")
    params = dict(r.scaling or {})   # the card's raw rope dict: factors and lists the fields do not name
    if rope_dim is None and kind == "proportional":   # the whole head; the fraction picks frequencies
        if r.partial_rotary_factor is not None:
            params["partial_rotary_factor"] = r.partial_rotary_factor
        dim = head_dim
    elif rope_dim is None:
        fraction = r.partial_rotary_factor
        if fraction is None:
            fraction = params.get("partial_rotary_factor", 1.0)
        dim = int(head_dim * fraction)
    else:
        dim = rope_dim
    if r.factor is not None:
        params["factor"] = r.factor
    if r.original_max_position is not None:
        params["original_max_position_embeddings"] = r.original_max_position
    rope = Rope(float(theta), dim - dim % 2, kind, params, bool(r.interleaved), card.max_position_embeddings,
                bool(r.inverse))
    try:
        rope.inv_freq(1)
    except ValueError as exc:   # "rope type 'longrope' needs short_factor"
        key = str(exc).rsplit(" ", 1)[-1]
        raise NeedsField(f"rope.scaling.{key}", f"rope type {kind}") from None
    return rope


def yarn_mscale(card) -> float:
    """DeepSeek's MLA multiplies its softmax scale by mscale(factor, mscale_all_dim)^2 under YaRN."""
    r = card.rope
    params = r.scaling or {}
    m_all = params.get("mscale_all_dim")
    factor = r.factor or params.get("factor")
    if (r.type or "default") != "yarn" or not m_all or not factor or factor <= 1:
        return 1.0
    return (0.1 * m_all * math.log(factor) + 1.0) ** 2


def head_gate_kind(m, p: str) -> str:
    """A per-head output gate's activation: sigmoid or softplus, from the family (no config key says it)."""
    act = need_field((m.layout or {}).get("head_gate_act"), f"{p}.mixer.layout.head_gate_act",
                "sigmoid or softplus: the per-head output gate's activation")
    if act not in ("sigmoid", "softplus"):
        raise Unsupported(f"{p}.mixer.layout.head_gate_act {act!r}")
    return act


def _mixer_kind(kind: str, path: str):
    """The registry's spec for a card's mixer kind (None: no mixer); a kind without an nn module is refused."""
    if kind == "none":
        return None
    if kind == "unknown":
        raise NeedsField(f"{path}.kind", "gqa, mla, kda, gated_deltanet, mamba2 or none")
    spec = kinds.MIXERS.get(kind)
    if spec is None or spec.fields is None or spec.build is None:
        raise Unsupported(f"{path}.kind {kind!r}: no archprobe.nn module for this mixer")
    return spec


def _args_owner(kind: str) -> str:
    """The kind whose arguments a mixer type runs on (`swa` on GQA's): its key in HybridConfig.mixer_args."""
    return kinds.BY_NN_KIND[kind].name


def _layer_fields(card, i: int, roles: set[str]) -> dict:
    """The HybridConfig fields layer i needs (its mixer's arguments under `mixer_args`), from its card part (every
    value from a field or a role)."""
    layer = card.layers[i]
    m, f = layer.mixer, layer.ffn
    p = f"layers.{i}"
    has = lambda leaf: f"{p}.{leaf}" in roles  # noqa: E731
    out: dict = {"mixer": "none"}
    spec = _mixer_kind(m.kind, f"{p}.mixer")
    if spec is not None:      # the mixer's own arguments, under its builder's name: its kind's hook (kinds/<kind>.py)
        args: dict = {}
        out["mixer"] = spec.fields(card, i, has, args) or spec.nn_kind
        out["mixer_args"] = {_args_owner(out["mixer"]): args}
    pm = layer.parallel_mixer
    if pm is not None and pm.kind != "none":     # a second mixer on the same input (Falcon-H1): its own fields
        out["parallel_mixer"] = _parallel_fields(card, i, roles, out)
    # FFN
    fk = f.kind
    ffn_spec = FFN_KINDS.get(fk)
    if ffn_spec is not None and ffn_spec.build is not None:   # an FFN mechanism's own nn module (kinds/)
        out["ffn"] = fk
        out["intermediate_size"] = need_field(f.width, f"{p}.ffn.width")
        fk = "none"      # nothing of the built-in MLP / MoE fields below
    if fk == "unknown":
        raise NeedsField(f"{p}.ffn.kind", "dense, moe, latent_moe or none")
    if fk not in ("dense", "moe", "latent_moe", "none"):
        raise Unsupported(f"{p}.ffn.kind {fk!r}")
    out.setdefault("ffn", fk)
    if fk != "none":
        from archprobe.nn.activations import ACTIVATIONS, LEARNED

        act = need_field(f.activation, f"{p}.ffn.activation")
        if act not in ACTIVATIONS:
            raise Unsupported(f"{p}.ffn.activation {act!r} (archprobe.nn knows {', '.join(ACTIVATIONS)})")
        if act in LEARNED and fk != "dense":
            raise Unsupported(f"{p}.ffn.activation {act!r} with learned parameters in a routed expert bank")
        if has("ffn.sub_norm") and fk != "dense":
            raise Unsupported(f"{p}.ffn.sub_norm in a routed expert bank")
        out["ffn_sub_norm"] = has("ffn.sub_norm")
        out.update(hidden_act=act, gated_ffn=need_field(f.gated, f"{p}.ffn.gated"),
                   mlp_bias=bool(f.bias) or has("ffn.down.bias") or has("ffn.shared.down.bias"))
        if act == "swiglu_oss" and getattr(f, "glu_limit", None) is not None:
            out["glu_limit"] = f.glu_limit
        if act == "swiglu_oss" and f.glu_alpha not in (None, 1.702):
            raise Unsupported(f"{p}.ffn.glu_alpha {f.glu_alpha} (archprobe.nn's swiglu_oss uses 1.702)")
    if fk == "dense":
        out["intermediate_size"] = need_field(f.width, f"{p}.ffn.width")
    elif fk in ("moe", "latent_moe"):
        r = f.router
        score = need_field(r.scoring, f"{p}.ffn.router.scoring", "softmax, sigmoid or sparsemixer")
        if score not in ("softmax", "sigmoid", "sparsemixer"):
            raise Unsupported(f"{p}.ffn.router.scoring {score!r}")
        if score == "sparsemixer":    # PhiMoE: weights come from the band softmax, never renormalised
            out["moe_sparsemixer_eps"] = need_field(r.sparsemixer_eps, f"{p}.ffn.router.sparsemixer_eps")
        if r.weight_on not in (None, "output", "input"):
            raise Unsupported(f"{p}.ffn.router.weight_on {r.weight_on!r}")
        out["moe_weight_on"] = r.weight_on or "output"
        if r.bias_on not in (None, "scores", "logits"):
            raise Unsupported(f"{p}.ffn.router.bias_on {r.bias_on!r}")
        out["moe_bias_on_logits"] = r.bias_on == "logits"
        sel = bool(r.selection_bias)
        out.update(num_experts=need_field(f.num_experts, f"{p}.ffn.num_experts"),
                   num_experts_per_token=need_field(f.top_k, f"{p}.ffn.top_k"),
                   moe_intermediate_size=need_field(f.expert_width, f"{p}.ffn.expert_width"),
                   moe_router_activation_func=score, moe_router_bias=sel,
                   router_logit_bias=has("ffn.router.bias") and not sel,
                   moe_renormalize=False if score == "sparsemixer" else need_field(r.renormalize,
                                                                               f"{p}.ffn.router.renormalize"),
                   routed_scaling_factor=r.scaling if r.scaling is not None else 1.0,
                   n_group=r.n_group or 1, topk_group=r.topk_group or 1,
                   group_score=r.group_score or "top2_sum",
                   moe_routing_space=r.input or "hidden",
                   expert_bias=has("ffn.experts.gate_up.bias") or has("ffn.experts.down.bias"),
                   moe_out_bias=has("ffn.out#bias"))
        shared = f.shared   # width: all shared experts together (one MLP of that width)
        width = 0
        if shared is not None and (shared.count or shared.width):
            width = need_field(shared.width, f"{p}.ffn.shared.width")
        out.update(shared_expert_width=width, shared_expert_gate=has("ffn.shared_gate"))
        if shared is not None and shared.combine not in (None, "sum", "average"):
            raise Unsupported(f"{p}.ffn.shared.combine {shared.combine!r}")
        out["shared_combine"] = (shared.combine if shared is not None else None) or "sum"
        if fk == "latent_moe":
            out.update(routed_expert_hidden_size=need_field(f.latent_size, f"{p}.ffn.latent_size"),
                       latent_moe_use_norm=has("ffn.latent_norm"), latent_names=LATENT_NAMES)
    # norms and their placement
    placements = set(layer.norm)
    for placement in placements - set(NORM_MODULES):
        if placement != "latent":
            raise Unsupported(f"{p}.norm.{placement}: a norm placement archprobe.nn does not know")
    if layer.parallel and placements & {"post_mixer_sum", "post_ffn_sum"}:
        raise Unsupported(f"{p}: a parallel block with post-LN norms after the residual add")
    if layer.parallel:
        out["block"] = "parallel" if "pre_ffn" in placements else "parallel_shared"
    elif "post_mixer" in placements or "post_ffn" in placements:
        out["block"] = "sandwich" if "pre_mixer" in placements or "pre_ffn" in placements else "post"
    else:
        out["block"] = "pre"
    kinds, eps = set(), set()
    out["norm_placements"] = tuple(sorted(placements & set(NORM_MODULES)))
    for placement in out["norm_placements"]:
        norm = layer.norm[placement]
        kinds.add(_norm_kind(norm, f"{p}.norm.{placement}", has(f"norm.{placement}"), has(f"norm.{placement}.bias")))
        eps.add(need_field(norm.eps, f"{p}.norm.{placement}.eps"))
    if len(kinds) > 1 or len(eps) > 1:
        raise Unsupported(f"{p}.norm: different norm kinds or eps in one layer ({sorted(kinds)}, {sorted(eps)})")
    if kinds:
        out["norm_style"], out["rms_norm_eps"] = kinds.pop(), eps.pop()
    residual = layer.residual.kind
    if residual == "from_norm":       # the residual is the normed stream (MiniMax-01)
        if out["block"] != "pre":
            raise Unsupported(f"{p}.residual.kind from_norm with a {out['block']} block")
        out["block"], residual = "norm_residual", "identity"
        sc = layer.residual.scales or {}
        out["norm_residual_scales"] = (*sc.get("mixer", (1.0, 1.0)), *sc.get("ffn", (1.0, 1.0)))
    if residual not in ("identity", "attnres", "depth_weights"):
        raise Unsupported(f"{p}.residual.kind {residual!r} from a card")
    if residual == "attnres":
        out.update(residual="attnres_block" if layer.residual.block_size else "attnres_full",
                   attn_res_block_size=layer.residual.block_size)
    elif residual == "depth_weights":
        out["residual"] = "depth_weights"
    mult = getattr(layer.residual, "multiplier", None)
    if mult is not None:
        out["residual_multiplier"] = mult
    return out


def _parallel_fields(card, i: int, roles: set[str], out: dict) -> str:
    """Layer i's parallel mixer read as if it were the layer's mixer: its kind, and its fields merged into
    `out` (the two mixers' fields are disjoint, e.g. attention heads beside Mamba-2 heads)."""
    import copy

    p = f"layers.{i}"
    layer = copy.copy(card.layers[i])
    layer.mixer, layer.parallel_mixer = card.layers[i].parallel_mixer, None
    view = copy.copy(card)
    view.layers = list(card.layers)
    view.layers[i] = layer
    alt = {r.replace(f"{p}.parallel_mixer.", f"{p}.mixer.") for r in roles if not r.startswith(f"{p}.mixer.")}
    got = _layer_fields(view, i, alt)
    kind = got.pop("mixer")
    if kind == "none":
        return kind
    for k, v in got.pop("mixer_args", {}).items():      # each mixer's arguments under its own kind
        if out.setdefault("mixer_args", {}).setdefault(k, v) != v:
            raise Unsupported(f"{p}.parallel_mixer: {k}'s arguments differ between the layer's two mixers")
    for k, v in got.items():
        if k in out and out[k] != v:
            raise Unsupported(f"{p}.parallel_mixer: {k} differs between the layer's two mixers")
        out[k] = v
    return kind


def config_fields(card, n_run: int | None = None) -> dict:
    """The HybridConfig keyword arguments `card` describes; raises NeedsField / Unsupported. Layers from
    `n_run` on never run (validate --layers) and are planned as empty."""
    roles = set(card.tensors)
    n = len(card.layers)
    if not n:
        raise NeedsField("layers", "the card has no layers")
    hidden = need_field(card.hidden_size, "hidden_size")
    vocab = need_field(card.vocab_size, "vocab_size")
    n_run = n if n_run is None else n_run
    per = [_layer_fields(card, i, _expanded_roles(roles, i)) for i in range(n_run)]
    per += [{"mixer": "none", "ffn": "none"} for _ in range(n - n_run)]
    mixers = tuple(f.pop("mixer") for f in per)
    parallel = tuple(f.pop("parallel_mixer", "none") for f in per)
    ffns = tuple(f.pop("ffn") for f in per)
    residuals = {f.get("residual", "prenorm") for f in per}
    if len(residuals) > 1:
        raise Unsupported(f"a mix of residual kinds across layers ({sorted(residuals)})")
    for i, kind in enumerate(ffns):     # a stateful FFN runs only in some blocks: refused before any layer builds
        if kind in FFN_KINDS and FFN_KINDS[kind].recurrent:
            from archprobe.nn.decoder import check_stateful_ffn

            try:
                check_stateful_ffn(per[i].get("block", "pre"), per[i].get("residual", "prenorm"), i, kind)
            except ValueError as exc:
                raise Unsupported(str(exc)) from None
    base = dict(per[0])
    overrides = {i: _differences(base, f) for i, f in enumerate(per)}
    overrides = {i: o for i, o in overrides.items() if o}
    fn = card.final_norm
    final_norm = fn is not None and fn.kind is not None
    if final_norm:
        final_kind = _norm_kind(fn, "final_norm", "final_norm" in roles, "final_norm.bias" in roles)
        final_eps = need_field(fn.eps, "final_norm.eps")
        if base.get("norm_style", final_kind) != final_kind or base.get("rms_norm_eps", final_eps) != final_eps:
            raise Unsupported(f"final_norm ({final_kind}, eps {final_eps}) differs from the layers' norms")
        base.setdefault("norm_style", final_kind)
        base.setdefault("rms_norm_eps", final_eps)
    embed = card.embed
    pos = embed.pos_kind
    learned = 0
    if pos == "learned" or "pos_embed" in roles:
        learned = -1   # filled from the stored table's rows by the loader
    head = card.head
    tied = bool(card.tie_word_embeddings or head.tied) and "head" not in roles
    cfg_fields = dict(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=n, mixer_types=mixers, ffn_types=ffns,
        parallel_mixer_types=parallel,
        tie_word_embeddings=tied, final_norm=final_norm, embed_scale=embed.scale or 1.0,
        embed_norm="embed_norm" in roles or bool(getattr(embed, "norm", None)), head_bias="head.bias" in roles,
        final_softcap=head.soft_cap, logit_scale=getattr(head, "scale", None) or 1.0,
        position_offset=getattr(embed, "position_offset", None) or 0, layer_overrides=overrides,
        **{k: v for k, v in base.items()})
    if learned:
        cfg_fields["learned_positions"] = learned
    if pos == "sinusoidal":
        cfg_fields["sinusoidal_positions"] = need_field(embed.sinusoid, "embed.sinusoid", "vaswani or tensor2tensor")
    if "embed_proj" in roles or "head_proj" in roles:
        cfg_fields["embed_dim"] = -1   # the embedding's own width, read off the stored table by the loader
    # MXFP4 experts (compressed-tensors `weight_packed` U8 without `weight_shape`) stay packed in memory and
    # are dequantized per routed expert, so a streamed MoE layer costs its packed size
    packed = [r for r in roles if ".ffn.experts." in r and r.endswith("#weight_packed")]
    if packed and not any(r.endswith("#weight_shape") for r in roles):
        cfg_fields["expert_storage"] = "mxfp4"
    return cfg_fields


_MISSING = object()


def _differences(base: dict, layer: dict) -> dict:
    """A layer's fields that differ from the base layer's; mixer arguments compared kind by kind, argument by
    argument (HybridConfig.for_layer merges them back the same way)."""
    out = {k: v for k, v in layer.items() if k != "mixer_args" and base.get(k, _MISSING) != v}
    ours = base.get("mixer_args", {})
    args = {kind: {a: v for a, v in kw.items() if ours.get(kind, {}).get(a, _MISSING) != v}
            for kind, kw in layer.get("mixer_args", {}).items()}
    args = {kind: kw for kind, kw in args.items() if kw}
    return {**out, "mixer_args": args} if args else out


def _expanded_roles(roles: set[str], i: int) -> set[str]:
    """Layer i's roles with enumerated experts written `experts.*` kept as is (for presence tests)."""
    prefix = f"layers.{i}."
    out = {r for r in roles if r.startswith(prefix)}
    return out | {r.split("#")[0] for r in out}
