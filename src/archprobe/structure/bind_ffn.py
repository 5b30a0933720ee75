"""The FFN part of a layer from shapes: dense MLP, routed-expert bank (MoE), LatentMoE.

A routed-expert bank is an enumerated family of same-shaped modules (folded as `*` by the header
reader, whatever the container is called) or a stacked [E, a, b] tensor; its router is the [E, X]
matrix beside it, a 1-D [E] vector the selection bias. The bank's model-side width X is H, or a latent
L < H when an [L, H] down- and an [H, L] up-projection sit beside it (LatentMoE; a 1-D [L] vector is the
latent norm). Always-on (shared) experts are the MLP left over on H; a [1, H] matrix is their gate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archprobe.structure.card import Ffn, Router, Shared
from archprobe.structure.modules import Module
from archprobe.structure.names import rank, says
from archprobe.structure.widths import mat, mlp_roles


@dataclass
class Bound:
    """A part found in a layer: the card part, its param roles -> modules, and what it left over."""

    part: object
    roles: dict[str, Module] = field(default_factory=dict)
    leftover: list[Module] = field(default_factory=list)


def ev(m: Module, why: str) -> dict:
    e = m.weight
    count = f" (x{e.count})" if e is not None and e.count > 1 else ""
    return {"tensor": e.name if e is not None else m.path, "shape": list(e.info.shape) if e is not None else None,
            "dtype": e.dtype if e is not None else None, "why": why + count}


def _banks(mods: list[Module]) -> dict[str, list[Module]]:
    """Bank path -> member modules: enumerated (`*` in the path) or stacked [E, a, b]."""
    banks: dict[str, list[Module]] = {}
    for m in mods:
        if "*" in m.path and m.count > 1 and mat(m) is not None and len(m.shape) == 2:
            banks.setdefault(m.path.split(".*", 1)[0] + ".*", []).append(m)
        elif len(m.shape) == 3 and m.shape[1] > 1 and m.shape[2] > 1 and m.shape[0] > 1:
            banks.setdefault(m.path.rpartition(".")[0] or "<stacked>", []).append(m)
    # a stacked [E, a, b] tensor beside a depthwise conv belongs to a mixer (Griffin's block-diagonal gates)
    if any(len(m.shape) == 3 and m.shape[1] == 1 and m.shape[2] > 1 for m in mods):
        banks = {k: v for k, v in banks.items() if "*" in k}
    return {k: v for k, v in banks.items() if len(v) >= 1}


def _bank_roles(bank: list[Module], X: int, transposed: bool) -> dict | None:
    r = mlp_roles(bank, X, transposed)
    if r is None and len(bank) > 3:       # extra same-bank tensors: keep the three that form the MLP
        r = mlp_roles(sorted(bank, key=lambda m: -m.weight.params)[:3], X, transposed)
    return r


def _flat_bank(mods: list[Module], H: int) -> tuple[list[Module], Module, int] | None:
    """Experts stored flattened: two or more [E * I, H] matrices beside an [E, H] router (DBRX)."""
    routers = [m for m in mods if len(m.shape) == 2 and m.shape[1] == H and 1 < m.shape[0] < H]
    for r in sorted(routers, key=lambda m: m.shape[0]):
        E = r.shape[0]
        same: dict[tuple, list[Module]] = {}
        for m in mods:
            if m is not r and len(m.shape) == 2 and m.shape[1] == H and m.shape[0] % E == 0 and m.shape[0] > E:
                same.setdefault(m.shape, []).append(m)
        bank = max(same.values(), key=len, default=[])
        if len(bank) >= 2:
            return bank, r, E
    return None


def has_bank(mods: list[Module], H: int | None = None) -> bool:
    return bool(_banks(mods)) or (H is not None and _flat_bank(mods, H) is not None)


def bind_flat_moe(mods: list[Module], H: int) -> Bound | None:
    found = _flat_bank(mods, H)
    if found is None:
        return None
    bank, router, E = found
    width = bank[0].shape[0] // E
    down = next((m for m in bank if says(m.path, "ffn_down")), None)
    rest_bank = [m for m in bank if m is not down]
    gate, up = (rank(rest_bank, "expert_gate") + [None])[:2]
    ffn = Ffn("moe", num_experts=E, expert_width=width, gated=up is not None,
              router=Router(input="hidden", selection_bias=False),
              layout={"experts": "flattened", "down_transposed": True})
    ffn.evidence = [ev(bank[0], f"{E} routed experts flattened into [{E} x {width}, H] matrices"),
                    ev(router, f"router [{E} experts, {H}]")]
    ffn.confidence = 0.8
    roles = {"router": router, "experts.gate": gate, "experts.up": up, "experts.down": down}
    roles = {k: v for k, v in roles.items() if v is not None}
    return Bound(ffn, roles, [m for m in mods if m not in roles.values()])


def bind_dense(mods: list[Module], H: int, transposed_hint: bool | None = None) -> Bound | None:
    r = mlp_roles(mods, H, transposed_hint)
    if r is None:
        return None
    ffn = Ffn("dense", gated=r["gated"], width=r["width"], layout=dict(r["layout"]),
              bias=any(m.bias is not None for m in mods if mat(m)))
    roles = {k: r[k] for k in ("gate", "up", "down", "gate_up") if k in r}
    ffn.evidence = [ev(r["down"], f"dense MLP {'(gated) ' if r['gated'] else ''}{H} -> {r['width']} -> {H}")]
    ffn.confidence = 0.9
    return Bound(ffn, roles, [m for m in mods if m not in roles.values()])


def bind_moe(mods: list[Module], H: int) -> Bound | None:
    banks = _banks(mods)
    if not banks:
        return None
    key = max(banks, key=lambda k: sum(m.weight.params for m in banks[k]))
    bank = banks[key]
    stacked = len(bank[0].shape) == 3
    E = bank[0].shape[0] if stacked else bank[0].count
    rest = [m for m in mods if m not in bank]
    # the bank reads H directly, or a latent L: an [L, H] and an [H, L] matrix beside it with L a bank width.
    # Readings are tried in this order: [out, in] on H, [out, in] on a latent, then [in, out] (stacked banks)
    dims = {d for m in bank for d in mat(m)}
    lat_cands = []
    for m in rest:
        ab = mat(m)
        if ab and len(m.shape) == 2 and ab[1] == H and ab[0] in dims and ab[0] < H:
            up = next((u for u in rest if u.shape == (H, ab[0])), None)
            if up is not None:
                lat_cands.append((ab[0], m, up))
    # the bank read at the hidden width, else at a latent width; first as stored [out, in], then transposed
    latent, r = None, None
    for transposed in (False, True):
        for cand in (None, *lat_cands):
            r = _bank_roles(bank, cand[0] if cand else H, transposed)
            if r is not None:
                latent = cand
                break
        if r is not None:
            break
    X = latent[0] if latent else H
    ffn = Ffn("latent_moe" if latent else "moe", num_experts=E, router=Router())
    roles: dict[str, Module] = {}
    ffn.layout["experts"] = "stacked" if stacked else "enumerated"
    prefix = "experts." if stacked else "experts.*."
    if r is not None:
        ffn.gated, ffn.expert_width = r["gated"], r["width"]
        if r["layout"].get("transposed"):
            ffn.layout["stacked_transposed" if stacked else "transposed"] = True
        if "gate_up" in r["layout"]:
            ffn.layout["gate_up"] = r["layout"]["gate_up"]
        roles.update({prefix + k: r[k] for k in ("gate", "up", "down", "gate_up") if k in r})
        ffn.bias = any(m.bias is not None for m in bank)
    ffn.evidence = [ev(bank[0], f"{E} routed experts (an enumerated family of same-shaped tensors)" if not stacked
                       else f"{E} routed experts stacked in one [E, ...] tensor")]
    # router [E, X'] with X' in {H, L}
    router = next((m for m in rest if len(m.shape) == 2 and m.shape[0] == E and m.shape[1] in (H, X)), None)
    if router is None:
        router = next((m for m in rest if len(m.shape) == 2 and m.shape[1] == E and m.shape[0] in (H, X)), None)
        if router is not None:
            ffn.layout["router_transposed"] = True
    if router is not None:
        roles["router"] = router
        ffn.router.input = "hidden" if router.shape[-1] == H or router.shape[0] == H else "latent"
        ffn.evidence.append(ev(router, f"router [{E} experts, {router.shape[1]}]"))
        rest.remove(router)
        if router.bias is not None:
            ffn.layout["router_bias"] = "linear"
    sel = next((m for m in rest if m.shape in ((E,), (1, E)) and m.bias is None), None)
    if sel is not None:
        roles["router.bias" if router is None or router.bias is None else "router.selection_bias"] = sel
        ffn.router.selection_bias = True
        ffn.evidence.append(ev(sel, "selection bias on the router scores"))
        rest.remove(sel)
    elif router is not None:
        ffn.router.selection_bias = False
    if latent is not None:
        L, down, up = latent
        roles["latent_down"], roles["latent_up"] = down, up
        rest = [m for m in rest if m is not down and m is not up]
        ffn.latent_size = L
        norm = next((m for m in rest if m.shape == (L,)), None)
        ffn.latent_norm = norm is not None
        if norm is not None:
            roles["latent_norm"] = norm
            rest.remove(norm)
        ffn.evidence += [ev(down, f"latent down-projection H={H} -> {L}"), ev(up, f"latent up-projection {L} -> H")]
    # shared experts: an MLP on H among the rest, and a [1, H] gate
    sgate = next((m for m in rest if m.shape == (1, H)), None)
    mats = [m for m in rest if mat(m) is not None and m is not sgate and len(m.shape) == 2]
    shared = mlp_roles(mats, H) if mats else None
    if shared is None and mats:                  # more than one MLP left: the named one, else the largest
        named = [m for m in mats if says(m.path, "shared_expert")]
        shared = mlp_roles(named, H) if named else None
    if shared is not None:
        ffn.shared = Shared(count=1, width=shared["width"], gated=sgate is not None)
        roles.update({"shared." + k: shared[k] for k in ("gate", "up", "down", "gate_up") if k in shared})
        used = {id(shared[k]) for k in ("gate", "up", "down", "gate_up") if k in shared}
        rest = [m for m in rest if id(m) not in used]
        ffn.evidence.append(ev(shared["down"], f"always-on expert MLP, {shared['width']} wide"))
        if sgate is not None:
            roles["shared_gate"] = sgate
            rest.remove(sgate)
    out_bias = next((m for m in rest if m.shape == (H,) and m.weight_leaf == "bias"), None)
    if out_bias is not None:      # a bare `bias` [H] added to the experts' sum (JetMoE's MoE)
        roles["out"] = out_bias
        rest.remove(out_bias)
        ffn.evidence.append(ev(out_bias, "output bias added to the routed experts' sum"))
    ffn.confidence = 0.95 if router is not None else 0.6
    return Bound(ffn, roles, rest)
