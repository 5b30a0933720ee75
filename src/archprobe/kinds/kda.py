"""Kimi Delta Attention: a gated delta rule with a per-channel decay, a [heads, K, V] state per sequence."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.kinds.formulas import linear_state
from archprobe.kinds.spec import CacheContext, Kind

ROLES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "q_conv": "q_conv1d", "k_conv": "k_conv1d",
         "v_conv": "v_conv1d", "f_a": "f_a_proj", "f_b": "f_b_proj", "g_a": "g_a_proj", "g_b": "g_b_proj",
         "g": "g_proj", "b": "b_proj", "A_log": "A_log", "dt_bias": "dt_bias", "o_norm": "o_norm", "f": "f_proj"}


def attrs(m, H):
    a = {"num_heads": m.num_heads, "head_dim": m.head_dim, "conv_kernel": m.conv_kernel,
         "gate_lower_bound": m.gate_lower_bound, "output_gate": m.output_gate}
    if m.a_log_stored is not None:
        a["a_log_stored"] = m.a_log_stored
    return a


def cache(m, c: CacheContext):
    h, d = m.num_heads, m.head_dim
    return "kda", linear_state(h, d, d, 3 * h * d, m.conv_kernel or 4, c.state_b, c.act_b)


def act_width(m):
    # KDA as the modules run it for inference (the fused recurrence, ops/native): projections, conv,
    # normalised q/k, gate, their float32 copies and the read-out: ~20 h d per token alive at once
    # (measured, tests/memory/test_measured.py; the chunked form held ~24 h d and [C, C] products)
    return 20 * (m.num_heads or 0) * (m.head_dim or 0)


@dataclass(frozen=True)
class Args:
    """archprobe.nn.kda.KimiDeltaAttention's arguments; toy defaults (K3's bounded gate)."""
    num_heads: int = 4
    head_dim: int = 16
    conv_kernel: int = 4
    gate: str = "bounded"                # bounded (K3) | softplus (Kimi Linear)
    gate_lower_bound: float = -5.0
    output_gate: str = "full_rank"       # full_rank (g_proj) | low_rank (g_a_proj, g_b_proj)
    a_log_len: int | None = None         # the stored A_log length (K3 pads it to 128); None: num_heads
    decay_rank: int | None = None        # 0: a full-rank decay projection f_proj (Bailing); None: head_dim
    chunk_size: int | None = None        # chunk of kda_chunked; None: the op's choice (the fused kernel on CPU)


def fields(card, i, has, out):
    from archprobe.validate.build import Unsupported, need_field

    m = card.layers[i].mixer
    p = f"layers.{i}"
    out.update(num_heads=need_field(m.num_heads, f"{p}.mixer.num_heads"),
               head_dim=need_field(m.head_dim, f"{p}.mixer.head_dim"),
               conv_kernel=need_field(m.conv_kernel, f"{p}.mixer.conv_kernel"),
               gate="bounded" if m.gate_lower_bound is not None else "softplus",
               gate_lower_bound=m.gate_lower_bound if m.gate_lower_bound is not None else -5.0,
               output_gate="full_rank" if has("mixer.g") else "low_rank", a_log_len=m.a_log_stored,
               decay_rank=0 if has("mixer.f") else None)
    if has("mixer.f") and (has("mixer.f_a") or has("mixer.f_b")):
        raise Unsupported(f"{p}.mixer: both a full-rank and a low-rank decay projection")


def build(a: Args, kind, model):
    from archprobe.nn.kda import KimiDeltaAttention

    return KimiDeltaAttention(model.hidden_size, a.num_heads, a.head_dim, conv_kernel=a.conv_kernel, gate=a.gate,
                              gate_lower_bound=a.gate_lower_bound, output_gate=a.output_gate,
                              a_log_len=a.a_log_len, norm_eps=model.norm_eps, chunk_size=a.chunk_size,
                              decay_rank=a.decay_rank)


KINDS = [Kind("kda", "mixer", "KDA", "#3a7bd5", "linear_attention.kda", attrs,
              required=("num_heads", "head_dim"), recurrent=True, cache=cache, act_width=act_width,
              nn_kind="kda", args=Args, fields=fields, build=build, roles=ROLES)]
