"""Synthetic K3-shaped checkpoints: the exact tensor families, names and dtypes of the released
Kimi K3 (spec/kimi-k3.md section 3), at any widths.

Used three ways: the embedded demo (small widths, real random data, real MXFP4-packed experts), the
tests and the benchmark (full widths, sparse files: real headers, the data region a hole).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field

import numpy as np

from archprobe.formats.dtypes import DTYPE_BITS
from archprobe.writers.mxfp4 import quantize_mxfp4
from archprobe.writers.safetensors import write_safetensors


@dataclass(frozen=True)
class K3Dims:
    """Widths of a K3-shaped model; the defaults are the released K3 (spec/kimi-k3.md section 1.2)."""

    num_layers: int = 93
    hidden: int = 7168
    vocab: int = 163840
    heads: int = 96              # KDA and MLA heads
    head_dim: int = 128          # KDA d_k = d_v; MLA nope and v dims
    rope_dim: int = 64
    q_lora: int = 1536
    kv_lora: int = 512
    decay_rank: int = 128        # f_a_proj output
    a_log_len: int = 128         # stored A_log length (first `heads` used)
    experts: int = 896
    top_k: int = 16
    expert_width: int = 3072
    latent: int = 3584
    shared: int = 2
    dense_width: int = 33792
    block_size: int = 12
    vision_blocks: int = 27
    vision_hidden: int = 1024
    full_attn_layers: tuple[int, ...] = field(default=())   # 1-based; default: every 4th + last

    def mla_layers_1based(self) -> list[int]:
        if self.full_attn_layers:
            return list(self.full_attn_layers)
        return sorted({*range(4, self.num_layers + 1, 4), self.num_layers})


def tiny_k3_dims() -> K3Dims:
    """Small widths for the demo and fast tests: 6 layers, width 64, 8 experts, real data ~1 MB."""
    return K3Dims(num_layers=6, hidden=64, vocab=512, heads=4, head_dim=16, rope_dim=8, q_lora=32,
                  kv_lora=16, decay_rank=16, a_log_len=8, experts=8, top_k=2, expert_width=64, latent=32,
                  shared=2, dense_width=128, block_size=2, vision_blocks=1, vision_hidden=32)


def k3_config(d: K3Dims) -> dict:
    """config.json of the multimodal wrapper with the `kimi_linear` text config inside."""
    mla = d.mla_layers_1based()
    text = {
        "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear",
        "auto_map": {"AutoConfig": "configuration_kimi_k3.KimiLinearConfig",
                     "AutoModelForCausalLM": "modeling_kimi_linear.KimiLinearForCausalLM"},
        "num_hidden_layers": d.num_layers, "hidden_size": d.hidden, "vocab_size": d.vocab,
        "rms_norm_eps": 1e-5, "hidden_act": "situ", "activation_situ_beta": 4.0,
        "activation_situ_linear_beta": 25.0, "intermediate_size": d.dense_width, "first_k_dense_replace": 1,
        "moe_layer_freq": 1, "num_experts": d.experts, "num_experts_per_token": d.top_k,
        "num_shared_experts": d.shared, "moe_intermediate_size": d.expert_width,
        "routed_expert_hidden_size": d.latent, "latent_moe_use_norm": True,
        "moe_router_activation_func": "sigmoid", "moe_renormalize": True, "routed_scaling_factor": 1.0,
        "use_grouped_topk": True, "num_expert_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
        "num_attention_heads": d.heads, "num_key_value_heads": d.heads, "q_lora_rank": d.q_lora,
        "kv_lora_rank": d.kv_lora, "qk_nope_head_dim": d.head_dim, "qk_rope_head_dim": d.rope_dim,
        "v_head_dim": d.head_dim, "mla_use_nope": True, "mla_use_output_gate": True,
        "max_position_embeddings": 1048576, "num_nextn_predict_layers": 0, "tie_word_embeddings": False,
        "attn_res_block_size": d.block_size, "dtype": "bfloat16",
        "linear_attn_config": {
            "num_heads": d.heads, "head_dim": d.head_dim, "short_conv_kernel_size": 4,
            "gate_lower_bound": -5.0, "use_full_rank_gate": True, "full_attn_layers": mla,
            "kda_layers": [i for i in range(1, d.num_layers + 1) if i not in mla]},
        "quantization_config": {
            "quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
            "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "format": "mxfp4-pack-quantized",
                                          "weights": {"num_bits": 4, "type": "float", "group_size": 32,
                                                      "strategy": "group", "symmetric": True,
                                                      "dynamic": False, "scale_dtype": "torch.uint8"}}},
            "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
                       "re:.*lm_head.*", "re:.*vision_tower.*", "re:.*mm_projector.*"],
            "kv_cache_scheme": None},
        "bos_token_id": 163584, "eos_token_id": 163586, "pad_token_id": 163839,
    }
    return {
        "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
        "auto_map": {"AutoConfig": "configuration_kimi_k3.KimiK3Config",
                     "AutoModel": "modeling_kimi_k3.KimiK3ForConditionalGeneration"},
        "dtype": "bfloat16", "tie_word_embeddings": False, "text_config": text,
        "vision_config": {"patch_size": 14, "vt_hidden_size": d.vision_hidden,
                          "vt_num_hidden_layers": d.vision_blocks, "text_hidden_size": d.hidden},
        "archprobe_synthetic": asdict(d),
    }


def k3_inventory(d: K3Dims) -> list[tuple[str, str, tuple[int, ...]]]:
    """Every tensor of a K3-shaped checkpoint as (name, dtype, shape), in layer order."""
    H, D, L, F = d.hidden, d.heads * d.head_dim, d.latent, d.expert_width
    mla = {i - 1 for i in d.mla_layers_1based()}
    out: list[tuple[str, str, tuple[int, ...]]] = []
    lm = "language_model.model."
    out.append((lm + "embed_tokens.weight", "BF16", (d.vocab, H)))
    for i in range(d.num_layers):
        p = f"{lm}layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm", "mlp_res_norm"):
            out.append((p + n + ".weight", "BF16", (H,)))
        out += [(p + "self_attention_res_proj.weight", "BF16", (1, H)),
                (p + "mlp_res_proj.weight", "BF16", (1, H))]
        a = p + "self_attn."
        if i in mla:
            out += [(a + "q_a_proj.weight", "BF16", (d.q_lora, H)),
                    (a + "q_a_layernorm.weight", "BF16", (d.q_lora,)),
                    (a + "q_b_proj.weight", "BF16", (d.heads * (d.head_dim + d.rope_dim), d.q_lora)),
                    (a + "kv_a_proj_with_mqa.weight", "BF16", (d.kv_lora + d.rope_dim, H)),
                    (a + "kv_a_layernorm.weight", "BF16", (d.kv_lora,)),
                    (a + "kv_b_proj.weight", "BF16", (d.heads * 2 * d.head_dim, d.kv_lora))]
        else:
            out += [(a + f"{s}_proj.weight", "BF16", (D, H)) for s in "qkv"]
            out += [(a + f"{s}_conv1d.weight", "F32", (D, 1, 4)) for s in "qkv"]
            out += [(a + "f_a_proj.weight", "BF16", (d.decay_rank, H)),
                    (a + "f_b_proj.weight", "BF16", (D, d.decay_rank)),
                    (a + "dt_bias", "F32", (D,)), (a + "A_log", "F32", (d.a_log_len,)),
                    (a + "b_proj.weight", "BF16", (d.heads, H)), (a + "o_norm.weight", "F32", (d.head_dim,))]
        out += [(a + "g_proj.weight", "BF16", (D, H)), (a + "o_proj.weight", "BF16", (H, D))]
        if i == 0:
            m = p + "mlp."
            out += [(m + "gate_proj.weight", "BF16", (d.dense_width, H)),
                    (m + "up_proj.weight", "BF16", (d.dense_width, H)),
                    (m + "down_proj.weight", "BF16", (H, d.dense_width))]
            continue
        m = p + "block_sparse_moe."
        S = d.shared * F
        out += [(m + "gate.weight", "BF16", (d.experts, H)),
                (m + "gate.e_score_correction_bias", "F32", (d.experts,)),
                (m + "routed_expert_down_proj.weight", "BF16", (L, H)),
                (m + "routed_expert_norm.weight", "BF16", (L,)),
                (m + "routed_expert_up_proj.weight", "BF16", (H, L)),
                (m + "shared_experts.gate_proj.weight", "BF16", (S, H)),
                (m + "shared_experts.up_proj.weight", "BF16", (S, H)),
                (m + "shared_experts.down_proj.weight", "BF16", (H, S))]
        for e in range(d.experts):
            x = f"{m}experts.{e}."
            out += [(x + "w1.weight_packed", "U8", (F, L // 2)), (x + "w1.weight_scale", "U8", (F, L // 32)),
                    (x + "w3.weight_packed", "U8", (F, L // 2)), (x + "w3.weight_scale", "U8", (F, L // 32)),
                    (x + "w2.weight_packed", "U8", (L, F // 2)), (x + "w2.weight_scale", "U8", (L, F // 32))]
    out += [(lm + "norm.weight", "BF16", (H,)), (lm + "output_attn_res_norm.weight", "BF16", (H,)),
            (lm + "output_attn_res_proj.weight", "BF16", (1, H)),
            ("language_model.lm_head.weight", "BF16", (d.vocab, H))]
    V = d.vision_hidden
    v = "vision_tower."
    out += [(v + "patch_embed.proj.weight", "BF16", (V, 3, 14, 14)),
            (v + "patch_embed.pos_emb.weight", "BF16", (64, 64, V))]
    for b in range(d.vision_blocks):
        x = f"{v}encoder.blocks.{b}."
        out += [(x + "wqkv.weight", "BF16", (3 * 3 * V // 2, V)), (x + "wo.weight", "BF16", (V, 3 * V // 2)),
                (x + "mlp.fc0.weight", "BF16", (4 * V, V)), (x + "mlp.fc1.weight", "BF16", (V, 4 * V)),
                (x + "norm0.weight", "BF16", (V,)), (x + "norm1.weight", "BF16", (V,))]
    out += [(v + "encoder.final_layernorm.weight", "BF16", (V,)),
            ("mm_projector.proj.0.weight", "BF16", (4 * V, 4 * V)),
            ("mm_projector.proj.2.weight", "BF16", (H, 4 * V)),
            ("mm_projector.post_norm.weight", "BF16", (H,))]
    return out


def _nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    return math.prod(shape) * DTYPE_BITS[dtype] // 8


def random_tensor_bytes(name: str, dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> bytes:
    """Plausible random data: norms near 1, matrices ~N(0, 1/fan_in), MXFP4 experts really packed."""
    if name.endswith("weight_scale"):
        return b""  # written together with its weight_packed sibling
    if name.endswith("weight_packed"):
        w = rng.standard_normal((shape[0], shape[1] * 2)).astype(np.float32) / math.sqrt(shape[1] * 2)
        packed, scale = quantize_mxfp4(w)
        return packed.tobytes() + b"\0SCALE\0" + scale.tobytes()
    if name.endswith("A_log"):
        arr = np.zeros(shape, np.float32)
        return arr.tobytes()
    if len(shape) == 1 or name.endswith(("norm.weight", "e_score_correction_bias", "dt_bias")):
        arr = np.ones(shape, np.float32) if "norm" in name else rng.standard_normal(shape).astype(np.float32) * 0.1
    else:
        arr = rng.standard_normal(shape).astype(np.float32) / math.sqrt(max(1, math.prod(shape[1:])))
    if dtype == "BF16":
        bits = arr.astype(np.float32).view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2").tobytes()
    return arr.astype("<f4").tobytes()


K3_SHARD_NAME = "model-{k:05d}-of-{n:06d}.safetensors"   # as published: five digits, then six
HF_SHARD_NAME = "model-{k:05d}-of-{n:05d}.safetensors"   # what transformers' save_pretrained writes


def write_k3_checkpoint(folder: str | os.PathLike, d: K3Dims, *, shards: int = 1, sparse: bool = True,
                        seed: int = 0, shard_name: str = HF_SHARD_NAME) -> dict:
    """Write config.json, the shards and model.safetensors.index.json; returns summary figures.

    `shard_name` formats each shard's file name from its number `k` (from 1) and the count `n`.
    `sparse=True` leaves every data region as a hole (headers only on disk); otherwise the data is
    random with real MXFP4 packing (only sensible for small widths).
    """
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    inv = k3_inventory(d)
    rng = np.random.default_rng(seed)
    data: dict[str, bytes] = {}
    if not sparse:
        for name, dtype, shape in inv:
            blob = random_tensor_bytes(name, dtype, shape, rng)
            if name.endswith("weight_packed"):
                packed, scale = blob.split(b"\0SCALE\0")
                data[name] = packed
                data[name[: -len("packed")] + "scale"] = scale
            elif blob:
                data[name] = blob
    total = sum(_nbytes(dt, s) for _, dt, s in inv)
    target = total / shards
    groups: list[list] = [[]]
    acc = 0
    for entry in inv:
        if acc >= target * len(groups) and len(groups) < shards:
            groups.append([])
        groups[-1].append(entry)
        acc += _nbytes(entry[1], entry[2])
    while len(groups) < shards:
        groups.append([])
    weight_map: dict[str, str] = {}
    sizes = 0
    for k, group in enumerate(groups):
        fname = shard_name.format(k=k + 1, n=shards) if shards > 1 else "model.safetensors"
        sizes += write_safetensors(os.path.join(folder, fname),
                                   [(n, dt, s, data.get(n)) for n, dt, s in group], {"format": "pt"})
        weight_map.update({n: fname for n, _, _ in group})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(k3_config(d), f, indent=1)
    if shards > 1:
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    return {"tensors": len(inv), "data_bytes": total, "file_bytes": sizes, "shards": shards}
