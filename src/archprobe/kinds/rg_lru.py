"""Griffin's RG-LRU block (RecurrentGemma): a gated linear recurrence, one state value per channel."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.formulas import mamba2_state
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"x": "x", "y": "y", "o": "o", "conv1d": "conv1d", "input_gate": "input_gate",
         "recurrent_gate": "recurrent_gate", "a_param": "a_param"}
# roles stored as a bare Parameter (no `.weight` leaf)
BARE_ROLES = ("a_param",)


def cache(m, c: CacheContext):
    """One recurrent vector per channel + (kernel - 1) conv inputs."""
    return "rg_lru", mamba2_state(1, m.conv_dim, 1, m.conv_dim, m.conv_kernel or 4, c.state_b, c.act_b)


@dataclass(frozen=True)
class Args:
    """archprobe.nn.rg_lru.RGLRUBlock's arguments; toy defaults."""
    width: int = 64
    num_heads: int = 4
    conv_kernel: int = 4
    activation: str = "gelu_pytorch_tanh"   # the y branch's: the model's hidden activation (Griffin: GeLU)


def fields(card, i, has, out):
    """The y branch's activation is the model's hidden activation (Griffin: GeLU)."""
    from archprobe.validate.plan import Unsupported, need_field

    layer = card.layers[i]
    m, f = layer.mixer, layer.ffn
    p = f"layers.{i}"
    need = [f"mixer.{r}" for r in ("x", "y", "o", "conv1d", "input_gate", "recurrent_gate", "a_param")]
    need += [f"mixer.{r}.bias" for r in ("x", "y", "o", "conv1d", "input_gate", "recurrent_gate")]
    if not all(has(r) for r in need):
        raise Unsupported(f"{p}.mixer: an RG-LRU block without {next(r for r in need if not has(r))}")
    out.update(width=need_field(m.conv_dim, f"{p}.mixer.conv_dim"),
               num_heads=need_field(m.num_heads, f"{p}.mixer.num_heads"),
               conv_kernel=need_field(m.conv_kernel, f"{p}.mixer.conv_kernel"),
               activation=need_field(f.activation, f"{p}.ffn.activation", "the model's hidden activation"))


def build(a: Args, kind, model):
    from archprobe.nn.rg_lru import RGLRUBlock

    return RGLRUBlock(model.hidden_size, a.width, a.num_heads, a.conv_kernel, a.activation)


def detect(mods, H, cfg):
    """Griffin's RG-LRU (RecurrentGemma): block-diagonal input and recurrence gates [heads, b, b] (+ [heads, b]
    biases) over the conv's width C, a per-channel recurrence parameter [C], two [C, H] input branches (x
    through the conv, y a gate). Names break ties only between same-shaped tensors (the two gates, x vs y)."""
    from archprobe.structure.bind_ffn import Bound, ev
    from archprobe.structure.card import Mixer
    from archprobe.structure.mixer_shapes import bind_roles, one_conv_layer, one_conv_writer, vec_len
    from archprobe.structure.names import rank

    layer = one_conv_layer(mods)
    if layer is None:
        return None
    pool, conv, vecs, mats = layer.pool, layer.convs[0], layer.vecs, layer.mats
    C = conv.shape[0]
    blocks = [m for m in pool if len(m.shape) == 3 and m not in layer.convs
              and m.shape[1] == m.shape[2] and m.shape[0] * m.shape[1] == C]
    if len(blocks) < 2:
        return None
    writer = one_conv_writer(mats, H)
    ig, rg = rank(blocks[:2], "input_gate", "recurrent_gate")
    a = next((v for v in vecs if vec_len(v) == C), None)
    xs = rank([m for m in mats if m.shape == (C, H) and m is not writer], "linear_x", "linear_y")
    gate_biases = [m for m in pool if len(m.shape) == 2 and m.shape == blocks[0].shape[:2]]
    igb, rgb = (rank(gate_biases, "input_gate_bias", "recurrent_gate_bias")
                + [None, None])[:2]
    mixer = Mixer("rg_lru", conv_dim=C, conv_kernel=conv.shape[-1], num_heads=blocks[0].shape[0],
                  head_dim=blocks[0].shape[1])
    mixer.evidence = [ev(ig, f"block-diagonal gate {list(ig.shape)} over a {C}-wide recurrence (RG-LRU)"),
                      ev(conv, f"depthwise conv [{C}, 1, {conv.shape[-1]}]")]
    b = Bound(mixer)
    bind_roles(b, pool, (("x", xs[0] if xs else None), ("y", xs[1] if len(xs) > 1 else None), ("conv1d", conv),
                         ("input_gate", ig), ("input_gate.bias", igb), ("recurrent_gate", rg),
                         ("recurrent_gate.bias", rgb), ("a_param", a), ("o", writer)))
    mixer.confidence = 0.8
    b.leftover = pool
    return b


KINDS = [Kind("rg_lru", "mixer", "RG-LRU", "#48a9a6", "recurrent.rg_lru",
              lambda m, H: {"width": m.conv_dim, "conv_kernel": m.conv_kernel, "num_heads": m.num_heads},

              required=("conv_dim", "conv_kernel"), recurrent=True, cache=cache, nn_kind="rg_lru", args=Args,
              fields=fields, build=build, roles=ROLES,
              bare_roles=BARE_ROLES,
              detect=detect, detect_order=30)]
