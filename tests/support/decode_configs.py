"""Tiny HybridConfigs, one or more per mixer type, that tests/nn/test_decoder.py decodes token by token
against the full forward; tests/structure/test_kinds_registry.py fails when a kind's mixer type has none."""

from __future__ import annotations

from archprobe.nn.decoder import HybridConfig
from archprobe.nn.presets import tiny_k3, tiny_kimi_linear, tiny_nemotron_latent, variant

CONFIGS = {
    "tiny_k3": tiny_k3, "tiny_kimi_linear": tiny_kimi_linear, "tiny_nemotron_latent": tiny_nemotron_latent,
    **{f"variant_{v}": (lambda v=v: variant(v)) for v in (
        "baseline", "kv_compression", "head_gate", "indexer", "latent_routing", "gated_residual", "depth_weights",
        "attnres_full", "attnres_block")},
    "swa": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("swa", "gqa"), sliding_window=4),
    "mamba2_hybrid": lambda: HybridConfig(num_hidden_layers=4, mixer_types=("mamba2", "none", "gqa", "none"),
                                          ffn_types=("none", "latent_moe", "none", "dense"), mamba_n_groups=2,
                                          routed_expert_hidden_size=32, gated_ffn=False, hidden_act="relu2",
                                          rope_theta=None),
    "mamba_hybrid": lambda: HybridConfig(num_hidden_layers=3, mixer_types=("mamba", "gqa", "mamba"),
                                         ffn_types=("none", "dense", "dense"), mamba_ssm_norms="weighted"),
    "moa": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("moa", "gqa"), ffn_types=("moe", "dense"),
                                moa_num_experts=4, moa_top_k=2, moa_kv_heads=2, moa_head_dim=16, moe_out_bias=True),
    "short_conv_hybrid": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("short_conv", "gqa"),
                                              short_conv_kernel_size=3, short_conv_bias=True),
    "gated_deltanet_hybrid": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("gated_deltanet", "gqa"),
                                                  linear_num_key_heads=2, linear_num_value_heads=4),
    "gated_deltanet_split": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("gated_deltanet", "gqa"),
                                                 linear_num_key_heads=2, linear_num_value_heads=4, gdn_layout="split",
                                                 gdn_beta_scale=2.0),
    "differential": lambda: HybridConfig(num_hidden_layers=2, num_key_value_heads=2, attn_differential=0.5,
                                         layer_overrides={1: {"attn_differential": 0.62}}),
    "mla_dsa_indexer": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("mla", "mla"), mla_use_nope=False,
                                            q_lora_rank=24, mla_indexer=True, index_topk=5),
    "ling3_kda_mla": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("kda", "mla"), kda_decay_rank=0,
                                          mla_head_gate="sigmoid", mla_use_nope=False, q_lora_rank=24),
    "falcon_h1_parallel": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("mamba2", "mamba2"),
                                               parallel_mixer_types=("gqa", "gqa"), num_key_value_heads=2,
                                               mamba_norm=False),
    "head_gated": lambda: HybridConfig(num_hidden_layers=2, num_key_value_heads=2, attn_head_gate="softplus"),
    "griffin": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("rg_lru", "swa"), sliding_window=4,
                                    num_key_value_heads=1),
    "minimax_lightning": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("lightning", "gqa"),
                                              ffn_types=("moe", "moe"), block="norm_residual"),
    "mla_rope_absorbed": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("mla", "mla"), mla_use_nope=False,
                                              q_lora_rank=24, mla_form="absorbed"),
    "rwkv_hybrid": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("rwkv", "gqa"), rope_theta=None),
}
