"""K3's full inventory with every language-model module path renamed (shapes, dtypes and the config's
numbers kept; model_type unknown): what a new family looks like on the day it appears. Sparse shards."""

from __future__ import annotations

import json
import math
import os

from archprobe.formats.dtypes import DTYPE_BITS
from archprobe.writers.safetensors import write_safetensors
from archprobe.writers.synthetic import K3Dims, k3_config, k3_inventory

WORDS = {
    "language_model": "lm", "model": "trunk", "layers": "stack", "embed_tokens": "tok_table", "norm": "out_ln",
    "lm_head": "vocab_proj", "input_layernorm": "ln_in", "post_attention_layernorm": "ln_mid",
    "self_attention_res_norm": "depth_ln_a", "mlp_res_norm": "depth_ln_b", "self_attention_res_proj": "depth_q_a",
    "mlp_res_proj": "depth_q_b", "self_attn": "mixer", "q_a_proj": "q_down", "q_a_layernorm": "q_down_ln",
    "q_b_proj": "q_up", "kv_a_proj_with_mqa": "kv_down", "kv_a_layernorm": "kv_down_ln", "kv_b_proj": "kv_up",
    "q_proj": "wq", "k_proj": "wk", "v_proj": "wv", "q_conv1d": "cq", "k_conv1d": "ck", "v_conv1d": "cv",
    "f_a_proj": "decay_in", "f_b_proj": "decay_out", "dt_bias": "decay_bias", "A_log": "decay_log",
    "b_proj": "beta", "o_norm": "head_ln", "g_proj": "gate_lin", "o_proj": "wo", "mlp": "ffn",
    "gate_proj": "lin_a", "up_proj": "lin_b", "down_proj": "lin_c", "block_sparse_moe": "sparse_ffn",
    "gate": "scorer", "e_score_correction_bias": "balance", "routed_expert_down_proj": "squeeze",
    "routed_expert_norm": "squeeze_ln", "routed_expert_up_proj": "unsqueeze", "shared_experts": "always_on",
    "experts": "expert_bank", "w1": "p", "w2": "r", "w3": "s", "output_attn_res_norm": "final_depth_ln",
    "output_attn_res_proj": "final_depth_q",
}
KEEP = {"weight", "weight_packed", "weight_scale", "bias"}


def rename(name: str) -> str:
    if name.startswith(("vision_tower.", "mm_projector.")):
        return name
    parts = name.split(".")
    return ".".join(p if p.isdigit() or (i == len(parts) - 1 and p in KEEP) else WORDS[p] for i, p in enumerate(parts))


def write_renamed_k3(folder, d: K3Dims | None = None, shards: int = 96) -> dict:
    d = d or K3Dims()
    os.makedirs(folder, exist_ok=True)
    inv = [(rename(n), dt, s) for n, dt, s in k3_inventory(d)]
    size = [math.prod(s) * DTYPE_BITS[dt] // 8 for _, dt, s in inv]
    target, acc, groups = sum(size) / shards, 0, [[]]
    for entry, n in zip(inv, size, strict=True):
        if acc >= target * len(groups) and len(groups) < shards:
            groups.append([])
        groups[-1].append(entry)
        acc += n
    for k, group in enumerate(groups):
        write_safetensors(os.path.join(folder, f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"),
                          [(n, dt, s, None) for n, dt, s in group], {"format": "pt"})
    cfg = k3_config(d)
    cfg.pop("auto_map", None)
    cfg["model_type"], cfg["architectures"] = "acme_omni", ["AcmeOmniForConditionalGeneration"]
    text = cfg["text_config"]
    text.pop("auto_map", None)
    text["model_type"], text["architectures"] = "acme_lm", ["AcmeLMForCausalLM"]
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    return {"tensors": len(inv)}
