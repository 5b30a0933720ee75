"""Presets: small configs of the designs archprobe studies, as functions (conventions 9), and the
Kimi Linear / K3 config.json reader. Each returns a HybridConfig, the decoder's front-end."""

from __future__ import annotations

from dataclasses import fields

from archprobe.nn.decoder import HybridConfig


def _with(kw: dict, over: dict) -> HybridConfig:
    """The preset's fields `kw` with the caller's `over` on top; mixer arguments merged kind by kind."""
    args = {kind: dict(a) for kind, a in kw.pop("mixer_args", {}).items()}
    for kind, a in over.pop("mixer_args", {}).items():
        args.setdefault(kind, {}).update(a)
    return HybridConfig(**{**kw, **over, "mixer_args": args})


def tiny_k3(**over) -> HybridConfig:
    """K3's design at toy width: KDA x3 + Gated MLA (NoPE), Stable LatentMoE with SiTU, Block AttnRes."""
    n = over.pop("num_hidden_layers", 6)
    kw = dict(vocab_size=256, hidden_size=64, num_hidden_layers=n,
              mixer_types=tuple("mla" if (i + 1) % 4 == 0 or i == n - 1 else "kda" for i in range(n)),
              ffn_types=("dense",) + ("latent_moe",) * (n - 1), residual="attnres_block", attn_res_block_size=2,
              mixer_args={"mla": dict(num_heads=4, q_lora_rank=32, kv_lora_rank=16, nope_dim=16, rope_dim=8,
                                      v_head_dim=16, use_nope=True, output_gate=True),
                          "kda": dict(num_heads=4, head_dim=16, gate="bounded", output_gate="full_rank",
                                      a_log_len=8)},
              intermediate_size=128, hidden_act="situ",
              num_experts=8, num_experts_per_token=2, moe_intermediate_size=32, shared_expert_width=64,
              routed_expert_hidden_size=32, latent_moe_use_norm=True, moe_router_activation_func="sigmoid")
    return _with(kw, over)


def tiny_kimi_linear(**over) -> HybridConfig:
    """Kimi Linear's design: KDA (unbounded softplus gate, low-rank output gate) + MLA, MoE, pre-norm."""
    n = over.pop("num_hidden_layers", 4)
    kw = dict(num_hidden_layers=n, mixer_types=tuple("mla" if (i + 1) % 4 == 0 else "kda" for i in range(n)),
              ffn_types=("dense",) + ("moe",) * (n - 1), residual="prenorm",
              mixer_args={"kda": dict(gate="softplus", output_gate="low_rank"), "mla": dict(use_nope=True)},
              hidden_act="silu", num_shared_experts=1)
    return _with(kw, over)


def tiny_nemotron_latent(**over) -> HybridConfig:
    """Nemotron-3 Super's LatentMoE: GQA + latent MoE routed in hidden space, ReLU^2, no latent norm."""
    n = over.pop("num_hidden_layers", 4)
    kw = dict(num_hidden_layers=n, mixer_types=("gqa", "none") * (n // 2), ffn_types=("none", "latent_moe") * (n // 2),
              mixer_args={"gqa": dict(num_kv_heads=2)}, hidden_act="relu2", gated_ffn=False,
              routed_expert_hidden_size=32, latent_moe_use_norm=False,
              latent_names=("fc1_latent_proj", "fc2_latent_proj", "latent_norm"), shared_expert_width=48)
    return _with(kw, over)


def variant(name: str, **over) -> HybridConfig:
    """The design notes' hypotheses as presets, each a small change to a GQA + MoE baseline."""
    base = dict(num_hidden_layers=4, ffn_types=("moe",) * 4, mixer_args={"gqa": dict(num_kv_heads=2)})
    presets = {
        "baseline": {},
        "kv_compression": dict(mixer_types=("lowrank_kv",) * 4,
                               mixer_args={"lowrank_kv": dict(num_kv_heads=2, rank=16)}),
        "head_gate": dict(mixer_types=("gqa_headgate",) * 4,
                          mixer_args={"gqa": dict(num_kv_heads=2, head_gate_mode="hard", head_gate_keep=2)}),
        "indexer": dict(mixer_types=("gqa_indexer",) * 4, mixer_args={"gqa": dict(num_kv_heads=2, index_topk=8)}),
        "latent_routing": dict(ffn_types=("latent_moe",) * 4, routed_expert_hidden_size=32,
                               moe_routing_space="latent"),
        "gated_residual": dict(residual="gated"),
        "depth_weights": dict(residual="depth_weights"),
        "attnres_full": dict(residual="attnres_full"),
        "attnres_block": dict(residual="attnres_block", attn_res_block_size=2),
    }
    if name not in presets:
        raise ValueError(f"unknown variant {name!r}; known: {sorted(presets)}")
    return _with({**base, **presets[name]}, over)


def from_kimi_config(cfg: dict, a_log_len: int | None = None, expert_storage: str = "dense") -> HybridConfig:
    """From a Kimi Linear / K3 config.json: nested text_config, the released 1-based layer lists or
    transformers' `layer_types`; unknown keys kept in `extra`. `a_log_len` is the stored A_log length
    (K3 pads it to 128), which only the checkpoint knows."""
    text = cfg.get("text_config") or cfg
    n = text["num_hidden_layers"]
    lac = text.get("linear_attn_config") or {}
    if lac.get("full_attn_layers") is not None:
        full = set(lac["full_attn_layers"])                        # 1-based, as released
        mixers = tuple("mla" if i + 1 in full else "kda" for i in range(n))
    elif text.get("layer_types"):
        mixers = tuple("mla" if t == "full_attention" else "kda" for t in text["layer_types"])
    else:
        raise ValueError("kimi_linear config declares neither linear_attn_config nor layer_types")
    moe = "latent_moe" if text.get("routed_expert_hidden_size") else "moe"
    if text.get("mlp_layer_types"):
        ffns = tuple(moe if t == "sparse" else "dense" for t in text["mlp_layer_types"])
    else:
        first = text.get("first_k_dense_replace", 1)
        ffns = tuple("dense" if i < first else moe for i in range(n))
    experts = text.get("num_experts") or text.get("num_local_experts")
    shared = text.get("num_shared_experts") or text.get("n_shared_experts") or 0
    width = text.get("moe_intermediate_size", 0)
    known = {f.name for f in fields(HybridConfig)}
    return HybridConfig(
        vocab_size=text["vocab_size"], hidden_size=text["hidden_size"], num_hidden_layers=n,
        rms_norm_eps=text.get("rms_norm_eps", 1e-5), mixer_types=mixers, ffn_types=ffns,
        residual="attnres_block" if text.get("attn_res_block_size") else "prenorm",
        attn_res_block_size=text.get("attn_res_block_size"),
        tie_word_embeddings=text.get("tie_word_embeddings", False),
        mixer_args={
            "mla": dict(num_heads=text["num_attention_heads"], q_lora_rank=text.get("q_lora_rank"),
                        kv_lora_rank=text["kv_lora_rank"], nope_dim=text["qk_nope_head_dim"],
                        rope_dim=text["qk_rope_head_dim"], v_head_dim=text["v_head_dim"], use_nope=True,
                        output_gate=bool(text.get("mla_use_output_gate")), rope_theta=None),
            "kda": dict(num_heads=lac.get("num_heads") or text.get("linear_num_heads"),
                        head_dim=lac.get("head_dim") or text.get("linear_head_dim"),
                        conv_kernel=lac.get("short_conv_kernel_size") or text.get("linear_conv_kernel_dim") or 4,
                        gate="bounded" if "gate_lower_bound" in lac else "softplus",
                        gate_lower_bound=lac.get("gate_lower_bound", -5.0),
                        output_gate="full_rank" if lac.get("use_full_rank_gate") else "low_rank",
                        a_log_len=a_log_len)},
        intermediate_size=text.get("intermediate_size", 0), hidden_act=text.get("hidden_act", "silu"),
        activation_situ_beta=text.get("activation_situ_beta", 4.0),
        activation_situ_linear_beta=text.get("activation_situ_linear_beta", 25.0),
        num_experts=experts or 1, num_experts_per_token=text.get("num_experts_per_token")
        or text.get("num_experts_per_tok") or 1, moe_intermediate_size=width, shared_expert_width=shared * width,
        routed_expert_hidden_size=text.get("routed_expert_hidden_size"),
        latent_moe_use_norm=bool(text.get("latent_moe_use_norm")),
        moe_router_activation_func=text.get("moe_router_activation_func", "sigmoid"),
        moe_renormalize=text.get("moe_renormalize", True),
        routed_scaling_factor=text.get("routed_scaling_factor", 1.0),
        expert_storage=expert_storage, extra={k: v for k, v in text.items() if k not in known})
