"""MiniMax-01's lightning attention: linear attention with a fixed per-head decay, a [heads, hd, hd] state."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.formulas import linear_state
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"lightning_qkv": "qkv_proj", "o": "out_proj", "g": "output_gate", "norm": "norm",
         "slope_rate": "slope_rate"}
# roles stored as a bare Parameter (no `.weight` leaf)
BARE_ROLES = ("slope_rate",)


def cache(m, c: CacheContext):
    """A [heads, hd, hd] state, no convolution."""
    return "lightning", linear_state(m.num_heads, m.head_dim, m.head_dim, 0, 1, c.state_b, c.act_b)


@dataclass(frozen=True)
class Args:
    """archprobe.nn.lightning.LightningAttention's arguments; toy defaults."""
    num_heads: int = 4
    head_dim: int = 16
    norm_eps: float = 1e-6               # its output norm's eps


def fields(card, i, has, out):
    from archprobe.validate.plan import Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    if m.output_gate != "sigmoid_g_proj" or not has("mixer.norm") or not has("mixer.slope_rate"):
        raise Unsupported(f"{p}.mixer: lightning attention without its output gate, norm or slope_rate")
    out.update(num_heads=need_field(m.num_heads, f"{p}.mixer.num_heads"),
               head_dim=need_field(m.head_dim, f"{p}.mixer.head_dim"),
               norm_eps=need_field(m.norm_eps, f"{p}.mixer.norm_eps", "eps of the output RMSNorm"))


def build(a: Args, kind, model):
    from archprobe.nn.lightning import LightningAttention

    return LightningAttention(model.hidden_size, a.num_heads, a.head_dim, a.norm_eps)


def detect(mods, H, cfg):
    """Linear attention with a fixed per-head decay (MiniMax's lightning attention): a [heads, 1, 1] slope
    rate beside a fused qkv; the precomputed decay buffers ([heads, block, 1], [1, heads, block, block]).
    No depthwise convs (a layer with them is the conv kinds')."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import bind_roles, depthwise_convs
    from archprobe.structure.names import rank

    if depthwise_convs(mods):
        return None
    rate = next((m for m in mods if len(m.shape) == 3 and m.shape[1:] == (1, 1) and m.shape[0] > 1), None)
    if rate is None:
        return None
    nh = rate.shape[0]
    mats = [m for m in mods if len(m.shape) == 2]
    writer = next(iter(rank([m for m in mats if m.shape[0] == H], "mixer_out")), None)
    if writer is None or writer.shape[1] % nh:
        return None
    inner = writer.shape[1]
    qkv = next((m for m in mats if m.shape == (3 * inner, H)), None)
    gate = next((m for m in mats if m.shape == (inner, H) and m is not writer), None)
    norm = next((m for m in mods if m.shape == (inner,)), None)
    buffers = [m for m in mods if m is not rate and len(m.shape) >= 3 and nh in m.shape]
    mixer = Mixer("lightning", num_heads=nh, head_dim=inner // nh, fused_qkv=qkv is not None,
                  output_gate="sigmoid_g_proj" if gate is not None else None)
    mixer.evidence = [ev(rate, f"per-head decay rate [{nh}, 1, 1]: linear attention with a fixed decay"),
                      ev(writer, f"output projection [H, {inner}]")]
    b = Bound(mixer)
    pool = list(mods)
    bind_roles(b, pool, [("qkv", qkv), ("o", writer), ("g", gate), ("norm", norm), ("slope_rate", rate),
                         *[(f"decay.{m.leaf}", m) for m in buffers]])
    mixer.confidence = 0.8
    b.leftover = pool
    return b


KINDS = [Kind("lightning", "mixer", "Lightning", "#2e86c1", "linear_attention.lightning",
              lambda m, H: {"num_heads": m.num_heads, "head_dim": m.head_dim},
              required=("num_heads", "head_dim"), recurrent=True, cache=cache, nn_kind="lightning", args=Args,
              fields=fields, build=build, roles=ROLES,
              bare_roles=BARE_ROLES,
              detect=detect, detect_order=130)]
