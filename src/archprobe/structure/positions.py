"""How a model knows where a token is: the card's rope (model level and per layer), NoPE layers and
absolute positions (learned tables are found by shape in derive; sinusoidal ones are not stored).

Read in this order, each fact recording its origin:
  * config keys with their standard meaning: `rope_theta` / `rotary_emb_base` / `rope_base`,
    `rope_scaling` or `rope_parameters` (type, factor, original_max_position_embeddings, the longrope
    factor lists), transformers 5's per-layer-type `rope_parameters` ({"full_attention": {...},
    "sliding_attention": {...}}; a `null` entry is a layer type without rope), `partial_rotary_factor`
    / `rotary_pct` / `rotary_dim`, `rope_interleave`, `layer_rope_theta` (one theta per layer, 0 = NoPE),
    `rope_local_base_freq` (Gemma 3's sliding layers before the per-type form: that base, no scaling),
    `no_rope_layers` (one flag per layer, truthy = rope, as SmolLM3 and Llama 4 read it), `use_rope`,
    `mla_use_nope`, `use_mem_rope`, `attn_temperature_tuning` with `floor_scale` / `attn_scale` (Llama 4's
    NoPE layers scale q), `position_embedding_type` (null or "nope": no rope, GraniteMoeHybrid);
  * a documented default: a hybrid (linear-attention or state-space layers beside attention) whose
    config names no rope at all runs its attention without positions (Jamba, Nemotron-H, Kimi Linear:
    the recurrent layers carry the order);
  * the family table (structure/family_defaults.py) for what a modeling file hard-codes: `rope_theta`,
    `rope_interleaved`, `rope_inverse`, `rope` False, `nope_full_layers`, `qk_norm_after_rope`, `nope_query_scale`,
    `positions`.
"""

from __future__ import annotations

import dataclasses
import math

from archprobe.formats.limits import MAX_FACTOR_LIST
from archprobe.kinds import MIXERS
from archprobe.structure.card import Card, Rope
from archprobe.structure.config import ConfigView

ATTENTION = ("gqa", "mha", "mqa", "mla", "lowrank_kv")
RECURRENT = tuple(name for name, k in MIXERS.items() if k.recurrent)   # archprobe.kinds
# older names: Phi-3's first releases wrote `su` for LongRoPE; Qwen2-VL's `mrope` rotates each section at
# the same position for text tokens, which is the default rope (transformers 4.45+ renamed it `default`)
ROPE_ALIASES = {"su": "longrope", "mrope": "default"}


def _set(card: Card, path: str, value, origin: str) -> None:
    if value is not None:
        card.set(path, value, origin)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _plain(scaling: dict) -> dict:
    """The rope dict's scalars and number lists (longrope's short/long factors), nothing nested."""
    out = {}
    for k, v in scaling.items():
        if isinstance(v, (int, float, str, bool)) and (not isinstance(v, float) or math.isfinite(v)):
            out[k] = v
        elif isinstance(v, list) and 0 < len(v) <= MAX_FACTOR_LIST and all(_number(x) for x in v):
            out[k] = [float(x) for x in v]
    return out


def _per_type(params) -> dict | None:
    """transformers 5's per-layer-type form: every value a dict or null, keyed by layer type."""
    if not isinstance(params, dict) or not params or "rope_type" in params or "rope_theta" in params:
        return None
    if all(v is None or isinstance(v, dict) for v in params.values()):
        return params
    return None


def _rope_from(d: dict, where: str) -> tuple[Rope, dict]:
    """A card Rope from one rope dict; origins keyed by Rope field."""
    r, origins = Rope(), {}
    if _number(d.get("rope_theta")):
        r.theta, origins["theta"] = float(d["rope_theta"]), f"config:{where}.rope_theta"
    kind = d.get("rope_type") or d.get("type")
    if isinstance(kind, str):
        r.type, origins["type"] = ROPE_ALIASES.get(kind, kind), f"config:{where}"
    if _number(d.get("factor")):
        r.factor, origins["factor"] = float(d["factor"]), f"config:{where}.factor"
    om = d.get("original_max_position_embeddings")
    if isinstance(om, int) and not isinstance(om, bool) and om > 0:
        r.original_max_position = om
        origins["original_max_position"] = f"config:{where}.original_max_position_embeddings"
    if _number(d.get("partial_rotary_factor")) and 0 < d["partial_rotary_factor"] <= 1:
        r.partial_rotary_factor = float(d["partial_rotary_factor"])
        origins["partial_rotary_factor"] = f"config:{where}.partial_rotary_factor"
    r.scaling = _plain(d) or None
    return r, origins


def _head_dim(card: Card) -> int | None:
    dims = {layer.mixer.head_dim for layer in card.layers if layer.mixer.kind in ("gqa", "mha", "mqa")}
    dims.discard(None)
    return dims.pop() if len(dims) == 1 else None


def _model_rope(card: Card, cfg: ConfigView, per_type: dict | None) -> None:
    scaling = cfg.get("rope_scaling") if isinstance(cfg.get("rope_scaling"), dict) else None
    params = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else None
    where = "rope_scaling" if scaling else "rope_parameters"
    if per_type is not None:     # the model-level rope is the full-attention layers' (the others override)
        key = "full_attention" if isinstance(per_type.get("full_attention"), dict) else next(
            (k for k, v in per_type.items() if isinstance(v, dict)), None)
        params, where = (per_type[key], f"rope_parameters.{key}") if key else (None, where)
    base = scaling or params
    if base:
        r, origins = _rope_from(base, where)
        for name, origin in origins.items():
            _set(card, f"rope.{name}", getattr(r, name), origin)
        card.rope.scaling = r.scaling
    theta, at = cfg.first_float_at("rope_theta", "rotary_emb_base", "rope_base")
    # a key in a family sub-block (DBRX's attn_config.rope_theta) yields to the rope_parameters transformers reads
    if theta is not None and (card.rope.theta is None or (per_type is None and "." not in (at or ""))):
        _set(card, "rope.theta", theta, f"config:{at}")
    if card.rope.theta is None and cfg.default("rope_theta") is not None:
        _set(card, "rope.theta", float(cfg.default("rope_theta")), "default")
    if card.rope.original_max_position is None and card.rope.type not in (None, "default"):
        om, at = cfg.first_int_at("original_max_position_embeddings")   # Phi-3 writes it top-level
        _set(card, "rope.original_max_position", om, f"config:{at}")
    if isinstance(cfg.get("rope_interleave"), bool):
        _set(card, "rope.interleaved", cfg.get("rope_interleave"), "config:rope_interleave")
    elif cfg.default("rope_interleaved") is not None:
        _set(card, "rope.interleaved", bool(cfg.default("rope_interleaved")), "default")
    if cfg.default("rope_inverse"):
        _set(card, "rope.inverse", True, "default")
    if card.rope.partial_rotary_factor is None:
        prf, at = cfg.first_float_at("partial_rotary_factor", "rotary_pct")
        _set(card, "rope.partial_rotary_factor", prf, f"config:{at}")
    if card.rope.partial_rotary_factor is None:
        rd, at = cfg.first_int_at("rotary_dim")            # GPT-J, CodeGen: rotated channels per head
        d = _head_dim(card)
        if rd and d and rd <= d:
            _set(card, "rope.partial_rotary_factor", rd / d, f"config:{at}")


def _names_rope(cfg: ConfigView) -> bool:
    """Whether the config says anything about rotary positions: any rope / rotary key other than a width
    (MLA's `qk_rope_head_dim` names the channels a rope would use, not that one runs)."""
    keys = set(cfg.text) | {k for k in cfg.raw if cfg.nested_in}
    return any(("rope" in k or "rotary" in k) and not k.endswith("head_dim") for k in keys) or cfg.get(
        "position_embedding_type") is not None


def _nope_everywhere(card: Card, cfg: ConfigView) -> str | None:
    """The origin of "no attention layer rotates" (a config key, the family table, the hybrid default),
    or None."""
    for key in ("mla_use_nope", "use_rope", "use_mem_rope"):   # Zamba2's shared attention: use_mem_rope
        if cfg.get(key) is (key == "mla_use_nope"):
            return f"config:{key}"
    if "position_embedding_type" in cfg.text and cfg.text["position_embedding_type"] in (None, "nope", "none"):
        return "config:position_embedding_type"   # GraniteMoeHybrid builds its rope only for "rope"
    if cfg.default("rope") is False:
        return "default"
    hybrid = any(layer.mixer.kind in RECURRENT for layer in card.layers)
    if hybrid and not _names_rope(cfg) and cfg.default("rope_theta") is None:
        return "default"
    return None


def _layer_ropes(card: Card, cfg: ConfigView, per_type: dict | None) -> None:
    n = len(card.layers)
    types = cfg.get("layer_types")
    types = types if isinstance(types, list) and len(types) == n else None
    thetas = cfg.get("layer_rope_theta")
    thetas = thetas if isinstance(thetas, list) and len(thetas) == n and all(_number(t) for t in thetas) else None
    flags = cfg.get("no_rope_layers")
    flags = flags if isinstance(flags, list) and len(flags) == n else None
    nope_origin = _nope_everywhere(card, cfg)
    nope_all = nope_origin is not None
    local, local_at = cfg.first_float_at("rope_local_base_freq")   # Gemma 3 before rope_parameters per type
    sliding = types is not None and any("sliding" in str(t) for t in types) and cfg.get("sliding_window")
    nope_full = bool(cfg.default("nope_full_layers")) and sliding
    for i, layer in enumerate(card.layers):
        m, p = layer.mixer, f"layers.{i}.mixer"
        if m.kind not in ATTENTION:
            continue
        if nope_all:
            _set(card, f"{p}.rope", False, nope_origin)
            continue
        if per_type is not None and types is not None and str(types[i]) in per_type:
            own = per_type[str(types[i])]
            if own is None:
                _set(card, f"{p}.rope", False, f"config:rope_parameters.{types[i]}")
                continue
            r, _ = _rope_from(own, f"rope_parameters.{types[i]}")
            if (r.theta, r.type, r.factor, r.partial_rotary_factor, r.scaling) != (
                    card.rope.theta, card.rope.type, card.rope.factor, card.rope.partial_rotary_factor,
                    card.rope.scaling):
                _set(card, f"{p}.layer_rope", dataclasses.asdict(r), f"config:rope_parameters.{types[i]}")
        if per_type is None and local is not None and types is not None and "sliding" in str(types[i]):
            _set(card, f"{p}.layer_rope", {"theta": local, "type": "default"}, f"config:{local_at}")
        if thetas is not None:
            if not thetas[i]:
                _set(card, f"{p}.rope", False, "config:layer_rope_theta")
                continue
            if float(thetas[i]) != card.rope.theta:
                _set(card, f"{p}.layer_rope", {"theta": float(thetas[i])}, "config:layer_rope_theta")
        if flags is not None and not flags[i]:
            _set(card, f"{p}.rope", False, "config:no_rope_layers")
            continue
        if nope_full and "sliding" not in str(types[i]):
            _set(card, f"{p}.rope", False, "default")
            continue
        if m.qk_norm and cfg.default("qk_norm_after_rope"):
            _set(card, f"{p}.qk_norm_after_rope", True, "default")
    scale, origin = cfg.default("nope_query_scale"), "default"
    floor, attn_scale = cfg.first_float("floor_scale"), cfg.first_float("attn_scale")
    if cfg.get("attn_temperature_tuning") is True and floor and attn_scale is not None:   # Llama 4
        scale = {"form": "log_floor", "beta": attn_scale, "length": floor, "shift": 1}
        origin = "config:attn_temperature_tuning"
    for i, layer in enumerate(card.layers):
        if scale and layer.mixer.kind in ATTENTION and layer.mixer.rope is False:
            _set(card, f"layers.{i}.mixer.query_scale", dict(scale), origin)


def derive_positions(card: Card, cfg: ConfigView) -> None:
    """Fill card.rope, each attention layer's rope / layer_rope, and card.embed's position kind."""
    params = cfg.get("rope_parameters")
    per_type = _per_type(params)
    _model_rope(card, cfg, per_type)
    _layer_ropes(card, cfg, per_type)
    form = cfg.default("positions")
    if card.embed.pos_kind is None and form:                          # sinusoidal tables are computed, not stored
        _set(card, "embed.pos_kind", "sinusoidal", "default")
        _set(card, "embed.sinusoid", form, "default")
        _set(card, "embed.position_offset", cfg.default("position_offset"), "default")
    attn = [i for i, layer in enumerate(card.layers) if layer.mixer.kind in ATTENTION]
    if card.embed.pos_kind is None and attn and all(card.layers[i].mixer.rope is False for i in attn):
        _set(card, "embed.pos_kind", "none", card.origins.get(f"layers.{attn[0]}.mixer.rope", "default"))
    elif card.embed.pos_kind is None and card.rope.theta is not None:
        _set(card, "embed.pos_kind", "rope", card.origins.get("rope.theta", "default"))
    if card.embed.pos_kind is None and card.rope.theta is None and _no_rope_key(cfg):
        _set(card, "embed.pos_kind", "none", "config:transformers_version")


def _no_rope_key(cfg: ConfigView) -> bool:
    """A config.json written by transformers (it records `transformers_version`) serialises every field of its
    config class, so a rope model always carries rope_theta / rope_parameters / rotary_*: a decoder config
    with none of them has position-free attention (Jamba, Nemotron-H run their attention without rope)."""
    if not (cfg.raw.get("transformers_version") or cfg.text.get("transformers_version")):
        return False
    keys = set(cfg.text) | set(cfg.raw)
    return not any("rope" in k or "rotary" in k or "position_embedding_type" in k or "alibi" in k for k in keys)
