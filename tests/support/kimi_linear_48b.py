"""Kimi-Linear-48B-A3B as headers only (sparse shards), in the two layouts the same weights are published in:
`checkpoint` (the release's names: three q/k/v convs, the decay pair beside the projections, one tensor per
expert) and `transformers` (the module tree transformers 5 keeps at runtime, conversion_mapping.py's
`kimi_linear` rules: one `conv1d` [3D, 1, K] over q|k|v, `forget_gate.{f_a_proj,f_b_proj,dt_bias,A_log}`,
`block_sparse_moe` -> `mlp`, experts merged into `gate_up_proj` [E, 2I, H] / `down_proj` [E, H, I]).
Shapes and config numbers: /work/shared/spec/kimi-k3.md section 4.1."""

from __future__ import annotations

import json
import math
import os

from archprobe.formats.dtypes import DTYPE_BITS
from archprobe.writers.safetensors import write_safetensors

L, H, V, HEADS, HD, E, I_MOE, I_DENSE, KV_LORA, NOPE, ROPE, VD = 27, 2304, 163840, 32, 128, 256, 1024, 9216, \
    512, 128, 64, 128
FULL_ATTN = [4, 8, 12, 16, 20, 24, 27]            # 1-based, as the release writes them


def config() -> dict:
    return {
        "model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"], "num_hidden_layers": L,
        "hidden_size": H, "vocab_size": V, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
        "q_lora_rank": None, "kv_lora_rank": KV_LORA, "qk_nope_head_dim": NOPE, "qk_rope_head_dim": ROPE,
        "v_head_dim": VD, "mla_use_nope": True, "intermediate_size": I_DENSE, "moe_intermediate_size": I_MOE,
        "num_experts": E, "num_experts_per_tok": 8, "num_shared_experts": 1, "first_k_dense_replace": 1,
        "moe_router_activation_func": "sigmoid", "moe_renormalize": True, "routed_scaling_factor": 2.446,
        "num_expert_group": 1, "topk_group": 1, "hidden_act": "silu", "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False, "max_position_embeddings": 1048576, "torch_dtype": "bfloat16",
        "linear_attn_config": {"kda_layers": [i for i in range(1, L + 1) if i not in FULL_ATTN],
                               "full_attn_layers": FULL_ATTN, "num_heads": HEADS, "head_dim": HD,
                               "short_conv_kernel_size": 4},
    }


def inventory(layout: str = "checkpoint") -> list[tuple[str, str, tuple]]:
    """(name, dtype, shape) of every tensor in `layout` ("checkpoint" or "transformers")."""
    tree = layout == "transformers"
    D = HEADS * HD
    out = [("model.embed_tokens.weight", "BF16", (V, H)), ("model.norm.weight", "BF16", (H,)),
           ("lm_head.weight", "BF16", (V, H))]
    for i in range(L):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        out += [(p + "input_layernorm.weight", "BF16", (H,)), (p + "post_attention_layernorm.weight", "BF16", (H,))]
        if i + 1 in FULL_ATTN:
            out += [(a + "q_proj.weight", "BF16", (HEADS * (NOPE + ROPE), H)),
                    (a + "kv_a_proj_with_mqa.weight", "BF16", (KV_LORA + ROPE, H)),
                    (a + "kv_a_layernorm.weight", "BF16", (KV_LORA,)),
                    (a + "kv_b_proj.weight", "BF16", (HEADS * (NOPE + VD), KV_LORA)),
                    (a + "o_proj.weight", "BF16", (H, HEADS * VD))]
        else:
            f = a + ("forget_gate." if tree else "")
            out += [(a + f"{x}_proj.weight", "BF16", (D, H)) for x in "qkv"]
            out += [(a + "conv1d.weight", "BF16", (3 * D, 1, 4))] if tree else [
                (a + f"{x}_conv1d.weight", "BF16", (D, 1, 4)) for x in "qkv"]
            out += [(f + "A_log", "F32", (1, 1, HEADS, 1)), (f + "dt_bias", "F32", (D,)),
                    (f + "f_a_proj.weight", "BF16", (HD, H)), (f + "f_b_proj.weight", "BF16", (D, HD)),
                    (a + "b_proj.weight", "BF16", (HEADS, H)), (a + "g_a_proj.weight", "BF16", (HD, H)),
                    (a + "g_b_proj.weight", "BF16", (D, HD)), (a + "o_norm.weight", "BF16", (HD,)),
                    (a + "o_proj.weight", "BF16", (H, D))]
        if i == 0:
            m = p + "mlp."
            out += [(m + "gate_proj.weight", "BF16", (I_DENSE, H)), (m + "up_proj.weight", "BF16", (I_DENSE, H)),
                    (m + "down_proj.weight", "BF16", (H, I_DENSE))]
            continue
        m = p + ("mlp." if tree else "block_sparse_moe.")
        out += [(m + "gate.weight", "BF16", (E, H)), (m + "gate.e_score_correction_bias", "F32", (E,)),
                (m + "shared_experts.gate_proj.weight", "BF16", (I_MOE, H)),
                (m + "shared_experts.up_proj.weight", "BF16", (I_MOE, H)),
                (m + "shared_experts.down_proj.weight", "BF16", (H, I_MOE))]
        if tree:
            out += [(m + "experts.gate_up_proj", "BF16", (E, 2 * I_MOE, H)),
                    (m + "experts.down_proj", "BF16", (E, H, I_MOE))]
        else:
            for e in range(E):
                x = f"{m}experts.{e}."
                out += [(x + "w1.weight", "BF16", (I_MOE, H)), (x + "w3.weight", "BF16", (I_MOE, H)),
                        (x + "w2.weight", "BF16", (H, I_MOE))]
    return out


def write(folder, layout: str = "checkpoint", rename=None, shards: int = 4) -> list[tuple[str, str, tuple]]:
    """Write config.json and sparse shards; `rename` maps each tensor name to the one stored. Returns the
    inventory as stored."""
    os.makedirs(folder, exist_ok=True)
    inv = [((rename or str)(n), dt, s) for n, dt, s in inventory(layout)]
    per = math.ceil(len(inv) / shards)
    for k in range(shards):
        write_safetensors(os.path.join(folder, f"model-{k + 1:05d}-of-{shards:05d}.safetensors"),
                          [(n, dt, s, None) for n, dt, s in inv[k * per:(k + 1) * per]], {"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config(), f)
    return inv


def stored_params(inv) -> int:
    return sum(math.prod(s) for _, _, s in inv)


def stored_bytes(inv) -> int:
    return sum(math.prod(s) * DTYPE_BITS[dt] // 8 for _, dt, s in inv)
