"""A three-layer checkpoint (attention or Mamba-2 layers, header-only tensors) with any config on top, and
its derived card: what the positions tests read rope and NoPE decisions from."""

from __future__ import annotations

import json
import os

from archprobe.formats.sources import open_source
from archprobe.structure.inspect import build_card
from archprobe.writers.safetensors import write_safetensors

H, V = 32, 64   # hidden size, vocabulary


def attention_tensors(p: str) -> list:
    return [(p + "self_attn.q_proj.weight", "F32", (H, H)), (p + "self_attn.k_proj.weight", "F32", (16, H)),
            (p + "self_attn.v_proj.weight", "F32", (16, H)), (p + "self_attn.o_proj.weight", "F32", (H, H))]


def mamba2_tensors(p: str) -> list:   # Mamba-2: 2 heads of 16, state 8, 1 group, kernel 4
    inner, conv = 32, 32 + 2 * 8
    return [(p + "mixer.in_proj.weight", "F32", (2 * inner + 2 * 8 + 2, H)),
            (p + "mixer.conv1d.weight", "F32", (conv, 1, 4)), (p + "mixer.conv1d.bias", "F32", (conv,)),
            (p + "mixer.A_log", "F32", (2,)), (p + "mixer.D", "F32", (2,)), (p + "mixer.dt_bias", "F32", (2,)),
            (p + "mixer.norm.weight", "F32", (inner,)), (p + "mixer.out_proj.weight", "F32", (H, inner))]


def positions_card(folder, config: dict, kinds=("attn",) * 3):
    t = [("model.embed_tokens.weight", "F32", (V, H)), ("model.norm.weight", "F32", (H,))]
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}."
        t += attention_tensors(p) if kind == "attn" else mamba2_tensors(p)
        t += [(p + "input_layernorm.weight", "F32", (H,)), (p + "post_attention_layernorm.weight", "F32", (H,)),
              (p + "mlp.gate_proj.weight", "F32", (64, H)), (p + "mlp.up_proj.weight", "F32", (64, H)),
              (p + "mlp.down_proj.weight", "F32", (H, 64))]
    write_safetensors(os.path.join(folder, "model.safetensors"), [(*e, None) for e in t])
    base = {"model_type": "acme_positions", "hidden_size": H, "vocab_size": V, "num_hidden_layers": len(kinds),
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "rms_norm_eps": 1e-5,
            "hidden_act": "silu", "max_position_embeddings": 128}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**base, **config}, f)
    return build_card(open_source(str(folder))).card
