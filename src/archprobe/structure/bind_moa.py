"""A mixture-of-attention mixer (MoA, JetMoE) from shapes: an expert bank of query projections
[E, X, H] beside one of output projections [E, H, X], a router [E, H] and a fused key-value projection
[2X, H] shared by all experts (X = kv heads x head dim); a bias-only [H] vector is the output bias.

The bank alone looks like an FFN expert bank; the [2X, H] reader of the same width X is what makes it
attention. The split of X into heads comes from the config (`kv_channels` or `num_key_value_heads`).
"""

from __future__ import annotations

from archprobe.structure.bind_ffn import Bound, ev
from archprobe.structure.card import Mixer
from archprobe.structure.modules import Module


def _parts(mods: list[Module], H: int):
    banks = [m for m in mods if len(m.shape) == 3 and m.shape[0] > 1]
    q = next((m for m in banks if m.shape[2] == H and m.shape[1] != H), None)
    if q is None:
        return None
    E, X = q.shape[0], q.shape[1]
    o = next((m for m in banks if m.shape == (E, H, X)), None)
    router = next((m for m in mods if m.shape == (E, H)), None)
    kv = next((m for m in mods if m.shape == (2 * X, H)), None)
    if o is None or router is None or kv is None:
        return None
    return q, o, router, kv


def has_moa(mods: list[Module], H: int) -> bool:
    return _parts(mods, H) is not None


def bind_moa(mods: list[Module], H: int, cfg) -> Bound | None:
    found = _parts(mods, H)
    if found is None:
        return None
    q, o, router, kv = found
    E, X = q.shape[0], q.shape[1]
    d, _ = cfg.first_int_at("kv_channels")
    kvh = X // d if d and X % d == 0 else None
    if kvh is None:
        kvh, _ = cfg.first_int_at("num_key_value_heads")
        d = X // kvh if kvh and X % kvh == 0 else None
        kvh = kvh if d else None
    mixer = Mixer("moa", num_heads=kvh, num_kv_heads=kvh, head_dim=d, num_experts=E)
    roles = {"router": router, "experts.q": q, "experts.o": o, "kv": kv}
    bias = next((m for m in mods if m.shape == (H,) and m.weight_leaf == "bias"), None)   # a bare `bias` [H]
    if bias is not None:
        roles["out"] = bias
    mixer.evidence = [ev(q, f"{E} attention experts: query projections [{X}, H] beside output projections "
                            f"[H, {X}]"), ev(kv, f"keys and values shared by the experts [2 x {X}, H]"),
                      ev(router, f"router [{E} experts, H]")]
    mixer.confidence = 0.8
    return Bound(mixer, roles, [m for m in mods if m not in roles.values()])
