"""Parameter counts of real published quantized checkpoints, reproduced from sparse files with their real
header layout (names, dtypes, shapes; data regions left as holes). Each expected number cites its source.

archprobe counts logically (contracts.md): packed 4-bit storage holds two parameters per byte, and
quantization metadata (scales, zero points) is no parameter. Older hub counters added the metadata's
elements; `params.quant_metadata_elements` lets a test reproduce those figures exactly too.
"""

from __future__ import annotations

import json
import os

from archprobe.structure.inspect import inspect_checkpoint
from archprobe.writers.safetensors import write_safetensors


def _gpt_oss(folder, layers: int, experts: int) -> None:
    """openai/gpt-oss-{20b,120b} as published: BF16 attention with biases and sinks, MXFP4 experts stored as
    `*_blocks` (U8 [E, out, in/32, 16]) + `*_scales` (U8 [E, out, in/32]) + BF16 `*_bias`."""
    H, V, heads, kv, hd, inner = 2880, 201088, 64, 8, 64, 2880
    G = H // 32
    t = [("model.embed_tokens.weight", "BF16", (V, H)), ("lm_head.weight", "BF16", (V, H)),
         ("model.norm.weight", "BF16", (H,))]
    for i in range(layers):
        p = f"model.layers.{i}."
        t += [(p + "input_layernorm.weight", "BF16", (H,)), (p + "post_attention_layernorm.weight", "BF16", (H,)),
              (p + "self_attn.q_proj.weight", "BF16", (heads * hd, H)),
              (p + "self_attn.q_proj.bias", "BF16", (heads * hd,)),
              (p + "self_attn.k_proj.weight", "BF16", (kv * hd, H)), (p + "self_attn.k_proj.bias", "BF16", (kv * hd,)),
              (p + "self_attn.v_proj.weight", "BF16", (kv * hd, H)), (p + "self_attn.v_proj.bias", "BF16", (kv * hd,)),
              (p + "self_attn.o_proj.weight", "BF16", (H, heads * hd)), (p + "self_attn.o_proj.bias", "BF16", (H,)),
              (p + "self_attn.sinks", "BF16", (heads,)),
              (p + "mlp.router.weight", "BF16", (experts, H)), (p + "mlp.router.bias", "BF16", (experts,)),
              (p + "mlp.experts.gate_up_proj_blocks", "U8", (experts, 2 * inner, G, 16)),
              (p + "mlp.experts.gate_up_proj_scales", "U8", (experts, 2 * inner, G)),
              (p + "mlp.experts.gate_up_proj_bias", "BF16", (experts, 2 * inner)),
              (p + "mlp.experts.down_proj_blocks", "U8", (experts, H, inner // 32, 16)),
              (p + "mlp.experts.down_proj_scales", "U8", (experts, H, inner // 32)),
              (p + "mlp.experts.down_proj_bias", "BF16", (experts, H))]
    half = len(t) // 2
    write_safetensors(os.path.join(folder, "model-00000-of-00002.safetensors"), [(*e, None) for e in t[:half]])
    write_safetensors(os.path.join(folder, "model-00001-of-00002.safetensors"), [(*e, None) for e in t[half:]])
    cfg = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": H, "vocab_size": V,
           "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd,
           "intermediate_size": inner, "num_local_experts": experts, "experts_per_token": 4,
           "num_experts_per_tok": 4, "sliding_window": 128, "rms_norm_eps": 1e-5, "hidden_act": "silu",
           "layer_types": ["sliding_attention", "full_attention"] * (layers // 2),
           "quantization_config": {"quant_method": "mxfp4",
                                   "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                              "model.embed_tokens", "lm_head"]}}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)


def test_gpt_oss_20b(tmp_path):
    _gpt_oss(tmp_path, layers=24, experts=32)
    doc = inspect_checkpoint(str(tmp_path))
    # OpenAI's gpt-oss model card (arXiv 2508.10925, table 1): gpt-oss-20b has 20.91B total parameters
    assert round(doc["params"]["total"] / 1e9, 2) == 20.91
    # huggingface.js packages/hub/src/lib/parse-safetensors-metadata.spec.ts, "fetch info for openai/gpt-oss-20b"
    # (revision bbf09307...): 21_511_953_984, counted when the U8 *_scales were still added as parameters
    # (the counter's later MXFP4_SCALES_SUFFIX comment: "3% of the reported total for both gpt-oss sizes")
    assert doc["params"]["total"] + doc["params"]["quant_metadata_elements"] == 21_511_953_984
    assert doc["quantization"][0]["scheme"] == "mxfp4" and doc["quantization"][0]["tensors"] == 24 * 2
    assert doc["unrecognized"] == [] and doc["architecture"]["ffns"] == {"moe": 24}
    feats = {f["id"]: f for f in doc["features"]}
    assert feats["moe.routed"]["attrs"]["num_experts"] == 32 and feats["moe.routed"]["attrs"]["top_k"] == 4
    assert "attention.sinks" in feats and feats["attention.sliding_window"]["layers"] == list(range(0, 24, 2))


def test_gpt_oss_120b(tmp_path):
    _gpt_oss(tmp_path, layers=36, experts=128)
    doc = inspect_checkpoint(str(tmp_path))
    # OpenAI's gpt-oss model card (arXiv 2508.10925, table 1): gpt-oss-120b has 116.83B total parameters
    assert round(doc["params"]["total"] / 1e9, 2) == 116.83
    assert doc["unrecognized"] == []


def test_llama_31_8b_w4a16_compressed_tensors(tmp_path):
    """RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16: compressed-tensors pack-quantized INT4 in I32
    containers with one F16 scale per output row; embeddings, norms and head in F16."""
    H, V, inner, layers = 4096, 128256, 14336, 32
    t = [("model.embed_tokens.weight", "F16", (V, H)), ("lm_head.weight", "F16", (V, H)),
         ("model.norm.weight", "F16", (H,))]
    shapes = {"self_attn.q_proj": (H, H), "self_attn.k_proj": (1024, H), "self_attn.v_proj": (1024, H),
              "self_attn.o_proj": (H, H), "mlp.gate_proj": (inner, H), "mlp.up_proj": (inner, H),
              "mlp.down_proj": (H, inner)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t += [(p + "input_layernorm.weight", "F16", (H,)), (p + "post_attention_layernorm.weight", "F16", (H,))]
        for mod, (o, k) in shapes.items():
            t += [(p + mod + ".weight_packed", "I32", (o, k // 8)), (p + mod + ".weight_scale", "F16", (o, 1)),
                  (p + mod + ".weight_shape", "I64", (2,))]
    write_safetensors(os.path.join(tmp_path, "model.safetensors"), [(*e, None) for e in t])
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "vocab_size": V,
           "num_hidden_layers": layers, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": inner, "rms_norm_eps": 1e-5, "hidden_act": "silu",
           "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                   "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                                       "num_bits": 4, "type": "int", "strategy": "channel", "symmetric": True}}},
                                   "ignore": ["lm_head"]}}
    with open(os.path.join(tmp_path, "config.json"), "w") as f:
        json.dump(cfg, f)
    doc = inspect_checkpoint(str(tmp_path))
    by_dtype: dict[str, int] = {}
    from archprobe.formats.sources import open_source
    from archprobe.structure.inspect import build_card

    d = build_card(open_source(str(tmp_path)))
    for e in d.table.all_entries():
        by_dtype[e.dtype] = by_dtype.get(e.dtype, 0) + e.params
    # huggingface.js parse-safetensors-metadata.spec.ts, "fetch info for GPTQ quantized 8B model"
    # (RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16 @ 3921b6ae): I32 6_979_321_856 logical parameters
    assert by_dtype["I32"] == 6_979_321_856
    # ... and F16 1_052_315_648, which includes the per-row weight_scale elements that counter still counted
    assert by_dtype["F16"] + doc["params"]["quant_metadata_elements"] - 32 * 7 * 2 == 1_052_315_648
    # Llama-3.1-8B unquantized: 8_030_261_248 parameters (meta-llama/Llama-3.1-8B, hub safetensors total)
    assert doc["params"]["total"] == 8_030_261_248
    assert doc["quantization"][0]["scheme"] == "int4_pack" and doc["unrecognized"] == []
