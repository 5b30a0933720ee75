"""Per-family quirks that neither the shapes nor the common config keys show: one table, each row
naming the transformers file it was read from. Looked up by `model_type` only after shapes and
HF-conventional keys have had their say; a field set from here has origin `default`.

Keys: `conv1d_transposed` (weights stored [in, out]), `qkv_layout` (a fused qkv's row order:
`per_head` = [q, k, v] per head, `grouped` = per KV group [q..., k, v], `mp4_qvk` = 4 blocks of
[q, v, k]), `gate_up` (`interleaved` =
even rows gate, odd rows up), `norm_offset` (RMSNorm applied as 1 + w), `embed_scale` (`sqrt_hidden`),
`alibi`, `parallel` (attention and MLP read the same normalised input), `post_norm`, `scoring`
(router), `sliding_all` (every attention layer uses `sliding_window`); positions (structure/positions.py):
`rope_theta` (a base the modeling file hard-codes), `rope_interleaved` (pairs (0,1),(2,3) rotate
together: rotate_half on x[..., 0::2], rotate_every_two, view_as_complex), `rope` False (attention
without positions), `nope_full_layers` (with sliding layers, the full-attention layers run without rope),
`qk_norm_after_rope`, `nope_query_scale` (the NoPE layers' query multiplier), `positions` (`vaswani` /
`tensor2tensor` sinusoidal tables, not stored) with `position_offset`; `norm_eps` and `activation` where
the modeling file hard-codes them; `logits_scaling` (`multiply` where the family multiplies), `post_ln` (each norm
after its residual add), `weightless_norm` (`layer` / `rms`: pre-norms and final norm without
parameters, so without tensors), `attn_scale` (a hard-coded softmax scale), `alibi_scaled` (ALiBi added
before the softmax scale).
"""

from __future__ import annotations

FAMILY_DEFAULTS: dict[str, dict] = {
    "gpt2": {"conv1d_transposed": True, "source": "transformers/models/gpt2/modeling_gpt2.py (Conv1D)"},
    "gpt_bigcode": {"source": "transformers/models/gpt_bigcode/modeling_gpt_bigcode.py (nn.Linear c_attn)",
                    "conv1d_transposed": False},
    "gpt_neo": {"attn_scale": 1.0, "source": "transformers/models/gpt_neo/modeling_gpt_neo.py (no 1/sqrt(d): "
                                             "torch.matmul(query, key.transpose(-1, -2)) unscaled)"},
    "gpt_neox": {"qkv_layout": "per_head", "source": "transformers/models/gpt_neox/modeling_gpt_neox.py "
                                                     "(qkv.view(..., heads, 3 * head_dim))"},
    "gpt_neox_japanese": {"qkv_layout": "per_head",
                          "source": "transformers/models/gpt_neox_japanese/modeling_gpt_neox_japanese.py "
                                    "(qkv.view(..., heads, 3 * head_size))"},
    "persimmon": {"qkv_layout": "per_head", "source": "transformers/models/persimmon/modeling_persimmon.py "
                                                      "(_split_heads)"},
    "bloom": {"qkv_layout": "per_head", "alibi": True, "activation": "gelu_tanh",
              "source": "transformers/models/bloom/modeling_bloom.py (_reshape, build_alibi_tensor, BloomGelu)"},
    "falcon": {"qkv_layout": "grouped", "alibi_scaled": True,
               "source": "transformers/models/falcon/modeling_falcon.py (_split_heads; (scores + alibi) * "
                         "inv_norm_factor)"},
    "mpt": {"alibi": True, "activation": "gelu",
            "source": "transformers/models/mpt/modeling_mpt.py (build_mpt_alibi_tensor, nn.GELU(approximate='none'))"},
    "gpt_oss": {"gate_up": "interleaved", "scoring": "softmax",
                "source": "transformers/models/gpt_oss/modeling_gpt_oss.py (gate_up[..., ::2], [..., 1::2]; "
                          "softmax over the top-k router logits)"},
    "gemma": {"norm_offset": True, "embed_scale": "sqrt_hidden",
              "source": "transformers/models/gemma/modeling_gemma.py (GemmaRMSNorm 1 + weight, normalizer)"},
    "gemma2": {"norm_offset": True, "embed_scale": "sqrt_hidden",
               "source": "transformers/models/gemma2/modeling_gemma2.py"},
    "gemma3_text": {"norm_offset": True, "embed_scale": "sqrt_hidden",
                    "source": "transformers/models/gemma3/modeling_gemma3.py"},
    "qwen3_next": {"norm_offset": True,
                   "source": "transformers/models/qwen3_next/modeling_qwen3_next.py (Qwen3NextRMSNorm 1 + weight)"},
    "gptj": {"parallel": True, "source": "transformers/models/gptj/modeling_gptj.py (attn and mlp on ln_1; "
             "create_sinusoidal_positions base 10000, rotate_every_two)", "rope_theta": 10000.0,
             "rope_interleaved": True},
    "codegen": {"parallel": True, "source": "transformers/models/codegen/modeling_codegen.py (base 10000, "
                "rotate_every_two; qkv_split into mp_num=4 blocks of [query, value, key])", "rope_theta": 10000.0,
                "rope_interleaved": True, "qkv_layout": "mp4_qvk"},
    "phi": {"parallel": True, "source": "transformers/models/phi/modeling_phi.py (attn and mlp on input_layernorm)"},
    "cohere": {"parallel": True, "source": "transformers/models/cohere/modeling_cohere.py (rotate_half on x[..., ::2])",
               "rope_interleaved": True},
    "cohere2": {"parallel": True, "source": "transformers/models/cohere2/modeling_cohere2.py (rope only where "
                "sliding_window)", "rope_interleaved": True, "nope_full_layers": True},
    "mistral": {"sliding_all": True, "source": "transformers/models/mistral/modeling_mistral.py"},
    "mixtral": {"sliding_all": True, "source": "transformers/models/mixtral/modeling_mixtral.py"},
    "deepseek_v3": {"scoring": "sigmoid", "source": "transformers/models/deepseek_v3/modeling_deepseek_v3.py "
                                                    "(router_logits.sigmoid())"},
    "glm4_moe": {"scoring": "sigmoid", "source": "transformers/models/glm4_moe/modeling_glm4_moe.py"},
    "dots1": {"scoring": "sigmoid", "source": "transformers/models/dots1/modeling_dots1.py"},
    "lfm2": {"activation": "silu", "source": "transformers/models/lfm2/modeling_lfm2.py (Lfm2MLP F.silu)"},
    "lfm2_moe": {"activation": "silu", "source": "transformers/models/lfm2_moe/modeling_lfm2_moe.py (F.silu)"},
    "lfm3": {"activation": "silu", "source": "transformers/models/lfm3/modeling_lfm3.py (F.silu)"},
    "olmo_hybrid": {"linear_norm_eps": 1e-5, "source": "transformers/models/olmo_hybrid/modeling_olmo_hybrid.py "
                                                      "(o_norm = OlmoHybridRMSNormGated(head_v_dim, eps=1e-5))"},
    "qwen3_5_text": {"norm_offset": True, "source": "transformers/models/qwen3_5/modeling_qwen3_5.py (Qwen3_5RMSNorm "
                                                 "1 + weight)"},
    "deepseek_v32": {"indexer_rope_interleaved": False, "rope_interleaved": True,
                     "source": "transformers/models/deepseek_v32/modeling_deepseek_v32.py (MLA: "
                               "apply_rotary_pos_emb_interleave; the indexer: half-split apply_rotary_pos_emb)"},
    "glm_moe_dsa": {"indexer_rope_interleaved": True, "rope_interleaved": True,
                    "source": "transformers/models/glm_moe_dsa/modeling_glm_moe_dsa.py (apply_rotary_pos_emb_"
                              "interleave in the MLA and in GlmMoeDsaIndexer)"},
    "kimi_linear": {"scoring": "sigmoid", "source": "transformers/models/kimi_linear/modeling_kimi_linear.py (MLA "
                    "without rotary)", "rope": False},
    "nemotron_h": {"scoring": "sigmoid", "source": "transformers/models/nemotron_h/modeling_nemotron_h.py (attention "
                   "without rotary)", "rope": False},
    "minimax": {"scoring": "softmax", "source": "transformers/models/minimax/modeling_minimax.py"},
    "opt": {"post_norm_key": "do_layer_norm_before", "source": "transformers/models/opt/modeling_opt.py (nn.LayerNorm"
            "'s default eps)", "norm_eps": 1e-5},
    # positions (structure/positions.py), each read from the family's modeling file
    "cohere2_moe": {"rope_interleaved": True, "nope_full_layers": True,
                    "source": "transformers/models/cohere2_moe/modeling_cohere2_moe.py"},
    "exaone4": {"nope_full_layers": True,
                "source": "transformers/models/exaone4/modeling_exaone4.py (rope if sliding_window is None or "
                          "is_sliding)"},
    "exaone_moe": {"nope_full_layers": True, "source": "transformers/models/exaone_moe/modeling_exaone_moe.py"},
    "kolibri1": {"nope_full_layers": True, "source": "transformers/models/kolibri1/modeling_kolibri1.py"},
    "flint": {"nope_full_layers": True, "source": "transformers/models/flint/modeling_flint.py (rope only where "
              "sliding_window)"},
    "afmoe": {"nope_full_layers": True, "source": "transformers/models/afmoe/modeling_afmoe.py (rope only on "
              "is_local_attention layers)"},
    "helium": {"rope_interleaved": True, "source": "transformers/models/helium/modeling_helium.py"},
    "ernie4_5": {"rope_interleaved": True, "source": "transformers/models/ernie4_5/modeling_ernie4_5.py"},
    "ernie4_5_moe": {"rope_interleaved": True,
                     "source": "transformers/models/ernie4_5_moe/modeling_ernie4_5_moe.py"},
    "glm": {"rope_interleaved": True, "source": "transformers/models/glm/modeling_glm.py"},
    "glm4": {"rope_interleaved": True, "source": "transformers/models/glm4/modeling_glm4.py"},
    "deepseek_v2": {"rope_interleaved": True,
                    "source": "transformers/models/deepseek_v2/modeling_deepseek_v2.py (view_as_complex pairs)"},
    "hunyuan_v1_dense": {"qk_norm_after_rope": True,
                         "source": "transformers/models/hunyuan_v1_dense/modeling_hunyuan_v1_dense.py "
                                   "(query_layernorm after apply_rotary_pos_emb)"},
    "hunyuan_v1_moe": {"qk_norm_after_rope": True,
                       "source": "transformers/models/hunyuan_v1_moe/modeling_hunyuan_v1_moe.py"},
    "ministral3": {"sliding_all": True, "source": "transformers/models/ministral3/modeling_ministral3.py "
                   "(sliding_window=config.sliding_window on every layer)"},
    "llama4_text": {"rope_interleaved": True,
                    "source": "transformers/models/llama4/modeling_llama4.py (apply_rotary_emb, view_as_complex)"},
    "beam": {"nope_query_scale": {"form": "ssmax", "length": 2048, "power": 0.1},
             "source": "transformers/models/beam/modeling_beam.py (compute_attention_scaling on NoPE layers)"},
    "jamba": {"rope": False, "source": "transformers/models/jamba/modeling_jamba.py (no rotary embedding)"},
    "xglm": {"positions": "tensor2tensor", "position_offset": 2, "norm_eps": 1e-5,
             "source": "transformers/models/xglm/modeling_xglm.py (XGLMSinusoidalPositionalEmbedding, offset 2; "
                       "nn.LayerNorm's default eps)"},
    "ctrl": {"positions": "vaswani", "embed_scale": "sqrt_hidden", "activation": "relu",
             "source": "transformers/models/ctrl/modeling_ctrl.py (positional_encoding; inputs_embeds * "
                       "sqrt(d_model_size); point_wise_feed_forward_network's nn.ReLU)"},
    "nemotron": {"norm_offset": True, "source": "transformers/models/nemotron/modeling_nemotron.py "
                                                "(NemotronLayerNorm1P: layer_norm with weight + 1)"},
    "olmo": {"weightless_norm": "layer", "norm_eps": 1e-5,
             "source": "transformers/models/olmo/modeling_olmo.py (OlmoLayerNorm: F.layer_norm, no weight, eps 1e-5)"},
    "openai-gpt": {"post_ln": True, "source": "transformers/models/openai/modeling_openai.py (Block: "
                                              "ln_1(x + attn(x)), ln_2(n + mlp(n)))"},
    "hyperclovax": {"logits_scaling": "multiply", "source": "transformers/models/hyperclovax/modeling_hyperclovax.py "
                                                            "(lm_head(h) * logits_scaling; Granite divides)"},
    "vaultgemma": {"norm_offset": True, "embed_scale": "sqrt_hidden",
                   "source": "transformers/models/vaultgemma/modeling_vaultgemma.py (1 + weight, hidden_size**0.5)"},
}


def family_default(model_type: str | None, key: str):
    """The table's value for `key` in this family, or None."""
    row = FAMILY_DEFAULTS.get(model_type or "")
    return row.get(key) if row else None
