"""TRANSITIONAL (removed once structure.derive, issue 13, is merged): the per-family mapping.

Checkpoint -> archprobe.nn: the HybridConfig a family's config.json describes, and the name table.

Parameter names in archprobe.nn follow the checkpoints, so the table is short: strip the wrapper
prefix (`language_model.model.`, `model.`), send vision tensors nowhere (reported as unmapped), and
map the few exceptions (Kimi Linear saves its dense layer-0 MLP under `block_sparse_moe`). Quantized
tensors are dequantized on load (MXFP4 compressed-tensors, FP8 with block scales); per-expert tensors
are stacked by `nn.loading.sanitize`. Families: kimi_linear (Kimi Linear and K3, both config
spellings), deepseek_v3 (MLA with interleaved RoPE, group-limited routing), nemotron_h (Mamba-2,
latent MoE), qwen3_next (Gated DeltaNet, gated attention, zero-centred norms), llama / mistral /
qwen2 (GQA). Anything else is `Unsupported` with the reason.
"""

from __future__ import annotations

import re

import torch

from archprobe.errors import ArchprobeError
from archprobe.nn.decoder import HybridConfig
from archprobe.ops.quant import dequantize_fp8_block, dequantize_int4_packed, dequantize_mxfp4

PREFIXES = ("language_model.model.", "language_model.", "model.", "backbone.")
MODEL_RENAMES = {"embeddings.weight": "embed_tokens.weight", "norm_f.weight": "norm.weight"}   # Nemotron-H
VISION = ("vision_tower.", "mm_projector.", "visual.", "vision_model.", "multi_modal_projector.")
LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")
GQA_FAMILIES = ("llama", "mistral", "qwen2")


class Unsupported(ArchprobeError):
    """This architecture cannot be mapped onto archprobe.nn (yet); the message says why."""


def text_config(cfg: dict) -> dict:
    return cfg.get("text_config") or cfg


def hybrid_config(cfg: dict, shapes: dict[str, tuple]) -> HybridConfig:
    """The HybridConfig for config.json `cfg`; `shapes` (checkpoint name -> shape) settles stored sizes."""
    text = text_config(cfg)
    mt = text.get("model_type")
    if mt == "kimi_linear":
        return _kimi(text, shapes)
    if mt in GQA_FAMILIES:
        return _gqa(text)
    if mt == "deepseek_v3":
        return _deepseek(text)
    if mt == "nemotron_h":
        return _nemotron(text)
    if mt == "qwen3_next":
        return _qwen3_next(text)
    raise Unsupported(f"model_type {mt!r}: no mapping onto archprobe.nn yet (supported: kimi_linear, "
                      "deepseek_v3, nemotron_h, qwen3_next, " + ", ".join(GQA_FAMILIES) + ")")


def _kimi(text: dict, shapes: dict[str, tuple]) -> HybridConfig:
    a_log = next((s for k, s in shapes.items() if k.endswith("self_attn.A_log")), None)
    int4 = any(k.endswith(".weight_shape") for k in shapes)    # pack-quantized int4 carries its dense shape
    packed = not int4 and any(".experts." in k and k.endswith(".weight_packed") for k in shapes)
    try:
        return HybridConfig.from_config_json(text, a_log_len=int(torch.Size(a_log).numel()) if a_log else None,
                                             expert_storage="mxfp4" if packed else "dense")
    except ValueError as exc:
        raise Unsupported(str(exc)) from None


def _deepseek(text: dict) -> HybridConfig:
    n = text["num_hidden_layers"]
    rope = text.get("rope_parameters") or {}
    if rope.get("rope_type", "default") not in ("default", None):
        raise Unsupported(f"deepseek_v3 with rope_type {rope.get('rope_type')!r} (YaRN) is not mapped yet")
    first = text.get("first_k_dense_replace", 0)
    freq = text.get("moe_layer_freq", 1) or 1
    width = text["moe_intermediate_size"]
    return HybridConfig(
        vocab_size=text["vocab_size"], hidden_size=text["hidden_size"], num_hidden_layers=n,
        rms_norm_eps=text.get("rms_norm_eps", 1e-6), mixer_types=("mla",) * n,
        ffn_types=tuple("moe" if i >= first and i % freq == 0 else "dense" for i in range(n)),
        tie_word_embeddings=text.get("tie_word_embeddings", False), num_attention_heads=text["num_attention_heads"],
        q_lora_rank=text.get("q_lora_rank"), kv_lora_rank=text["kv_lora_rank"],
        qk_nope_head_dim=text["qk_nope_head_dim"], qk_rope_head_dim=text["qk_rope_head_dim"],
        v_head_dim=text["v_head_dim"], mla_use_nope=False, rope_theta=rope.get("rope_theta", 10000.0),
        rope_interleave=bool(text.get("rope_interleave", True)), intermediate_size=text["intermediate_size"],
        hidden_act=text.get("hidden_act", "silu"), num_experts=text["n_routed_experts"],
        num_experts_per_token=text["num_experts_per_tok"], moe_intermediate_size=width,
        shared_expert_width=(text.get("n_shared_experts") or 0) * width, moe_router_activation_func="sigmoid",
        moe_renormalize=text.get("norm_topk_prob", True), routed_scaling_factor=text.get("routed_scaling_factor", 1.0),
        n_group=text.get("n_group", 1), topk_group=text.get("topk_group", 1))


def _nemotron(text: dict) -> HybridConfig:
    kinds = {"mamba": ("mamba2", "none"), "linear_attention": ("mamba2", "none"), "attention": ("gqa", "none"),
             "full_attention": ("gqa", "none"), "moe": ("none", "latent_moe" if text.get("moe_latent_size") else "moe"),
             "mlp": ("none", "dense")}
    types = text.get("layers_block_type") or []
    if not types or any(t not in kinds for t in types):
        raise Unsupported(f"nemotron_h layers_block_type {types!r} has kinds archprobe does not map")
    heads = text["num_attention_heads"]
    return HybridConfig(
        vocab_size=text["vocab_size"], hidden_size=text["hidden_size"], num_hidden_layers=len(types),
        rms_norm_eps=text.get("layer_norm_epsilon", 1e-5), mixer_types=tuple(kinds[t][0] for t in types),
        ffn_types=tuple(kinds[t][1] for t in types), tie_word_embeddings=text.get("tie_word_embeddings", False),
        num_attention_heads=heads, num_key_value_heads=text.get("num_key_value_heads") or heads,
        head_dim=text.get("head_dim") or text["hidden_size"] // heads, rope_theta=None,
        mamba_num_heads=text["mamba_num_heads"], mamba_head_dim=text["mamba_head_dim"],
        ssm_state_size=text["ssm_state_size"], mamba_n_groups=text.get("n_groups", 1),
        mamba_conv_kernel=text.get("conv_kernel", 4), time_step_min=text.get("time_step_min", 0.0),
        intermediate_size=text.get("intermediate_size", 0), hidden_act=text.get("mlp_hidden_act", "relu2"),
        gated_ffn=False, num_experts=text.get("n_routed_experts", 1), num_experts_per_token=text.get(
            "num_experts_per_tok", 1), moe_intermediate_size=text.get("moe_intermediate_size", 0),
        shared_expert_width=text.get("moe_shared_expert_intermediate_size") or 0,
        routed_expert_hidden_size=text.get("moe_latent_size"), latent_moe_use_norm=False,
        latent_names=("fc1_latent_proj", "fc2_latent_proj", "latent_norm"), moe_router_activation_func="sigmoid",
        moe_renormalize=text.get("norm_topk_prob", True), routed_scaling_factor=text.get("routed_scaling_factor", 1.0),
        n_group=text.get("n_group", 1), topk_group=text.get("topk_group", 1))


def _qwen3_next(text: dict) -> HybridConfig:
    n = text["num_hidden_layers"]
    types = text.get("layer_types") or [
        "full_attention" if (i + 1) % text.get("full_attention_interval", 4) == 0 else "linear_attention"
        for i in range(n)]
    mixers = tuple("gqa" if t == "full_attention" else "gated_deltanet" for t in types)
    sparse_step, dense_only = text.get("decoder_sparse_step", 1), set(text.get("mlp_only_layers") or [])
    experts = text.get("num_experts", 0)
    ffns = tuple("moe" if i not in dense_only and experts > 0 and (i + 1) % sparse_step == 0 else "dense"
                 for i in range(n))
    rope = text.get("rope_parameters") or {}
    heads = text["num_attention_heads"]
    return HybridConfig(
        vocab_size=text["vocab_size"], hidden_size=text["hidden_size"], num_hidden_layers=n,
        rms_norm_eps=text.get("rms_norm_eps", 1e-6), norm_style="zero_centered", mixer_types=mixers,
        ffn_types=ffns, tie_word_embeddings=text.get("tie_word_embeddings", False),
        num_attention_heads=heads, num_key_value_heads=text.get("num_key_value_heads") or heads,
        head_dim=text.get("head_dim") or text["hidden_size"] // heads,
        rope_theta=rope.get("rope_theta") or text.get("rope_theta", 10000.0), qk_norm=True, attn_gate_in_q=True,
        partial_rotary_factor=rope.get("partial_rotary_factor") or text.get("partial_rotary_factor", 0.25),
        linear_num_key_heads=text["linear_num_key_heads"], linear_num_value_heads=text["linear_num_value_heads"],
        linear_key_head_dim=text["linear_key_head_dim"], linear_value_head_dim=text["linear_value_head_dim"],
        short_conv_kernel_size=text.get("linear_conv_kernel_dim", 4),
        intermediate_size=text.get("intermediate_size", 0), hidden_act=text.get("hidden_act", "silu"),
        num_experts=experts or 1, num_experts_per_token=text.get("num_experts_per_tok", 1),
        moe_intermediate_size=text.get("moe_intermediate_size", 0),
        shared_expert_width=text.get("shared_expert_intermediate_size") or 0, shared_expert_gate=True,
        moe_router_activation_func="softmax", moe_router_bias=False, moe_renormalize=text.get("norm_topk_prob", True))


def _gqa(text: dict) -> HybridConfig:
    n = text["num_hidden_layers"]
    rope = text.get("rope_parameters") or {}
    heads = text["num_attention_heads"]
    window = text.get("sliding_window") if text.get("use_sliding_window", True) else None
    return HybridConfig(
        vocab_size=text["vocab_size"], hidden_size=text["hidden_size"], num_hidden_layers=n,
        rms_norm_eps=text.get("rms_norm_eps", 1e-6), mixer_types=("swa" if window else "gqa",) * n,
        ffn_types=("dense",) * n, tie_word_embeddings=text.get("tie_word_embeddings", False),
        num_attention_heads=heads, num_key_value_heads=text.get("num_key_value_heads") or heads,
        head_dim=text.get("head_dim") or text["hidden_size"] // heads,
        rope_theta=rope.get("rope_theta") or text.get("rope_theta", 10000.0), sliding_window=window,
        intermediate_size=text["intermediate_size"], hidden_act=text.get("hidden_act", "silu"))


def module_name(name: str, cfg: HybridConfig) -> tuple[int | None, str] | None:
    """(layer index or None for model-level, the module-side name) of a checkpoint tensor; None: not ours."""
    if name.startswith(VISION):
        return None
    for p in PREFIXES:
        if name.startswith(p):
            name = name[len(p):]
            break
    m = LAYER.match(name)
    if not m:
        return None, MODEL_RENAMES.get(name, name)
    i, rest = int(m.group(1)), m.group(2)
    if rest.startswith("linear_attn."):                      # Qwen3-Next's Gated DeltaNet
        rest = "self_attn." + rest[len("linear_attn."):]
    if i >= cfg.num_hidden_layers:
        return None  # an MTP layer: not part of the decoder pass
    if rest.startswith("block_sparse_moe.") and cfg.ffn_types[i] == "dense":
        rest = "mlp." + rest[len("block_sparse_moe."):]     # Kimi Linear saves its dense MLP there
    elif rest.startswith("mlp.") and cfg.ffn_types[i] in ("moe", "latent_moe"):
        rest = "block_sparse_moe." + rest[len("mlp."):]     # DeepSeek keeps MoE layers under `mlp`
    elif rest == "norm.weight" or rest.startswith("mixer."):  # Nemotron-H: one norm + one mixer per block
        is_ffn = cfg.mixer_types[i] == "none"
        if rest == "norm.weight":
            rest = "post_attention_layernorm.weight" if is_ffn else "input_layernorm.weight"
        else:
            target = ("block_sparse_moe." if cfg.ffn_types[i] != "dense" else "mlp.") if is_ffn else "self_attn."
            rest = target + rest[len("mixer."):]
    return i, rest


def lazy_dequantize(names: dict[str, str], get, dtype: torch.dtype, keep_packed_experts: bool = False) -> dict:
    """module name -> zero-argument loader of the dense tensor (`names`: module name -> checkpoint name).

    MXFP4 (`X.weight_packed` U8 + `X.weight_scale`), INT4 pack-quantized (`X.weight_packed` I32 +
    `X.weight_scale` + `X.weight_shape` [+ `X.weight_zero_point`]) and FP8 (`X.weight` +
    `X.weight_scale_inv`) become a loader of `X.weight`; nothing is read until the loader is called
    (experts: one at a time)."""
    out: dict = {}
    for m, n in names.items():
        if m.endswith((".weight_shape", ".weight_zero_point")) and m.rsplit(".", 1)[0] + ".weight_packed" in names:
            continue
        if keep_packed_experts and ".experts." in m and m.endswith((".weight_packed", ".weight_scale")):
            out[m] = (lambda n=n: get(n))    # stays packed: ExpertBank(storage="mxfp4") dequantizes on use
            continue
        if m.endswith(".weight_scale") and m[: -len("_scale")] + "_packed" in names:
            continue
        if m.endswith(".weight_scale_inv"):
            continue
        if m.endswith(".weight_packed"):
            base = m[: -len("_packed")]
            scale = names.get(base + "_scale")
            if scale is None:
                raise Unsupported(f"{n}: packed weight without its weight_scale")
            shape_name = names.get(base + "_shape")
            if shape_name is not None:   # int4 pack-quantized carries its dense shape; MXFP4 does not
                zp = names.get(base + "_zero_point")
                out[base] = (lambda n=n, s=scale, sh=shape_name, z=zp: dequantize_int4_packed(
                    get(n), get(s), get(sh).tolist(), zero_point=get(z) if z else None, dtype=dtype))
            else:
                out[base] = (lambda n=n, s=scale: dequantize_mxfp4(get(n), get(s), dtype=dtype))
        elif m + "_scale_inv" in names:
            out[m] = (lambda n=n, s=names[m + "_scale_inv"]: dequantize_fp8_block(get(n), get(s), dtype=dtype))
        else:
            out[m] = (lambda n=n: _cast(get(n), dtype))
    return out


def _cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t.to(dtype) if t.is_floating_point() else t
