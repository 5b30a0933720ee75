"""Per-layer findings and config facts assembled into the feature list of `contracts.md`.

Each feature: {"id", "layers", "confidence", "evidence", "attrs"}. Layer-level findings are merged
per id (the layers listed, the first layer's evidence shown). Config-only facts carry `config:<key>`
evidence and a lower confidence than facts the weights show.
"""

from __future__ import annotations

from archprobe.formats.quant import QuantRole
from archprobe.structure.config import ModelConfig
from archprobe.structure.evidence import cfg_ev, ev
from archprobe.structure.ffn import activation_feature
from archprobe.structure.layers import LayerPlan
from archprobe.structure.mixers import nope_evidence
from archprobe.structure.tensors import TensorTable

MIXER_IDS = {"kda": "linear_attention.kda", "gated_deltanet": "linear_attention.gated_deltanet",
             "mamba2": "ssm.mamba2", "mla": "attention.mla", "gqa": "attention.gqa",
             "mha": "attention.mha", "mqa": "attention.mqa", "lowrank_kv": "attention.kv_compression"}
ATTN_ATTRS = ("num_heads", "num_kv_heads", "head_dim")


class FeatureSet:
    def __init__(self) -> None:
        self.by_id: dict[str, dict] = {}

    def add(self, fid: str, layer: int | None, attrs: dict, evidence: list[dict], confidence: float) -> None:
        f = self.by_id.get(fid)
        if f is None:
            f = self.by_id[fid] = {"id": fid, "layers": [], "confidence": confidence,
                                   "evidence": list(evidence), "attrs": dict(attrs)}
        else:
            f["confidence"] = min(f["confidence"], confidence)
        if layer is not None:
            f["layers"].append(layer)

    def ordered(self) -> list[dict]:
        return sorted(self.by_id.values(), key=lambda f: f["id"])


def assemble(plans: list[LayerPlan], table: TensorTable, cfg: ModelConfig, roles: dict[str, QuantRole],
             residual_features: list[dict], warnings: list[str]) -> list[dict]:
    fs = FeatureSet()
    for p in plans:
        for finding in (p.mixer, p.ffn):
            if finding is None or finding.kind == "unknown":
                continue
            fid = MIXER_IDS.get(finding.kind) or ("moe.routed" if finding.kind in ("moe", "latent_moe") else None)
            if fid is None:
                continue
            conf = finding.confidence
            planned = _planned(cfg, p.index, finding)
            if planned is not None and not _same_family(planned, finding.kind):
                conf = min(conf, 0.6)
                warnings.append(f"layer {p.index}: the weights show {finding.kind}, the config declares {planned}")
            fs.add(fid, p.index, finding.attrs, finding.evidence, conf)
            for xid, extra in finding.extras.items():
                fs.add(xid, p.index, extra["attrs"], extra["evidence"], conf)
    _config_features(fs, plans, cfg)
    for f in residual_features:
        fs.by_id[f["id"]] = f
    _quant_features(fs, table, roles)
    if table.mtp:
        first = next(iter(next(iter(table.mtp.values())).values()))
        fs.add("mtp", None, {"layers": sorted(i for i in table.mtp if i >= 0) or [0]},
               [ev(first, "multi-token-prediction layer beyond num_hidden_layers")], 0.9)
    if table.vision:
        n = sum(e.params for e in table.vision)
        fs.add("multimodal.vision", None, {"params": n},
               [ev(table.vision[0], f"vision tower / projector tensors ({len(table.vision)} families)")], 0.95)
    return fs.ordered()


def _planned(cfg: ModelConfig, index: int, finding) -> str | None:
    plan = cfg.mixer_plan if finding.kind in MIXER_IDS else cfg.ffn_plan
    return plan[index] if index < len(plan) else None


def _same_family(planned: str, found: str) -> bool:
    groups = [{"gqa", "mha", "mqa", "sliding_window"}, {"moe", "latent_moe"}, {"linear", "kda", "gated_deltanet"}]
    return planned == found or any(planned in g and found in g for g in groups)


def _config_features(fs: FeatureSet, plans: list[LayerPlan], cfg: ModelConfig) -> None:
    sw = cfg.sliding_window
    swl = [i for i, k in enumerate(cfg.mixer_plan) if k == "sliding_window"]
    if sw and swl:
        fs.add("attention.sliding_window", None, {"window": sw, "layers": swl},
               [cfg_ev("sliding_window", sw, f"{len(swl)} layers see a bounded window (layer_types)")], 0.8)
        fs.by_id["attention.sliding_window"]["layers"] = swl
    elif sw and cfg.get("use_sliding_window", True) is not False and cfg.model_type in ("mistral", "mixtral"):
        attn = [p.index for p in plans if p.mixer_kind in ("gqa", "mha", "mqa")]
        fs.add("attention.sliding_window", None, {"window": sw, "layers": attn},
               [cfg_ev("sliding_window", sw, "every attention layer sees a bounded window")], 0.7)
        fs.by_id["attention.sliding_window"]["layers"] = attn
    nope = nope_evidence(cfg)
    if nope is not None:
        layers = [p.index for p in plans if p.mixer_kind in ("mla", "gqa", "mha", "mqa")]
        fs.add("attention.nope", None, {}, [nope], 0.8)
        fs.by_id["attention.nope"]["layers"] = layers
    gated = any(p.ffn is not None and p.ffn.kind in ("dense", "moe", "latent_moe") and any(
        "gate" in s for s in p.ffn.claimed) for p in plans)
    act = activation_feature(cfg, gated)
    if act is not None:
        fs.add("ffn.activation", None, act["attrs"], act["evidence"], 0.9)


def _quant_features(fs: FeatureSet, table: TensorTable, roles: dict[str, QuantRole]) -> None:
    per: dict[str, dict] = {}
    for e in table.all_entries():
        r = e.role
        if r.scheme is None or r.metadata:
            continue
        row = per.setdefault(r.scheme, {"tensors": 0, "bits": r.bits, "group_size": r.group_size, "first": e,
                                        "layers": set()})
        row["tensors"] += e.count
    for layer_idx, layer in table.layers.items():
        for e in layer.values():
            if e.role.scheme and not e.role.metadata:
                per[e.role.scheme]["layers"].add(layer_idx)
    for scheme, row in per.items():
        e = row["first"]
        why = f"{e.dtype} storing {row['bits']}-bit values" + (
            f" in groups of {row['group_size']}" if row["group_size"] else "")
        fs.add(f"quant.{scheme}", None, {"tensors": row["tensors"], "bits": row["bits"],
                                         "group_size": row["group_size"]}, [ev(e, why)], 0.95)
        fs.by_id[f"quant.{scheme}"]["layers"] = sorted(row["layers"])
