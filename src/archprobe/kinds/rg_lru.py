"""Griffin's RG-LRU block (RecurrentGemma): a gated linear recurrence, one state value per channel."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.formulas import mamba2_state
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"x": "x", "y": "y", "o": "o", "conv1d": "conv1d", "input_gate": "input_gate",
         "recurrent_gate": "recurrent_gate", "a_param": "a_param"}


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
    from archprobe.validate.build import Unsupported, need_field

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


KINDS = [Kind("rg_lru", "mixer", "RG-LRU", "#48a9a6", "recurrent.rg_lru",
              lambda m, H: {"width": m.conv_dim, "conv_kernel": m.conv_kernel, "num_heads": m.num_heads},

              required=("conv_dim", "conv_kernel"), recurrent=True, cache=cache, nn_kind="rg_lru", args=Args,
              fields=fields, build=build, roles=ROLES)]
