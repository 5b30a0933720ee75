"""archprobe's own generic path: does `validate` map this checkpoint onto archprobe.nn?"""

from __future__ import annotations

from archprobe.adapt.coverage import UNVERIFIED, feature_table
from archprobe.adapt.result import framework_result, not_installed, unknown
from archprobe.errors import ArchprobeError

NAME = "archprobe"


def probe(config: dict, features: list[dict], present: set[str], shapes: dict[str, tuple]) -> dict:
    try:
        from archprobe.validate.legacy_mapping import hybrid_config, module_name
    except ImportError:
        return not_installed(NAME + " validate", "pip install 'archprobe[torch]'")
    try:
        cfg = hybrid_config(config, shapes)
    except ArchprobeError as exc:
        return unknown(NAME, None, f"validate has no mapping for it: {exc.message}")
    except (ValueError, KeyError, TypeError) as exc:
        return unknown(NAME, None, f"validate cannot build this configuration: {type(exc).__name__}: {exc}")
    unmapped = sorted(n for n in present if module_name(n.replace("*", "0"), cfg) is None)
    notes = [f"{len(present) - len(unmapped)} of {len(present)} tensor families map onto archprobe.nn"]
    if unmapped:
        notes.append("not mapped: " + ", ".join(unmapped[:5]) + (" ..." if len(unmapped) > 5 else ""))

    def judge(f: dict):
        if f.get("evidence") and all(str(e.get("tensor", "")).startswith("config:") for e in f["evidence"]):
            return None if f["id"] != "ffn.activation" else _activation(cfg)
        return None

    def ok(name: str) -> bool:
        return module_name(name.replace("*", "0"), cfg) is not None

    rows = feature_table(features, present, ok, judge)
    for r in rows:
        if r["status"] == UNVERIFIED and r["why"] == "no tensor evidence to check":
            r["status"], r["why"] = "handled", "read from config by HybridConfig"
    return framework_result(NAME, None, "archprobe.nn HybridDecoder", rows, notes)


def _activation(cfg):
    from archprobe.nn.moe import ACTIVATIONS

    act = getattr(cfg, "hidden_act", None)
    if act in ACTIVATIONS:
        return "handled", f"activation {act!r} is implemented in archprobe.nn"
    return "missing", f"activation {act!r} is not implemented in archprobe.nn"
