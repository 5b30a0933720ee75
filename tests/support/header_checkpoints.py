"""A llama-shaped checkpoint of headers only (config.json and a safetensors file of zeros), for the tests
that need one config key changed at a time; `mtp` adds one MTP layer after the decoder layers."""

from __future__ import annotations

import json
import os

from archprobe.writers.safetensors import write_safetensors

H, V, L = 32, 64, 3


def write_llama(folder, config: dict, layers: int = L, mtp: bool = False) -> str:
    t = [("model.embed_tokens.weight", "F32", (V, H)), ("model.norm.weight", "F32", (H,))]
    for i in range(layers + (1 if mtp else 0)):
        p = f"model.layers.{i}."
        t += [(p + "input_layernorm.weight", "F32", (H,)), (p + "post_attention_layernorm.weight", "F32", (H,)),
              (p + "self_attn.q_proj.weight", "F32", (H, H)), (p + "self_attn.k_proj.weight", "F32", (16, H)),
              (p + "self_attn.v_proj.weight", "F32", (16, H)), (p + "self_attn.o_proj.weight", "F32", (H, H)),
              (p + "mlp.gate_proj.weight", "F32", (64, H)), (p + "mlp.up_proj.weight", "F32", (64, H)),
              (p + "mlp.down_proj.weight", "F32", (H, 64))]
        if mtp and i == layers:
            t += [(p + "eh_proj.weight", "F32", (H, 2 * H)), (p + "enorm.weight", "F32", (H,)),
                  (p + "hnorm.weight", "F32", (H,))]
    write_safetensors(os.path.join(folder, "model.safetensors"), [(*e, None) for e in t])
    base = {"model_type": "llama", "hidden_size": H, "vocab_size": V, "num_hidden_layers": L,
            "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**base, **config}, f)
    return str(folder)
