"""archprobe's own generic path: can `validate` build this checkpoint's card onto archprobe.nn?

Asks validate's build step (validate/build.py) with the checkpoint's card: a tensor family is handled
when the blueprint binds it to an archprobe.nn parameter; a field the card leaves unknown or a mechanism
archprobe.nn lacks makes the whole answer `unknown`, with that piece named.
"""

from __future__ import annotations

import re

from archprobe.adapt.coverage import UNVERIFIED, feature_table
from archprobe.adapt.result import framework_result, not_installed, unknown

NAME = "archprobe"
QUANT_LEAF = re.compile(r"\.weight_(packed|scale|scale_inv|shape|zero_point)$")


def probe(config: dict, features: list[dict], present: set[str], shapes: dict[str, tuple], raw, card) -> dict:
    """`raw` (the opened checkpoint) and its `card` (derived once by the caller, the user's fields applied)."""
    try:
        import torch  # noqa: F401  (archprobe.nn needs it)

        from archprobe.validate.build import blueprint
        from archprobe.validate.load import TensorReader
        from archprobe.validate.plan import NeedsField, Unsupported
    except ImportError:
        return not_installed(NAME + " validate", "pip install 'archprobe[torch]'")
    reader = TensorReader(raw.location, raw.headers)
    try:
        bp = blueprint(card, reader.all_shapes(card.tensors.values()))
    except NeedsField as exc:
        return unknown(NAME, None, f"validate needs card field {exc.path}, which the card leaves unknown")
    except Unsupported as exc:
        return unknown(NAME, None, f"validate cannot run it: {exc.message}")
    bound = {reader.listed(n) for part in bp.parts.values() for n in part.checkpoint_names()}
    bound |= {QUANT_LEAF.sub(".weight", n) for n in bound if n}   # the logical weight a quantized one stores
    unmapped = sorted(n for n in present if n not in bound)
    notes = [f"{len(present) - len(unmapped)} of {len(present)} tensor families map onto archprobe.nn"]
    if unmapped:
        notes.append("not mapped: " + ", ".join(unmapped[:5]) + (" ..." if len(unmapped) > 5 else ""))

    def judge(f: dict):
        if f.get("evidence") and all(str(e.get("tensor", "")).startswith("config:") for e in f["evidence"]):
            return None if f["id"] != "ffn.activation" else _activation(bp.config)
        return None

    rows = feature_table(features, present, lambda name: name in bound, judge)
    for r in rows:
        if r["status"] == UNVERIFIED and r["why"] == "no tensor evidence to check":
            r["status"], r["why"] = "handled", "read from the card by validate's build step"
    return framework_result(NAME, None, "archprobe.nn HybridDecoder", rows, notes)


def _activation(cfg):
    from archprobe.nn.activations import ACTIVATIONS

    acts = {cfg.for_layer(i).hidden_act for i in range(cfg.num_hidden_layers) if cfg.ffn_types[i] != "none"}
    missing = sorted(a for a in acts if a not in ACTIVATIONS)
    if missing:
        return "missing", f"activation {missing[0]!r} is not implemented in archprobe.nn"
    return "handled", f"activation {', '.join(sorted(acts))!r} is implemented in archprobe.nn"
