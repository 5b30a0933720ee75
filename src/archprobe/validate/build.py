"""The card -> archprobe.nn: the HybridConfig the card describes and where each bound tensor goes.

Nothing here knows a family: every number comes from a card field, every tensor from a card role
(`layers.3.mixer.q` <- whatever the checkpoint calls it), so a renamed twin or a new family runs the same
way. Each mixer kind's spec (archprobe.kinds) holds its table from role leaves to archprobe.nn parameter
names and reads its module's arguments from the card (`HybridConfig.mixer_args`, under the kind's own
names); storage layouts
the card records (`qkv_split`, `qkv_interleaved`, `gate_up`, `transposed`, `stacked_transposed`) become
`Derived` tensors (split, de-interleaved, transposed, stacked) at load time.

Refusals are data: a field validate needs that the card leaves unknown raises `NeedsField` (the CLI
prints it in one line with how to set it with `--card`); a mechanism archprobe.nn does not implement
raises `Unsupported` naming the one missing piece.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from archprobe import kinds
from archprobe.errors import ArchprobeError
from archprobe.kinds import FFNS as FFN_KINDS

LAYER_ROLE = re.compile(r"^layers\.(\d+)\.(mixer|parallel_mixer|ffn|norm|residual)\.(.+)$")
BARE = ("sinks", "A_log", "D", "dt_bias", "slope_rate", "a_param", "dt_norm", "b_norm", "c_norm", "lambda_q1",
        "lambda_k1", "lambda_q2", "lambda_k2", "experts.q", "experts.o",      # parameters without a `.weight` leaf
        "time_decay", "time_first", "time_mix_key", "time_mix_value", "time_mix_receptance")   # RWKV

# Gated DeltaNet roles stored apart (q/k/v and their convs) or all in one (`in_proj`): joined or split at load
GDN_SOURCES = ("q", "k", "v", "q_conv", "k_conv", "v_conv", "in_proj")
KDA_FUSED_CONV = "src:self_attn.kda_conv1d.weight"    # KDA's q | k | v conv stored as one, split at load
FFN_PARAMS = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
NORM_MODULES = {"pre_mixer": "input_layernorm", "pre_ffn": "post_attention_layernorm",
                "post_mixer": "post_mixer_norm", "post_ffn": "post_ffn_norm",
                "post_mixer_sum": "post_mixer_sum_norm", "post_ffn_sum": "post_ffn_sum_norm"}
MODEL_PARAMS = {"embed": "embed_tokens", "pos_embed": "embed_positions", "embed_norm": "embed_layernorm",
                "embed_proj": "embed_proj", "head_proj": "head_proj",
                "final_norm": "norm", "head": "lm_head"}
LATENT_NAMES = ("latent_down", "latent_up", "latent_norm")
RESIDUAL_PARAMS = {"pre_mixer.query": "self_attention_res.proj.weight",
                   "pre_mixer.norm": "self_attention_res.norm.weight",
                   "pre_ffn.query": "mlp_res.proj.weight", "pre_ffn.norm": "mlp_res.norm.weight",
                   "depth_weights": "dwa_weights"}
OUTPUT_RESIDUAL = {"output_residual.query": "output_attn_res.proj.weight",
                   "output_residual.norm": "output_attn_res.norm.weight"}


class Unsupported(ArchprobeError):
    """The card describes something archprobe.nn cannot run (yet); the message names the one piece."""


class NeedsField(ArchprobeError):
    """A field validate needs is `unknown` on the card."""

    def __init__(self, path: str, what: str = ""):
        super().__init__(f"validate needs card field {path}{' (' + what + ')' if what else ''}, which the card "
                         f"leaves unknown", hint=f"write the card (archprobe card SOURCE -o card.yaml), set "
                         f"`{path}: <value>`, and pass --card card.yaml")
        self.path = path


@dataclass
class Derived:
    """A module tensor computed from checkpoint tensors at load time (split, transposed, stacked)."""

    target: str
    sources: tuple[str, ...]
    fn: Callable


@dataclass
class Part:
    """What one layer (or the model level, index None) loads: module name <- checkpoint name, plus
    derived tensors whose sources are entries of `names` (names starting `src:` are not parameters)."""

    names: dict[str, str] = field(default_factory=dict)
    derived: list[Derived] = field(default_factory=list)


@dataclass
class Blueprint:
    config: object                  # archprobe.nn.decoder.HybridConfig
    parts: dict                     # layer index or None -> Part
    unmapped: list[str]             # checkpoint tensors validate does not load (set aside, unexplained)


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


def _mixer_roles(kind: str) -> dict:
    """Role leaf -> parameter path for a HybridConfig mixer type, from its kind's spec."""
    spec = kinds.BY_NN_KIND.get(kind)
    return (spec.roles or {}) if spec is not None else {}


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


def _layer_of(name: str) -> int | None:
    """The layer index of a checkpoint name: its first enumerated path component (`model.layers.7.`)."""
    return next((int(p) for p in name.split(".") if p.isdigit()), None)


def blueprint(card, shapes: dict[str, tuple], n_run: int | None = None) -> Blueprint:
    """The HybridConfig and the per-layer tensor plan for `card`; `shapes` = checkpoint name -> shape;
    only the first `n_run` layers are planned (all by default)."""
    from archprobe.nn.decoder import HybridConfig

    n_run = len(card.layers) if n_run is None else n_run
    unexplained = [u for u in card.unexplained if n_run == len(card.layers) or (_layer_of(u) or 0) < n_run]
    if unexplained:
        n = len(unexplained)
        raise Unsupported(f"tensor {unexplained[0]} has no role on the card"
                          + (f" ({n - 1} more unexplained)" if n > 1 else "")
                          + ": running without it would compute something else")
    fields_ = config_fields(card, n_run)
    if fields_.get("learned_positions") == -1:
        name = card.tensors.get("pos_embed")
        if name is None or name not in shapes:
            raise NeedsField("tensors.pos_embed", "learned positions without their table")
        fields_["learned_positions"] = shapes[name][0]
    if fields_.get("embed_dim") == -1:
        name = card.tensors.get("embed")
        if name is None or name not in shapes or len(shapes[name]) != 2:
            raise NeedsField("tensors.embed", "projected embeddings without their table")
        fields_["embed_dim"] = shapes[name][1]
    try:
        cfg = HybridConfig(**fields_)
    except ValueError as exc:
        raise Unsupported(str(exc)) from None
    parts: dict = {}
    unmapped: list[str] = []
    for role, name in card.expand():
        base, _, companion = role.partition("#")
        m = LAYER_ROLE.match(base)
        if m:
            i = int(m.group(1))
            if i >= n_run:
                unmapped.append(name)
                continue
            target = _layer_target(cfg.for_layer(i), i, m.group(2), m.group(3), card)
            key = i
        elif base in OUTPUT_RESIDUAL:
            target, key = OUTPUT_RESIDUAL[base], None
        elif base.split(".")[0] in MODEL_PARAMS:
            head, _, leaf = base.partition(".")
            target = MODEL_PARAMS[head] + "." + (leaf or "weight")
            key = None
        else:
            target = None
        if target is None:   # a tensor the card binds but archprobe.nn has no place for: running without it
            raise Unsupported(f"role {role} ({name}) has no archprobe.nn parameter: running without it would "
                              "compute something else")
        if companion:
            target = target.rsplit(".", 1)[0] + "." + companion if target.endswith(".weight") else \
                target + "." + companion
        if "*" in name and key is not None and target.startswith(("self_attn.q_norm.", "self_attn.k_norm.")):
            _per_head_bank(parts.setdefault(key, Part()), target, name, cfg.layer_spec(key).mixer.args)
            continue
        parts.setdefault(key, Part()).names[target] = name
    for i in range(n_run):
        _layouts(parts.setdefault(i, Part()), card.layers[i], cfg.layer_spec(i), shapes)
    unmapped += [n for names in card.set_aside.values() for n in names]
    return Blueprint(cfg, parts, sorted(set(unmapped)))


def _per_head_bank(part: Part, target: str, name: str, attention) -> None:
    """One stored norm per head (`q_layernorm.norms.*.weight`, StableLM 2) stacked to [heads, head_dim]
    (`attention`: the layer's kinds/attention.py Args)."""
    import torch

    n = attention.num_heads if ".q_norm." in target else attention.num_kv_heads
    srcs = tuple(f"src:{target}#{h}" for h in range(n))
    for h, src in enumerate(srcs):
        part.names[src] = name.replace("*", str(h), 1)
    part.derived.append(Derived(target, srcs, lambda *t: torch.stack(t)))


def _ffn_module(cfg, i: int) -> str:
    return "mlp" if cfg.ffn_types[i] == "dense" else "block_sparse_moe"


def _layer_target(cfg, i: int, part: str, leaf: str, card) -> str | None:
    """archprobe.nn parameter name (inside DecoderLayer i) for a role's leaf; `src:` for fused sources."""
    bias = leaf.endswith(".bias")
    stem = leaf[: -len(".bias")] if bias else leaf
    suffix = ".bias" if bias else ".weight"
    if part == "norm":
        if stem == "latent":
            return f"block_sparse_moe.{LATENT_NAMES[2]}{suffix}"
        return NORM_MODULES[stem] + suffix if stem in NORM_MODULES else None
    if part == "residual":
        return None if bias else RESIDUAL_PARAMS.get(stem)
    if part == "parallel_mixer":
        kind = cfg.parallel_mixer_types[i]
        table = _mixer_roles(kind)
        if stem not in table or (card.layers[i].parallel_mixer.layout or {}).get("transposed"):
            return None
        name = "parallel_mixer." + table[stem]
        return name if stem in BARE and not bias else name + suffix
    if part == "mixer":
        kind = cfg.mixer_types[i]
        table = _mixer_roles(kind)
        if kind == "lightning" and stem == "qkv":
            stem = "lightning_qkv"          # per head [q | k | v]: the module reads it as stored
        if kind == "lightning" and stem.startswith("decay."):
            return f"src:unused.{stem}"     # block-decay tables precomputed from slope_rate; never read
        if stem in ("qkv",):
            return f"src:self_attn.qkv{suffix}"
        if kind == "gated_deltanet" and stem in GDN_SOURCES and not bias:
            return f"src:self_attn.gdn_{stem}.weight"
        if kind == "kda" and stem == "conv1d" and not bias:
            return KDA_FUSED_CONV
        if stem not in table:
            return None
        name = "self_attn." + table[stem]
        return name if stem in BARE and not bias else name + suffix
    # ffn
    ffn = _ffn_module(cfg, i)
    own = (kinds.FFNS[cfg.ffn_types[i]].roles or {}) if cfg.ffn_types[i] in kinds.FFNS else {}
    if own:                      # an FFN mechanism's roles (kinds/<kind>.py), vectors stored bare
        if stem not in own:
            return None
        return f"{ffn}.{own[stem]}" + ("" if stem in BARE and not bias else suffix)
    if ffn == "mlp":
        if stem.startswith("act.") and not bias:    # a learned activation's own tensors (xIELU alpha_p, ...)
            return f"mlp.act_fn.{stem[4:]}"
        if stem == "sub_norm":
            return f"mlp.sub_norm{suffix}"
        if stem == "gate_up":
            return f"src:mlp.gate_up{suffix}"
        return f"mlp.{FFN_PARAMS[stem]}{suffix}" if stem in FFN_PARAMS else None
    if stem == "out":      # an output bias stored bare (JetMoE's mlp.bias): the `#bias` companion of `out`
        return f"{ffn}.out.weight"
    if stem == "router":
        if bias:
            return f"{ffn}.gate." + ("e_score_correction_bias" if cfg.moe_router_bias else "bias")
        return f"{ffn}.gate.weight"
    if stem in LATENT_NAMES:
        return f"{ffn}.{stem}{suffix}"
    if stem == "shared_gate":
        return f"{ffn}.shared_expert_gate{suffix}"
    if stem.startswith("shared."):
        sub = stem.split(".", 1)[1]
        owner = "shared_expert" if cfg.shared_expert_gate else "shared_experts"
        if sub == "gate_up":
            return f"src:{ffn}.{owner}.gate_up{suffix}"
        return f"{ffn}.{owner}.{FFN_PARAMS[sub]}{suffix}" if sub in FFN_PARAMS else None
    m = re.match(r"^experts\.(\d+)\.(\w+)$", stem)
    if m:
        e, sub = m.groups()
        if bias:
            raise Unsupported(f"layers.{i}.ffn.experts.{e}.{sub}.bias: per-expert biases stored one by one")
        if sub == "gate_up":
            return f"src:{ffn}.experts.{e}.gate_up.weight"
        return f"{ffn}.experts.{e}.{FFN_PARAMS[sub]}.weight" if sub in FFN_PARAMS else None
    m = re.match(r"^experts\.(gate_up|gate|up|down)$", stem)
    if m:
        return f"src:{ffn}.experts.stacked_{m.group(1)}{suffix}"
    return None


def _layouts(part: Part, layer, spec, shapes: dict[str, tuple]) -> None:
    """Turn `src:` entries into module tensors as the part's layout says; transpose Conv1D storage.
    `spec`: the layer's archprobe.nn.decoder.LayerSpec (its mixers' arguments, its config)."""
    import torch

    cfg, mixer = spec.config, spec.mixer.args

    mlay, flay = layer.mixer.layout or {}, layer.ffn.layout or {}
    for target in [t for t in part.names if not t.startswith("src:")]:
        owner_layout = mlay if target.startswith("self_attn.") else flay if not target.startswith(
            ("input_layernorm", "post_")) else {}
        if owner_layout.get("transposed") and target.endswith(".weight") and len(shapes.get(part.names[target],
                                                                                         ())) == 2:
            src = "src:T:" + target
            part.names[src] = part.names.pop(target)
            part.derived.append(Derived(target, (src,), lambda t: t.t().contiguous()))
        elif target.endswith(".gate.e_score_correction_bias") and len(shapes.get(part.names[target], ())) == 2:
            src = "src:F:" + target   # a selection bias stored [1, E] (ERNIE's moe_statics)
            part.names[src] = part.names.pop(target)
            part.derived.append(Derived(target, (src,), lambda t: t.reshape(-1).contiguous()))
    _gdn_sources(part, mixer)
    _fold_mup(part, layer, spec)
    if KDA_FUSED_CONV in part.names:      # one conv over q | k | v, each D wide (transformers' Kimi Linear)
        for i, which in enumerate(("q", "k", "v")):
            part.derived.append(Derived(f"self_attn.{which}_conv1d.weight", (KDA_FUSED_CONV,),
                                        lambda t, i=i: t.chunk(3, dim=0)[i].contiguous()))
    for src in [t for t in part.names if t.startswith("src:") and not t.startswith(("src:T:", "src:F:"))]:
        body = src[4:]
        bias = body.endswith(".bias")
        if body.startswith("self_attn.qkv"):
            transposed = bool(mlay.get("transposed")) and not bias
            heads, kvh, d = mixer.num_heads, mixer.num_kv_heads, mixer.head_dim
            blocks = re.fullmatch(r"mp(\d+)_([qkv]{3})", str(mlay.get("qkv_interleaved")))
            interleaved = mlay.get("qkv_interleaved") not in (None, False, "blocks") and not blocks
            if mlay.get("qkv_interleaved") == "per_head" and heads != kvh:
                raise Unsupported(f"a per-head interleaved fused qkv with {heads} heads and {kvh} kv heads")
            split = mlay.get("qkv_split") or [heads * d, kvh * d, kvh * d]
            leaf = ".bias" if bias else ".weight"

            def qkv(t, which, transposed=transposed, interleaved=interleaved, split=split, heads=heads, kvh=kvh,
                    d=d, blocks=blocks):
                t = t.t() if transposed else t
                if blocks:   # CodeGen: mp blocks, each [three parts in `order`], the heads' rows mp-major
                    mp, order = int(blocks.group(1)), blocks.group(2)
                    g = t.reshape(mp, 3, t.shape[0] // (3 * mp), *t.shape[1:])
                    return g[:, order.index(which)].reshape(-1, *t.shape[1:]).contiguous()
                if interleaved:   # per kv group: [q heads of the group..., k, v], each d rows
                    g = t.reshape(kvh, heads // kvh + 2, d, *t.shape[1:])
                    pick = {"q": g[:, : heads // kvh], "k": g[:, heads // kvh], "v": g[:, heads // kvh + 1]}[which]
                    return pick.reshape(-1, *t.shape[1:]).contiguous()
                q, k, v = torch.split(t, list(split), dim=0)
                return {"q": q, "k": k, "v": v}[which].contiguous()

            for which in ("q", "k", "v"):
                part.derived.append(Derived(f"self_attn.{which}_proj{leaf}", (src,),
                                            lambda t, w=which, f=qkv: f(t, w)))
        elif ".gate_up" in body and "stacked" not in body:
            owner = body.rsplit(".gate_up", 1)[0]
            leaf = ".bias" if bias else ".weight"
            interleaved = flay.get("gate_up") == "interleaved"
            transposed = bool(flay.get("transposed")) and not bias

            def halves(t, first, interleaved=interleaved, transposed=transposed):
                t = t.t() if transposed else t
                if interleaved:
                    return (t[0::2] if first else t[1::2]).contiguous()
                a, b = t.chunk(2, dim=0)
                return (a if first else b).contiguous()

            part.derived.append(Derived(f"{owner}.gate_proj{leaf}", (src,), lambda t, f=halves: f(t, True)))
            part.derived.append(Derived(f"{owner}.up_proj{leaf}", (src,), lambda t, f=halves: f(t, False)))
        elif "stacked_" in body:
            _stacked(part, src, body, flay, cfg.num_experts)


# Falcon-H1's muP multipliers (transformers' modeling_falcon_h1): each multiplies a projection's input or output,
# so it folds into that projection's weight (and, on an output, its bias): key -> (module, scales bias)
MUP_FOLDS = {"attention_in_multiplier": (("attn.q_proj", False), ("attn.k_proj", False), ("attn.v_proj", False)),
             "key_multiplier": (("attn.k_proj", True),), "attention_out_multiplier": (("attn.o_proj", True),),
             "ssm_in_multiplier": (("ssm.in_proj", False),), "ssm_out_multiplier": (("ssm.out_proj", True),),
             "ssm_multipliers": (("ssm.in_proj", True),),       # per row block z | x | B | C | dt
             "mlp_multipliers": (("mlp.gate_proj", True), ("mlp.down_proj", True))}


def _fold_mup(part: Part, layer, spec) -> None:
    """Fold the layer's muP multipliers into the weights they scale (exact: each is linear in its tensor)."""
    import torch

    ssm_args = next((s.args for s in (spec.mixer, spec.parallel_mixer) if s.kind == "mamba2"), None)

    ssm = next((mx for mx in (layer.mixer, layer.parallel_mixer) if mx is not None and mx.kind == "mamba2"), None)
    mup = ((ssm.layout or {}).get("mup_multipliers") or {}) if ssm is not None else {}
    if not mup:
        return
    owner = {"ssm": "self_attn" if layer.mixer.kind == "mamba2" else "parallel_mixer",
             "attn": "parallel_mixer" if layer.mixer.kind == "mamba2" else "self_attn", "mlp": "mlp"}
    factors: dict[str, list] = {}
    for key, value in mup.items():
        for i, (module, on_bias) in enumerate(MUP_FOLDS[key]):
            where, name = module.split(".")
            f = value[i] if key == "mlp_multipliers" else value
            if key == "ssm_multipliers":
                a = ssm_args
                inner, gn = a.num_heads * a.head_dim, a.n_groups * a.state_size
                f = torch.cat([torch.full((n,), float(v)) for n, v in
                               zip((inner, inner, gn, gn, a.num_heads), value, strict=True)])
            for leaf in ("weight", "bias") if on_bias else ("weight",):
                factors.setdefault(f"{owner[where]}.{name}.{leaf}", []).append(f)
    for target, fs in factors.items():
        if target not in part.names:
            if any(d.target == target for d in part.derived):
                raise Unsupported(f"{target}: a muP multiplier on a tensor computed at load")
            continue
        src = "src:M:" + target
        part.names[src] = part.names.pop(target)

        def scaled(t, fs=fs):
            out = t.float()
            for f in fs:
                f = f.to(out.dtype) if torch.is_tensor(f) else f
                out = out * (f.reshape(-1, *([1] * (out.dim() - 1))) if torch.is_tensor(f) else f)
            return out.to(t.dtype).contiguous()
        part.derived.append(Derived(target, (src,), scaled))


def _gdn_sources(part: Part, gdn) -> None:
    """Gated DeltaNet's split layout from separate q/k/v projections and convs (concatenated in that order:
    the conv runs over q | k | v) or from one block-ordered `in_proj` (rows q | k | v | z | b | a)."""
    import torch

    src = {k[len("src:self_attn.gdn_"):-len(".weight")]: k for k in part.names if k.startswith("src:self_attn.gdn_")}
    if not src:
        return
    for target, parts in (("in_proj_qkv", ("q", "k", "v")), ("conv1d", ("q_conv", "k_conv", "v_conv"))):
        if any(p in src for p in parts):
            if not all(p in src for p in parts):
                raise Unsupported(f"Gated DeltaNet: {', '.join(p for p in parts if p not in src)} missing beside "
                                  f"{', '.join(p for p in parts if p in src)}")
            part.derived.append(Derived(f"self_attn.{target}.weight", tuple(src[p] for p in parts),
                                        lambda *t: torch.cat(t, dim=0).contiguous()))
    if "in_proj" in src:
        nk, nv, dk, dv = gdn.num_key_heads, gdn.num_value_heads, gdn.key_head_dim, gdn.value_head_dim
        sizes = [2 * nk * dk + nv * dv, nv * dv, nv, nv]
        for i, name in enumerate(("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")):
            part.derived.append(Derived(f"self_attn.{name}.weight", (src["in_proj"],),
                                        lambda t, i=i: torch.split(t, sizes, dim=0)[i].contiguous()))


def _stacked(part: Part, src: str, body: str, flay: dict, num_experts: int = 1) -> None:
    """A stacked expert bank [E, out, in] (or [E, in, out] when `stacked_transposed`; or flattened
    [E * F, H], DBRX, the down bank stored [F, H] per expert when `down_transposed`) -> ExpertBank tensors."""
    import torch

    owner, _, what = body.partition(".stacked_")
    which, _, leaf = what.partition(".")
    bias = leaf == "bias"
    flat = flay.get("experts") == "flattened" and not bias
    transposed = (bool(flay.get("stacked_transposed")) or (flat and which == "down" and
                                                            bool(flay.get("down_transposed")))) and not bias
    interleaved = flay.get("gate_up") == "interleaved"

    def fix(t):   # weights [E, out, in] after the transpose; biases [E, out]
        t = t.reshape(num_experts, -1, t.shape[-1]) if flat else t
        t = t.transpose(-1, -2) if transposed else t
        if which == "gate_up" and interleaved:   # even rows gate, odd rows up -> gate rows first
            rows = t.dim() - (1 if bias else 2)
            n = t.shape[rows]
            t = t.index_select(rows, torch.cat([torch.arange(0, n, 2), torch.arange(1, n, 2)]))
        return t.contiguous()

    if which in ("gate_up", "down"):
        target = f"{owner}.{which}_proj" + ("_bias" if bias else "")
        part.derived.append(Derived(target, (src,), fix))
    elif which == "gate":
        up = src.replace("stacked_gate", "stacked_up")
        if up not in part.names:
            raise Unsupported(f"{owner}: a stacked gate bank without its up bank")
        part.derived.append(Derived(f"{owner}.gate_up_proj" + ("_bias" if bias else ""), (src, up),
                                    lambda g, u: torch.cat([fix(g), fix(u)], dim=-1 if bias else -2)))
    elif which == "up" and src.replace("stacked_up", "stacked_gate") not in part.names:
        part.derived.append(Derived(f"{owner}.up_proj" + ("_bias" if bias else ""), (src,), fix))
