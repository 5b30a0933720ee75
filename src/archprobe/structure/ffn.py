"""Which FFN a layer has: dense, MoE, or LatentMoE, and how its router is wired.

Experts are the folded `experts.*.` families (or stacked 3-D `experts.gate_up_proj` tensors); the
router is the [E, X] matrix whose row count equals the expert count. The expert input width L is
read from the expert matrices' logical shapes: L < H with a shared [L, H] down- and [H, L]
up-projection is LatentMoE; the router's input width says where routing happens (X = H: hidden,
X = L: latent). A norm of width L is the "Stable" latent norm.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archprobe.structure.config import ModelConfig
from archprobe.structure.evidence import cfg_ev, ev, find, matrices
from archprobe.structure.tensors import Entry


@dataclass
class FfnFinding:
    kind: str                                  # dense, moe, latent_moe, unknown
    attrs: dict = field(default_factory=dict)
    evidence: list[dict] = field(default_factory=list)
    extras: dict[str, dict] = field(default_factory=dict)
    num_experts: int = 0
    routed_params: int = 0
    confidence: float = 0.9
    claimed: set[str] = field(default_factory=set)   # layer suffixes this module owns


def _expert_entries(group: dict[str, Entry]) -> list[Entry]:
    return [e for r, e in group.items() if ".experts." in "." + r and "shared_expert" not in r
            and not e.role.metadata]


def _is_down(e: Entry) -> bool:
    leaf = e.suffix.rsplit("experts.", 1)[-1]
    return any(k in leaf for k in ("down", "w2", "fc2"))


def _router_activation(cfg: ModelConfig, has_bias: bool) -> tuple[str, bool]:
    """(activation, from_config)."""
    for key in ("moe_router_activation_func", "scoring_func", "router_activation", "score_function"):
        v = cfg.get(key)
        if isinstance(v, str) and v:
            return ("sigmoid" if "sigmoid" in v.lower() else "softmax"), True
    if cfg.model_type in ("nemotron_h", "deepseek_v3", "deepseek_v32", "kimi_linear", "glm4_moe"):
        return "sigmoid", True
    return ("sigmoid" if has_bias else "softmax"), False


def analyse_ffn(group: dict[str, Entry], H: int, cfg: ModelConfig) -> FfnFinding:
    experts = _expert_entries(group)
    if not experts:
        gate = find(group, "gate_proj", "w1", "fc1", "c_fc", "up_proj")
        down = find(group, "down_proj", "w2", "fc2", "c_proj")
        if gate is not None or down is not None:
            width = gate.shape[0] if gate is not None and len(gate.shape) == 2 else None
            e = gate or down
            return FfnFinding("dense", {"width": width}, [ev(e, f"dense MLP, width {width}")])
        return FfnFinding("unknown", {}, [ev(e, "unexplained FFN tensor") for e in list(group.values())[:2]],
                          confidence=0.3)
    stacked = [e for e in experts if len(e.shape) == 3]
    n_exp = max([e.count for e in experts] + [e.shape[0] for e in stacked])
    per_expert = [(e, e.shape[1:] if len(e.shape) == 3 else e.shape) for e in experts]
    ups = [(e, s) for e, s in per_expert if len(s) == 2 and not _is_down(e)]
    downs = [(e, s) for e, s in per_expert if len(s) == 2 and _is_down(e)]
    width = expert_in = None
    if ups:
        e, s = ups[0]
        width, expert_in = (s[0] // 2 if "gate_up" in e.suffix else s[0]), s[1]
    elif downs:
        expert_in, width = downs[0][1]
    routed_params = sum(e.params for e in experts)
    mats = [m for m in matrices(group) if m not in experts and "shared_expert" not in m.suffix]
    router = next((m for m in mats if m.shape[0] == n_exp), None)
    bias = next((e for r, e in group.items() if len(e.shape) == 1 and e.shape[0] == n_exp
                 and ("bias" in r or "correction" in r)), None)
    activation, from_cfg = _router_activation(cfg, bias is not None)
    f = FfnFinding("moe", num_experts=n_exp, routed_params=routed_params)
    f.attrs = {"num_experts": n_exp, "top_k": cfg.top_k, "expert_width": width,
               "router": activation, "router_source": "config" if from_cfg else "inferred"}
    f.evidence = [ev(per_expert[0][0], f"{n_exp} routed experts, each {width} wide")]
    if router is not None:
        f.evidence.append(ev(router, f"router [{n_exp} experts, {router.shape[1]}]"))
    if bias is not None:
        f.extras["moe.router_bias"] = {"attrs": {}, "evidence": [ev(bias, "selection bias on router scores")]}
    shared = [e for r, e in group.items() if "shared_expert" in r and len(e.shape) == 2
              and "shared_expert_gate" not in r]
    if shared:
        s_width = min(e.shape[0] if e.shape[1] == H else e.shape[1] for e in shared)
        count = cfg.num_shared_experts or 1
        attrs = {"count": count, "width": s_width}
        sg = find(group, "shared_expert_gate")
        if sg is not None:
            attrs["gated"] = True
        f.extras["moe.shared_experts"] = {"attrs": attrs, "evidence": [ev(shared[0], f"always-on expert MLP, "
                                                                                      f"{s_width} wide")]}
    if expert_in is not None and expert_in < H:
        down = next((m for m in mats if m.shape == (expert_in, H)), None)
        up = next((m for m in mats if m.shape == (H, expert_in)), None)
        if down is not None and up is not None:
            norm = next((e for r, e in group.items() if len(e.shape) == 1 and e.shape[0] == expert_in
                         and "shared" not in r), None)
            space = "hidden" if router is not None and router.shape[1] == H else (
                "latent" if router is not None and router.shape[1] == expert_in else "unknown")
            f.kind = "latent_moe"
            lat = {"latent_size": expert_in, "routing_space": space, "latent_norm": norm is not None}
            lev = [ev(down, f"latent down-projection H={H} -> {expert_in}"),
                   ev(up, f"latent up-projection {expert_in} -> H"),
                   ev(per_expert[0][0], f"experts take the {expert_in}-wide latent, not H={H}")]
            if router is not None:
                lev.append(ev(router, f"router input width {router.shape[1]}: routing in {space} space"))
            if norm is not None:
                lev.append(ev(norm, f"RMSNorm on the {expert_in}-wide expert sum (Stable LatentMoE)"))
            f.extras["moe.latent"] = {"attrs": lat, "evidence": lev}
            f.attrs["latent_size"] = expert_in
    return f


def activation_feature(cfg: ModelConfig, gated: bool) -> dict | None:
    act = cfg.get("hidden_act") or cfg.get("mlp_hidden_act") or cfg.get("activation_function")
    if not isinstance(act, str):
        return None
    a = act.lower()
    name = {"silu": "swiglu" if gated else "silu", "swish": "swiglu" if gated else "silu",
            "gelu": "geglu" if gated else "gelu", "gelu_pytorch_tanh": "geglu" if gated else "gelu",
            "relu2": "relu2", "situ": "situ"}.get(a, a)
    attrs = {"name": name}
    if a == "situ":
        attrs.update(beta=cfg.get("activation_situ_beta"), linear_beta=cfg.get("activation_situ_linear_beta"))
    return {"attrs": attrs, "evidence": [cfg_ev("hidden_act" if cfg.get("hidden_act") else "mlp_hidden_act",
                                                act, f"FFN activation ({'gated' if gated else 'plain'})")]}
