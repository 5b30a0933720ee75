"""Feature-level coverage: a feature is handled by a framework when every tensor that evidences it
has a place in that framework's model (and every config key it rests on is understood).

Why evidence tensors: `inspect` already names, per feature, the tensors that prove it. Asking the
framework about exactly those tensors gives a precise gap ("attn_res tensors have no home in
transformers' KimiLinear"), not a blanket yes/no.
"""

from __future__ import annotations

import re
from collections.abc import Callable

HANDLED, MISSING, UNVERIFIED = "handled", "missing", "unverified"
QUANT_COMPANION = re.compile(r"\.(weight_scale|weight_scale_inv|weight_scale_2|input_scale|weight_zero_point|"
                             r"scales|qzeros|g_idx|weight_global_scale)$")
LAYER = re.compile(r"\.layers\.(\d+)\.")


def evidence_tensors(feature: dict) -> list[str]:
    return [e["tensor"] for e in feature.get("evidence", []) if isinstance(e.get("tensor"), str)
            and not e["tensor"].startswith("config:")]


def evidence_config_keys(feature: dict) -> list[str]:
    return [e["tensor"][len("config:"):] for e in feature.get("evidence", [])
            if isinstance(e.get("tensor"), str) and e["tensor"].startswith("config:")]


def across_layers(name: str, layers: list[int], present: set[str]) -> list[str]:
    """The evidence tensor's siblings in every layer the feature was found in (those that exist)."""
    m = LAYER.search(name)
    if not m or not layers:
        return [name]
    out = []
    for i in layers:
        candidate = name[:m.start()] + f".layers.{i}." + name[m.end():]
        if candidate in present:
            out.append(candidate)
    return out or [name]


def dequantized_name(name: str) -> str | None:
    """The dense tensor a quantized part stands for; None for scale/zero companions."""
    if QUANT_COMPANION.search(name):
        return None
    return re.sub(r"\.(weight_packed|qweight|weight_blocks|blocks)$", ".weight", name)


def feature_table(features: list[dict], present: set[str], tensor_ok: Callable[[str], bool] | None,
                  judge: Callable[[dict], tuple[str, str] | None]) -> list[dict]:
    """One row per detected feature: status and the reason, naming what has no home.

    `judge` decides features that rest on framework knowledge (an activation name, a quant scheme);
    everything else is decided by whether its evidence tensors have a place (`tensor_ok`)."""
    rows = []
    for f in features:
        decided = judge(f)
        if decided is not None:
            rows.append({"feature": f["id"], "status": decided[0], "why": decided[1]})
            continue
        names = [s for n in evidence_tensors(f) for s in across_layers(n, f.get("layers") or [], present)]
        dense = [d for d in (dequantized_name(n) for n in names) if d is not None]
        if not dense:
            rows.append({"feature": f["id"], "status": UNVERIFIED, "why": "no tensor evidence to check"})
            continue
        if tensor_ok is None:
            rows.append({"feature": f["id"], "status": UNVERIFIED, "why": "this framework's tensor layout "
                         "cannot be checked statically"})
            continue
        missing = [n for n in dense if not tensor_ok(n)]
        if missing:
            rows.append({"feature": f["id"], "status": MISSING,
                         "why": f"{len(missing)} of {len(dense)} evidence tensor(s) have no place, e.g. {missing[0]}",
                         "unplaced": missing[:8]})
        else:
            rows.append({"feature": f["id"], "status": HANDLED, "why": f"{len(dense)} evidence tensor(s) placed"})
    return rows
