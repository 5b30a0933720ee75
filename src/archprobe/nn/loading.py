"""Loading checkpoint tensors into archprobe.nn modules by name, strictly.

Parameter names follow the checkpoints, so loading is mostly by name; `sanitize` does the few
structural fixes: per-expert tensors `experts.{e}.<w>` are stacked into the ExpertBank's [E, ...]
parameters (`w1`/`gate_proj` and `w3`/`up_proj` fused into gate_up_proj, `w2`/`down_proj` -> down_proj),
an `A_log` stored as [1, 1, H, 1] (Kimi Linear) is flattened, and PseudoQuery pairs map from
`*_res_proj` / `*_res_norm`. Loading reports sorted missing and unexpected keys and every shape
mismatch in one error.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from archprobe.errors import ArchprobeError

EXPERT_LEAVES = {"w1": "gate_proj", "gate_proj": "gate_proj", "w3": "up_proj", "up_proj": "up_proj",
                 "w2": "down_proj", "down_proj": "down_proj"}
EXPERT_RE = re.compile(r"^(?P<head>.*experts)\.(?P<e>\d+)\.(?P<leaf>\w+)\.weight$")
RES_RE = re.compile(r"^(?P<head>.*?)(?P<site>self_attention_res|mlp_res|output_attn_res)_(?P<part>proj|norm)\.weight$")


class LoadError(ArchprobeError):
    pass


def sanitize(tensors: dict[str, torch.Tensor], module: nn.Module | None = None) -> dict[str, torch.Tensor]:
    """Checkpoint names -> module state-dict names (stack experts, reshape A_log, AttnRes pairs)."""
    out: dict[str, torch.Tensor] = {}
    experts: dict[tuple[str, str], dict[int, torch.Tensor]] = {}
    for name, t in tensors.items():
        m = EXPERT_RE.match(name)
        if m and m.group("leaf") in EXPERT_LEAVES:
            experts.setdefault((m.group("head"), EXPERT_LEAVES[m.group("leaf")]), {})[int(m.group("e"))] = t
            continue
        r = RES_RE.match(name)
        if r:
            part = "proj" if r.group("part") == "proj" else "norm"
            out[f"{r.group('head')}{r.group('site')}.{part}.weight"] = t
            continue
        if name.endswith("A_log") and t.dim() == 4:
            t = t.reshape(-1)
        out[name] = t
    stacked: dict[tuple[str, str], torch.Tensor] = {}
    for (head, leaf), by_e in experts.items():
        n = max(by_e) + 1
        if sorted(by_e) != list(range(n)):
            raise LoadError(f"{head}: expert indices are not 0..{n - 1} (got {len(by_e)} experts)")
        stacked[(head, leaf)] = torch.stack([by_e[e] for e in range(n)])
    for (head, leaf), t in stacked.items():
        if leaf == "up_proj" and (head, "gate_proj") in stacked:
            out[f"{head}.gate_up_proj"] = torch.cat([stacked[(head, "gate_proj")], t], dim=1)   # gate rows first
        elif leaf != "gate_proj" or (head, "up_proj") not in stacked:
            out[f"{head}.{leaf}"] = t
    return out


def load_strict(module: nn.Module, state: dict[str, torch.Tensor], *, what: str = "module",
                assign: bool = False) -> None:
    """Copy `state` into `module`; one error listing missing/unexpected keys and shape mismatches.

    `assign=True` adopts the given tensors instead of copying (for modules built on the meta device, so a
    streamed layer never holds two copies of its weights)."""
    own = module.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    mismatched = sorted(f"{k}: checkpoint {list(state[k].shape)} vs module {list(own[k].shape)}"
                        for k in set(own) & set(state) if tuple(state[k].shape) != tuple(own[k].shape))
    if missing or unexpected or mismatched:
        parts = []
        for label, items in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", mismatched)):
            if items:
                parts.append(f"{label} ({len(items)}): " + ", ".join(items[:8]) + (" ..." if len(items) > 8 else ""))
        raise LoadError(f"{what}: " + "; ".join(parts))
    if assign:
        module.load_state_dict({k: state[k].to(own[k].dtype) for k in own}, strict=True, assign=True)
        return
    with torch.no_grad():
        for k, t in own.items():
            t.copy_(state[k].to(t.dtype))
