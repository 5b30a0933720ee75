"""The card -> archprobe.nn: the HybridConfig the card describes and where each bound tensor goes.

The assembly of three steps: the config (validate/plan.py), each role's parameter (validate/roles.py) and
the storage layouts turned into module tensors at load time (validate/layouts.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from archprobe.validate.layouts import Part, Source, apply_layouts, per_head_bank
from archprobe.validate.plan import NeedsField, Unsupported, config_fields
from archprobe.validate.roles import MODEL_PARAMS, OUTPUT_RESIDUAL, layer_target

LAYER_ROLE = re.compile(r"^layers\.(\d+)\.(mixer|parallel_mixer|ffn|norm|residual)\.(.+)$")


@dataclass
class Blueprint:
    config: object                  # archprobe.nn.decoder.HybridConfig
    parts: dict                     # layer index or None -> Part
    unmapped: list[str]             # checkpoint tensors validate does not load (set aside, unexplained)


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
            target = layer_target(cfg.for_layer(i), i, m.group(2), m.group(3), card)
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
        part = parts.setdefault(key, Part())
        if isinstance(target, Source):     # stored in a layout: validate/layouts.py derives the parameters
            if companion:
                target = replace(target, stored=_with_companion(target.stored, companion))
            part.sources[target] = name
            continue
        if companion:
            target = _with_companion(target, companion)
        if "*" in name and key is not None and target.startswith(("self_attn.q_norm.", "self_attn.k_norm.")):
            per_head_bank(part, target, name, cfg.layer_spec(key).mixer.args)
            continue
        part.names[target] = name
    for i in range(n_run):
        apply_layouts(parts.setdefault(i, Part()), card.layers[i], cfg.layer_spec(i), shapes)
    unmapped += [n for names in card.set_aside.values() for n in names]
    return Blueprint(cfg, parts, sorted(set(unmapped)))


def _with_companion(name: str, companion: str) -> str:
    """A quantization companion's name beside its tensor's (`x.weight` + weight_scale -> `x.weight_scale`)."""
    return name.rsplit(".", 1)[0] + "." + companion if name.endswith(".weight") else name + "." + companion
