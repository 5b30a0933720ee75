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
    "swa": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("swa", "gqa"),
                                mixer_args={"gqa": dict(sliding_window=4)}),
    "mamba2_hybrid": lambda: HybridConfig(num_hidden_layers=4, mixer_types=("mamba2", "none", "gqa", "none"),
                                          ffn_types=("none", "latent_moe", "none", "dense"),
                                          mixer_args={"mamba2": dict(n_groups=2), "gqa": dict(rope_theta=None)},
                                          routed_expert_hidden_size=32, gated_ffn=False, hidden_act="relu2"),
    "mamba_hybrid": lambda: HybridConfig(num_hidden_layers=3, mixer_types=("mamba", "gqa", "mamba"),
                                         ffn_types=("none", "dense", "dense"),
                                         mixer_args={"mamba": dict(ssm_norms="weighted")}),
    "moa": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("moa", "gqa"), ffn_types=("moe", "dense"),
                                mixer_args={"moa": dict(num_experts=4, top_k=2, num_kv_heads=2, head_dim=16)},
                                moe_out_bias=True),
    "short_conv_hybrid": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("short_conv", "gqa"),
                                              mixer_args={"short_conv": dict(conv_kernel=3, bias=True)}),
    "gated_deltanet_hybrid": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("gated_deltanet", "gqa"),
                                                  mixer_args={"gated_deltanet": dict(num_key_heads=2,
                                                                                     num_value_heads=4)}),
    "gated_deltanet_split": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("gated_deltanet", "gqa"),
                                                 mixer_args={"gated_deltanet": dict(
                                                     num_key_heads=2, num_value_heads=4, layout="split",
                                                     beta_scale=2.0)}),
    "differential": lambda: HybridConfig(num_hidden_layers=2,
                                         mixer_args={"gqa": dict(num_kv_heads=2, differential=0.5)},
                                         layer_overrides={1: {"mixer_args": {"gqa": {"differential": 0.62}}}}),
    "mla_dsa_indexer": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("mla", "mla"), mixer_args={
        "mla": dict(use_nope=False, q_lora_rank=24, indexer=True, index_topk=5)}),
    "ling3_kda_mla": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("kda", "mla"), mixer_args={
        "kda": dict(decay_rank=0), "mla": dict(head_gate_act="sigmoid", use_nope=False, q_lora_rank=24)}),
    "falcon_h1_parallel": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("mamba2", "mamba2"),
                                               parallel_mixer_types=("gqa", "gqa"),
                                               mixer_args={"gqa": dict(num_kv_heads=2), "mamba2": dict(norm=False)}),
    "head_gated": lambda: HybridConfig(num_hidden_layers=2,
                                       mixer_args={"gqa": dict(num_kv_heads=2, head_gate_act="softplus")}),
    "griffin": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("rg_lru", "swa"),
                                    mixer_args={"gqa": dict(sliding_window=4, num_kv_heads=1)}),
    "minimax_lightning": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("lightning", "gqa"),
                                              ffn_types=("moe", "moe"), block="norm_residual"),
    "mla_rope_absorbed": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("mla", "mla"), mixer_args={
        "mla": dict(use_nope=False, q_lora_rank=24, form="absorbed")}),
    "rwkv_hybrid": lambda: HybridConfig(num_hidden_layers=2, mixer_types=("rwkv", "gqa"),
                                        mixer_args={"gqa": dict(rope_theta=None)}),
}
