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
EXPERT_RE = re.compile(r"^(?P<head>.*experts)\.(?P<e>\d+)\.(?P<leaf>\w+)\.weight(?P<part>_packed|_scale)?$")
RES_RE = re.compile(r"^(?P<head>.*?)(?P<site>self_attention_res|mlp_res|output_attn_res)_(?P<part>proj|norm)\.weight$")


class LoadError(ArchprobeError):
    pass


def tensor_of(t):
    """A tensor, or a zero-argument loader that produces one (streamed loading reads lazily)."""
    return t() if callable(t) else t


def sanitize(tensors: dict, module: nn.Module | None = None) -> dict[str, torch.Tensor]:
    """Checkpoint names -> module state-dict names (stack experts, reshape A_log, AttnRes pairs).

    Values may be tensors or zero-argument loaders; experts are then read one at a time straight into
    their stacked [E, ...] tensor, so a layer's expert weights exist once, never twice.
    """
    out: dict[str, torch.Tensor] = {}
    experts: dict[tuple[str, str], dict[int, object]] = {}
    for name, t in tensors.items():
        m = EXPERT_RE.match(name)
        if m and m.group("leaf") in EXPERT_LEAVES:
            leaf = EXPERT_LEAVES[m.group("leaf")] + (m.group("part") or "")
            experts.setdefault((m.group("head"), leaf), {})[int(m.group("e"))] = t
            continue
        r = RES_RE.match(name)
        if r:
            part = "proj" if r.group("part") == "proj" else "norm"
            out[f"{r.group('head')}{r.group('site')}.{part}.weight"] = tensor_of(t)
            continue
        t = tensor_of(t)
        if name.endswith("A_log") and t.dim() == 4:
            t = t.reshape(-1)
        out[name] = t
    for (head, _), by_e in experts.items():
        n = max(by_e) + 1
        if sorted(by_e) != list(range(n)):
            raise LoadError(f"{head}: expert indices are not 0..{n - 1} (got {len(by_e)} experts)")
    heads = {h for h, _ in experts}
    for head in heads:
        for part in ("", "_packed", "_scale"):   # dense experts, or MXFP4 kept packed (ExpertBank storage)
            gate, up, down = (experts.get((head, k + part)) for k in ("gate_proj", "up_proj", "down_proj"))
            if gate is not None and up is not None:
                out[f"{head}.gate_up_proj{part}"] = _stack([gate, up], len(gate))   # gate rows first
            elif gate is not None or up is not None:
                leaf = "gate_proj" if gate is not None else "up_proj"
                out[f"{head}.{leaf}{part}"] = _stack([gate or up], len(gate or up))
            if down is not None:
                out[f"{head}.down_proj{part}"] = _stack([down], len(down))
    return out


def _stack(parts: list[dict[int, object]], n: int) -> torch.Tensor:
    """[E, sum of rows, cols] from per-expert pieces, filled one expert at a time."""
    first = [tensor_of(p[0]) for p in parts]
    rows = [f.shape[0] for f in first]
    out = torch.empty(n, sum(rows), first[0].shape[1], dtype=first[0].dtype)
    for e in range(n):
        offset = 0
        for k, p in enumerate(parts):
            t = first[k] if e == 0 else tensor_of(p[e])
            out[e, offset: offset + rows[k]] = t
            offset += rows[k]
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
