"""Tiny real models built by transformers from a config (random weights) and saved with
`save_pretrained`: the cross-check peers for inspect, nn and validate, and the seeded perturbations
that give their weights non-trivial values. `build` is how every test makes such a checkpoint (and `save`
how it writes one made otherwise): tests/test_support_layout.py keeps save_pretrained inside tests/support."""

from __future__ import annotations

import os

# the prompt the nn family tests and validate's build tests feed their models ([1, 10] token ids)
FAMILY_PROMPT_IDS = [[5, 17, 42, 99, 3, 128, 77, 200, 9, 31]]


def tiny_configs() -> dict:
    from transformers import DeepseekV3Config, KimiLinearConfig, LlamaConfig, NemotronHConfig, Qwen3NextConfig

    ids = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    return {
        # 1-based Kimi layer lists, the way the released checkpoints write them: layers 3 and 6 are MLA
        "kimi_linear": KimiLinearConfig(
            vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=6,
            num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, kv_lora_rank=16, q_lora_rank=None,
            qk_rope_head_dim=8, v_head_dim=16, qk_nope_head_dim=16, num_local_experts=8, num_experts_per_tok=2,
            linear_attn_config={"num_heads": 4, "head_dim": 16, "short_conv_kernel_size": 4,
                                "full_attn_layers": [3, 6], "kda_layers": [1, 2, 4, 5]}, **ids),
        "nemotron_h": NemotronHConfig(
            vocab_size=256, hidden_size=64, layers_block_type=["mamba", "moe", "attention", "moe"],
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=128, mamba_num_heads=4,
            mamba_head_dim=16, ssm_state_size=16, n_groups=2, n_routed_experts=8, num_experts_per_tok=2,
            moe_intermediate_size=32, moe_shared_expert_intermediate_size=48, moe_latent_size=32, chunk_size=16,
            **ids),
        "deepseek_v3": DeepseekV3Config(
            vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=8, kv_lora_rank=16,
            q_lora_rank=32, qk_rope_head_dim=8, v_head_dim=16, qk_nope_head_dim=16, n_group=2, topk_group=1,
            num_experts_per_tok=2, first_k_dense_replace=1, **ids),
        "llama": LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, **ids),
        "qwen3_next": Qwen3NextConfig(
            vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, linear_key_head_dim=16, linear_value_head_dim=16,
            linear_num_key_heads=2, linear_num_value_heads=4, moe_intermediate_size=32,
            shared_expert_intermediate_size=32, num_experts=8, num_experts_per_tok=2, **ids),
    }


def build(config, folder, *, seed: int = 0, adjust=None, model_class=None, max_shard_size=None, **from_config):
    """The tests' one way to make a tiny transformers checkpoint: seed torch, build the model from `config`
    (a tiny_configs() name or a Config object) with random weights, run `adjust(model)` under no_grad (seeded
    noise, a planted inf), save it into `folder` with save_pretrained; returns the model in eval mode.

    `model_class`: a transformers class other than AutoModelForCausalLM (e.g. a base model without a head);
    `from_config`: what transformers' from_config takes (attn_implementation, dtype)."""
    import torch
    from transformers import AutoModelForCausalLM

    if isinstance(config, str):
        config = tiny_configs()[config]
    torch.manual_seed(seed)
    if model_class is None:
        model = AutoModelForCausalLM.from_config(config, **from_config)
    else:
        model = model_class._from_config(config, **from_config)
    if adjust is not None:
        with torch.no_grad():
            adjust(model)
    save(model, folder, max_shard_size=max_shard_size)
    return model.eval()


def save(model, folder, max_shard_size=None) -> None:
    """Where every test-built transformers model is written: safetensors by save_pretrained (its own
    default shard size unless `max_shard_size`)."""
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder, **({} if max_shard_size is None else {"max_shard_size": max_shard_size}))


def perturb(model, seed=0):
    """Random, non-trivial values everywhere (norm gains near 1, biases and A_log non-zero)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if not t.is_floating_point():
                continue
            noise = torch.randn(t.shape, generator=gen)
            if "norm" in name and name.endswith("weight"):
                t.copy_(1 + 0.1 * noise)
            elif "A_log" in name:
                t.copy_(0.5 * noise)
            elif "bias" in name or "dt_bias" in name:
                t.copy_(0.3 * noise)
            else:
                t.copy_(noise * t.shape[-1] ** -0.5 if t.dim() > 1 else 0.1 * noise)


def perturb_parameters(model, seed=0):
    """Seeded noise on every parameter (norm gains near 1, biases non-zero); buffers such as the rotary
    inv_freq stay as the family computed them."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in model.named_parameters():
            noise = torch.randn(t.shape, generator=gen)
            if "norm" in name and name.endswith("weight"):
                t.copy_(1 + 0.1 * noise)
            elif t.dim() > 1:
                t.copy_(noise * t.shape[-1] ** -0.5)
            else:
                t.copy_(0.3 * noise)
