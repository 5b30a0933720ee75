"""JetMoE's mixture of attention heads: routed query/output experts over one shared set of keys and values."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.attention import cache as kv_cache
from archprobe.kinds.spec import Kind

ROLES = {"router": "router", "experts.q": "q_experts", "experts.o": "o_experts", "kv": "kv_proj", "out": "out"}
# roles stored as a bare Parameter (no `.weight` leaf)
BARE_ROLES = ("experts.q", "experts.o")


def attrs(m, H):
    return {"num_experts": m.num_experts, "top_k": m.top_k, "num_heads": m.num_heads,
            "num_kv_heads": m.num_kv_heads, "head_dim": m.head_dim}


@dataclass(frozen=True)
class Args:
    """archprobe.nn.moa.MixtureOfAttention's arguments; toy defaults."""
    num_experts: int = 4
    top_k: int = 2
    num_kv_heads: int = 2
    head_dim: int = 16
    rope_theta: float | None = 10000.0
    rope: object = None                  # a Rope; None: rope_theta, default


def fields(card, i, has, out):
    from archprobe.validate.plan import card_rope, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    hd = need_field(m.head_dim, f"{p}.mixer.head_dim")
    out.update(num_experts=need_field(m.num_experts, f"{p}.mixer.num_experts"),
               top_k=need_field(m.top_k, f"{p}.mixer.top_k"), head_dim=hd,
               num_kv_heads=need_field(m.num_kv_heads, f"{p}.mixer.num_kv_heads"), rope=card_rope(card, hd, layer=i))
    out["rope_theta"] = out["rope"].theta


def build(a: Args, kind, model):
    from archprobe.nn.moa import MixtureOfAttention
    from archprobe.nn.rope import Rope

    rope = a.rope if a.rope is not None else Rope(a.rope_theta, a.head_dim)
    return MixtureOfAttention(model.hidden_size, a.num_experts, a.top_k, a.num_kv_heads, a.head_dim, rope)


def parts(mods, H):
    """(q bank, o bank, router, kv) of a mixture of attention (JetMoE): an expert bank of query projections
    [E, X, H] beside one of output projections [E, H, X], a router [E, H] and a fused key-value projection
    [2X, H] shared by all experts (X = kv heads x head dim); None otherwise. The bank alone looks like an FFN
    expert bank; the [2X, H] reader of the same width X is what makes it attention. X = H (JetMoE-8B: 16 KV
    heads of 128 = 2048) makes both banks [E, H, H]: the one whose name says it writes is o."""
    from archprobe.structure.names import says

    banks = [m for m in mods if len(m.shape) == 3 and m.shape[0] > 1]
    q = next((m for m in banks if m.shape[2] == H and m.shape[1] != H), None)
    if q is None:
        square = [m for m in banks if m.shape[1:] == (H, H)]
        writers = [m for m in square if says(m.path, "writer")]
        if len(square) != 2 or len(writers) != 1:
            return None
        q = next(m for m in square if m is not writers[0])
    E, X = q.shape[0], q.shape[1]
    o = next((m for m in banks if m.shape == (E, H, X) and m is not q), None)
    router = next((m for m in mods if m.shape == (E, H)), None)
    kv = next((m for m in mods if m.shape == (2 * X, H)), None)
    if o is None or router is None or kv is None:
        return None
    return q, o, router, kv


def has_moa(mods, H) -> bool:
    """Whether a layer group is a mixture of attention: structure/bind_layer.py classes it as a mixer."""
    return parts(mods, H) is not None


def detect(mods, H, cfg):
    """The experts of `parts`; the split of X into heads comes from the config (`kv_channels` or
    `num_key_value_heads`); a bias-only [H] vector is the output bias. No depthwise convs (a layer with them
    is the conv kinds')."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import depthwise_convs

    found = None if depthwise_convs(mods) else parts(mods, H)
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


# not in spec/contracts.md's vocabulary yet, so an id of its own; the experts share one K/V cache
KINDS = [Kind("moa", "mixer", "MoA", "#a0522d", "attention.moa", attrs,
              required=("num_experts", "top_k", "num_kv_heads", "head_dim"), cache=kv_cache, nn_kind="moa", args=Args,
              fields=fields, build=build, roles=ROLES,
              bare_roles=BARE_ROLES,
              detect=detect, detect_order=100)]
