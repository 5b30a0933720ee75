"""Split each decoder layer's tensors into mixer, FFN and loose (norms, residual) groups, then
ask the detectors what each group is. The result is the per-layer plan, printable as data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archprobe.structure.config import ModelConfig
from archprobe.structure.ffn import FfnFinding, analyse_ffn
from archprobe.structure.mixers import MixerFinding, analyse_mixer
from archprobe.structure.tensors import Entry

ATTN_KEYS = ("q_proj", "k_proj", "v_proj", "qkv_proj", "kv_a_proj_with_mqa", "q_a_proj", "query",
             "query_key_value", "c_attn", "Wqkv", "wqkv", "A_log", "in_proj", "in_proj_qkvz", "dt_bias")
FFN_KEYS = ("experts", "gate_proj", "up_proj", "down_proj", "w1", "w2", "w3", "fc1", "fc2", "c_fc",
            "gate_up_proj", "router", "fc1_latent_proj")


@dataclass
class LayerPlan:
    index: int
    mixer: MixerFinding | None = None
    ffn: FfnFinding | None = None
    loose: dict[str, Entry] = field(default_factory=dict)
    unexplained: list[Entry] = field(default_factory=list)

    @property
    def mixer_kind(self) -> str:
        return self.mixer.kind if self.mixer else "none"

    @property
    def ffn_kind(self) -> str:
        return self.ffn.kind if self.ffn else "none"


def _groups(layer: dict[str, Entry]) -> dict[str, dict[str, Entry]]:
    out: dict[str, dict[str, Entry]] = {}
    for rest, e in layer.items():
        head, dot, tail = rest.partition(".")
        if not dot or tail in ("weight", "bias"):
            out.setdefault("", {})[rest] = e
        else:
            out.setdefault(head, {})[tail] = e
    return out


def _role(group: dict[str, Entry]) -> str:
    names = " ".join("." + r.replace(".", " . ") + " " for r in group)
    tokens = set(names.replace(".", " ").split())
    if "experts" in tokens or any(k in tokens for k in ("router", "fc1_latent_proj")):
        return "ffn"
    if any(k in tokens for k in ATTN_KEYS) or any("indexer" in r for r in group):
        return "mixer"
    if any(k in tokens for k in FFN_KEYS):
        return "ffn"
    return "loose"


# Leaf names of attention / FFN submodules that the detectors understand (besides their evidence).
KNOWN_LEAVES = {
    "q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "out_proj", "g_proj", "g_a_proj", "g_b_proj",
    "q_a_proj", "q_b_proj", "q_a_layernorm", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj",
    "q_norm", "k_norm", "q_conv1d", "k_conv1d", "v_conv1d", "conv1d", "f_a_proj", "f_b_proj", "b_proj",
    "dt_bias", "A_log", "D", "o_norm", "norm", "in_proj", "in_proj_qkvz", "in_proj_ba", "k_b_proj",
    "v_b_proj", "query_key_value", "dense", "c_attn", "c_proj", "rotary_emb", "inv_freq",
    "gate_proj", "up_proj", "down_proj", "gate_up_proj", "w1", "w2", "w3", "fc1", "fc2", "c_fc", "gate",
    "e_score_correction_bias", "expert_bias", "router", "shared_expert_gate", "weight_packed",
    "weight_scale", "weight_scale_inv", "weight_zero_point", "weight_global_scale", "input_global_scale",
    "weight_shape", "qweight", "qzeros", "scales", "g_idx", "biases", "SCB", "absmax", "quant_map",
    "routed_expert_down_proj", "routed_expert_up_proj", "routed_expert_norm", "fc1_latent_proj",
    "fc2_latent_proj", "wq_b", "wk", "weights_proj", "input_scale", "k_scale", "v_scale",
}


def _unexplained(head: str, group: dict[str, Entry], evidence: list[dict]) -> list[Entry]:
    shown = {row["tensor"] for row in evidence}
    out = []
    for r, e in group.items():
        parts = [p for p in r.split(".") if p not in ("weight", "bias") and not p.isdigit() and p != "*"]
        if e.name in shown or any(p in KNOWN_LEAVES for p in parts[-2:]) or \
                any(p in ("experts", "shared_experts", "shared_expert", "indexer") for p in parts):
            continue
        out.append(e)
    return out


def analyse_layer(index: int, layer: dict[str, Entry], H: int, cfg: ModelConfig) -> LayerPlan:
    plan = LayerPlan(index)
    for head, group in _groups(layer).items():
        role = _role(group) if head else "loose"
        if role == "mixer" and plan.mixer is None:
            plan.mixer = analyse_mixer(group, H, cfg)
            plan.mixer.claimed = {f"{head}.{r}" for r in group}
            plan.unexplained += _unexplained(head, group, plan.mixer.evidence)
        elif role == "ffn" and plan.ffn is None:
            plan.ffn = analyse_ffn(group, H, cfg)
            plan.ffn.claimed = {f"{head}.{r}" for r in group}
            plan.unexplained += _unexplained(head, group, plan.ffn.evidence)
        else:
            plan.loose.update({(f"{head}.{r}" if head else r): e for r, e in group.items()})
    return plan
