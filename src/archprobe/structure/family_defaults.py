"""Per-family quirks that neither the shapes nor the common config keys show: one table, each row
naming the transformers file it was read from. Looked up by `model_type` only after shapes and
HF-conventional keys have had their say; a field set from here has origin `default`.

Keys: `conv1d_transposed` (weights stored [in, out]), `qkv_layout` (a fused qkv's row order:
`per_head` = [q, k, v] per head, `grouped` = per KV group [q..., k, v], `mp4_qvk` = 4 blocks of
[q, v, k]), `gate_up` (`interleaved` =
even rows gate, odd rows up), `norm_offset` (RMSNorm applied as 1 + w), `embed_scale` (`sqrt_hidden`),
`alibi`, `parallel` (attention and MLP read the same normalised input), `post_norm`, `scoring`
(router), `sliding_all` (every attention layer uses `sliding_window`, whatever `layer_types` say),
`sliding_opt_in` (no window unless `use_sliding_window` is true: the config class defaults it to false),
`sliding_ignored` (the config carries `sliding_window`, the modeling file never reads it; structure/sliding.py
holds the generic rule these rows are exceptions to); positions (structure/positions.py):
`rope_theta` (a base the modeling file hard-codes), `rope_interleaved` (pairs (0,1),(2,3) rotate
together: rotate_half on x[..., 0::2], rotate_every_two, view_as_complex), `rope_inverse` (rotation by
the negative angle), `rope` False (attention
without positions), `nope_full_layers` (with sliding layers, the full-attention layers run without rope),
`qk_norm_after_rope`, `nope_query_scale` (the NoPE layers' query multiplier), `positions` (`vaswani` /
`tensor2tensor` sinusoidal tables, not stored) with `position_offset`; `norm_eps` and `activation` where
the modeling file hard-codes them (`norm_eps_fixed`: also over the config key it ignores); `logits_scaling`
(`multiply` where the family multiplies), `post_ln` (each norm
after its residual add), `weightless_norm` (`layer` / `rms`: pre-norms and final norm without
parameters, so without tensors; `weightless_embed_norm`, `weightless_qk_norm` likewise on the embedding
and on q/k after rope), `attn_scale` (a hard-coded softmax scale), `alibi_scaled` (ALiBi added before the
softmax scale).
MoE routing keys (where the modeling file hard-codes it): `renormalize` (the top-k routing weights divided
by their sum, where the config has no `norm_topk_prob`; top-k over logits then a softmax over those k is the
same thing), `norm_topk_prob_ignored` (the config carries the key, the modeling code never reads it),
`router_bias_on` (`logits`: the selection bias is added to the logits), `router_weight_on` (`input`: the
routing weight scales the expert's input, Llama 4), `qk_norm_rope_layers` (use_qk_norm's weightless q/k
norm only on the layers that apply rope, Llama 4); `norm_kind` (`layer`: bias-free norms that are LayerNorms, DBRX).
`qkv_layout_mha` is `qkv_layout` only where there are as many K/V heads as query heads (GPT-BigCode
without multi_query).
"""

from __future__ import annotations

FAMILY_DEFAULTS: dict[str, dict] = {
    "gpt2": {"conv1d_transposed": True, "source": "transformers/models/gpt2/modeling_gpt2.py (Conv1D)"},
    "gpt_bigcode": {"source": "transformers/models/gpt_bigcode/modeling_gpt_bigcode.py (nn.Linear c_attn; "
                              "multi_query false: c_attn viewed [heads, 3 * head_dim], split per head)",
                    "conv1d_transposed": False, "qkv_layout_mha": "per_head"},
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
    "gpt_oss": {"gate_up": "interleaved", "scoring": "softmax", "renormalize": True,
                "source": "transformers/models/gpt_oss/modeling_gpt_oss.py (gate_up[..., ::2], [..., 1::2]; "
                          "softmax over the top-k router logits)"},
    # sliding windows opted into: the config class defaults use_sliding_window to False
    "qwen2": {"sliding_opt_in": True, "source": "transformers/models/qwen2/configuration_qwen2.py "
                                                "(use_sliding_window: bool = False, line 73)"},
    "qwen3": {"sliding_opt_in": True, "source": "transformers/models/qwen3/configuration_qwen3.py "
                                                "(use_sliding_window: bool = False, line 76)"},
    "qwen3_moe": {"sliding_opt_in": True, "source": "transformers/models/qwen3_moe/configuration_qwen3_moe.py "
                                                    "(use_sliding_window: bool = False, line 94)"},
    "smollm3": {"sliding_opt_in": True, "source": "transformers/models/smollm3/configuration_smollm3.py "
                                                  "(use_sliding_window: bool = False, line 86)"},
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
    "mixtral": {"sliding_all": True, "scoring": "softmax", "renormalize": True,
                "source": "transformers/models/mixtral/modeling_mixtral.py (MixtralTopKRouter: softmax, top-k, "
                          "router_top_value /= sum)"},
    "deepseek_v3": {"scoring": "sigmoid", "source": "transformers/models/deepseek_v3/modeling_deepseek_v3.py "
                                                    "(router_logits.sigmoid())"},
    "glm4_moe": {"scoring": "sigmoid", "source": "transformers/models/glm4_moe/modeling_glm4_moe.py"},
    "dots1": {"scoring": "sigmoid", "source": "transformers/models/dots1/modeling_dots1.py"},
    "lfm2": {"activation": "silu", "source": "transformers/models/lfm2/modeling_lfm2.py (Lfm2MLP F.silu)"},
    "lfm2_moe": {"activation": "silu", "scoring": "sigmoid",
              "source": "transformers/models/lfm2_moe/modeling_lfm2_moe.py (F.silu); "
              "transformers/models/lfm2_moe/modeling_lfm2_moe.py (Lfm2MoeTopKRouter: router_logits.sigmoid(), "
              "with or without the expert bias)"},
    "lfm3": {"head_gate_act": "sigmoid", "activation": "silu",
             "source": "transformers/models/lfm3/modeling_lfm3.py (F.silu; sigmoid(g_proj) per head)"},
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
    "bailing_hybrid": {"head_gate_act": "sigmoid", "rope_interleaved": True,
                       "source": "transformers/models/bailing_hybrid/modeling_bailing_hybrid.py (MLA: "
                                 "apply_rotary_pos_emb_interleave; sigmoid(g_proj) per head)"},
    "recurrent_gemma": {"norm_offset": True, "embed_scale": "sqrt_hidden_bf16", "sliding_all": True,
                        "source": "transformers/models/recurrent_gemma/modeling_recurrent_gemma.py "
                                  "(RMSNorm 1 + weight, normalizer = sqrt(H) as a bfloat16 buffer, local attention)"},
    "kimi_linear": {"scoring": "sigmoid", "rope": False,
              "source": "transformers/models/kimi_linear/modeling_kimi_linear.py (MLA without rotary); "
              "transformers/models/kimi_linear/modeling_kimi_linear.py"},
    "nemotron_h": {"scoring": "sigmoid", "rope": False, "sliding_ignored": True,
              "source": "transformers/models/nemotron_h/modeling_nemotron_h.py (attention without rotary); "
              "transformers/models/nemotron_h/configuration_nemotron_h.py (sliding_window, line 112: "
              "modeling_nemotron_h.py never reads it)"},
    "qwen2_moe": {"sliding_opt_in": True, "source": "transformers/models/qwen2_moe/configuration_qwen2_moe.py "
                                                    "(use_sliding_window: bool = False, line 91)"},
    "minimax": {"scoring": "softmax", "renormalize": True, "linear_norm_eps": 1e-6, "residual_from_norm": True,
                "sliding_all": True,
                "source": "transformers/models/minimax/modeling_minimax.py (softmax, top-k, /= sum; residual = "
                          "input_layernorm(h); MiniMaxRMSNorm(heads * head_dim) at its default eps in the lightning "
                          "attention; MiniMaxAttention: sliding_window=getattr(self.config, \"sliding_window\", "
                          "None) on every attention layer, its layer_types only say full vs linear)"},
    "opt": {"post_norm_key": "do_layer_norm_before", "source": "transformers/models/opt/modeling_opt.py (nn.LayerNorm"
            "'s default eps)", "norm_eps": 1e-5},
    # positions (structure/positions.py), each read from the family's modeling file
    "cohere2_moe": {"rope_interleaved": True, "nope_full_layers": True,
                    "source": "transformers/models/cohere2_moe/modeling_cohere2_moe.py"},
    "exaone4": {"nope_full_layers": True,
                "source": "transformers/models/exaone4/modeling_exaone4.py (rope if sliding_window is None or "
                          "is_sliding)"},
    "exaone_moe": {"nope_full_layers": True, "source": "transformers/models/exaone_moe/modeling_exaone_moe.py"},
    "kolibri1": {"nope_full_layers": True, "scoring": "sigmoid", "router_bias_on": "logits",
              "source": "transformers/models/kolibri1/modeling_kolibri1.py; "
              "transformers/models/kolibri1/modeling_kolibri1.py (Kolibri1TopKRouter: top-k of router_logits + "
              "e_score_correction_bias, then sigmoid of the chosen logits)"},
    "flint": {"nope_full_layers": True, "source": "transformers/models/flint/modeling_flint.py (rope only where "
              "sliding_window)"},
    "afmoe": {"scoring": "sigmoid", "renormalize": True, "nope_full_layers": True,
              "source": "transformers/models/afmoe/modeling_afmoe.py (AfmoeTokenChoiceRouter: sigmoid, "
                        "top-k on score + expert_bias, / (sum + 1e-20), * route_scale; AfmoeAttention: rope "
                        "only `if self.is_local_attention`)"},
    "helium": {"rope_interleaved": True, "source": "transformers/models/helium/modeling_helium.py"},
    "ernie4_5": {"rope_interleaved": True, "source": "transformers/models/ernie4_5/modeling_ernie4_5.py"},
    "ernie4_5_moe": {"rope_interleaved": True, "scoring": "softmax", "renormalize": True,
              "source": "transformers/models/ernie4_5_moe/modeling_ernie4_5_moe.py; "
              "transformers/models/ernie4_5_moe/modeling_ernie4_5_moe.py (softmax, top-k on probs + "
              "moe_statics bias, / clamp(sum, moe_norm_min))"},
    "glm": {"rope_interleaved": True, "source": "transformers/models/glm/modeling_glm.py"},
    "glm4": {"rope_interleaved": True, "source": "transformers/models/glm4/modeling_glm4.py"},
    "deepseek_v2": {"rope_interleaved": True, "renormalize": False, "norm_topk_prob_ignored": True,
              "source": "transformers/models/deepseek_v2/modeling_deepseek_v2.py (view_as_complex pairs); "
              "transformers/models/deepseek_v2/modeling_deepseek_v2.py (DeepseekV2Moe.route_tokens_to_experts: "
              "top-k weights * routed_scaling_factor, norm_topk_prob never read)"},
    "hunyuan_v1_dense": {"qk_norm_after_rope": True,
                         "source": "transformers/models/hunyuan_v1_dense/modeling_hunyuan_v1_dense.py "
                                   "(query_layernorm after apply_rotary_pos_emb)"},
    "hunyuan_v1_moe": {"qk_norm_after_rope": True, "scoring": "softmax", "renormalize": True,
              "source": "transformers/models/hunyuan_v1_moe/modeling_hunyuan_v1_moe.py; "
              "transformers/models/hunyuan_v1_moe/modeling_hunyuan_v1_moe.py (softmax, top-k, /= sum)"},
    "ministral3": {"sliding_all": True, "source": "transformers/models/ministral3/modeling_ministral3.py "
                   "(sliding_window=config.sliding_window on every layer)"},
    "llama4_text": {"scoring": "sigmoid", "renormalize": False, "router_weight_on": "input",
                    "qk_norm_rope_layers": True, "rope_interleaved": True,
                    "source": "transformers/models/llama4/modeling_llama4.py (Llama4Router: sigmoid of the top-k "
                              "logits; Llama4TextMoe: routed_in = hidden_states * router_scores; "
                              "Llama4TextAttention: qk_norm only `if config.use_qk_norm and self.use_rope`; "
                              "apply_rotary_emb: view_as_complex on (even, odd) pairs)"},
    "beam": {"nope_query_scale": {"form": "ssmax", "length": 2048, "power": 0.1},
             "source": "transformers/models/beam/modeling_beam.py (compute_attention_scaling on NoPE layers)"},
    "biogpt": {"norm_eps_fixed": 1e-5, "source": "transformers/models/biogpt/modeling_biogpt.py (nn.LayerNorm("
               "embed_dim): torch's eps, layer_norm_eps unused)"},
    "jamba": {"rope": False, "scoring": "softmax", "renormalize": False,
              "source": "transformers/models/jamba/modeling_jamba.py (no rotary embedding); "
              "transformers/models/jamba/modeling_jamba.py (softmax, top-k, no renormalisation)"},
    "xglm": {"positions": "tensor2tensor", "position_offset": 2, "norm_eps": 1e-5,
             "source": "transformers/models/xglm/modeling_xglm.py (XGLMSinusoidalPositionalEmbedding, offset 2; "
                       "nn.LayerNorm's default eps)"},
    "ctrl": {"positions": "vaswani", "embed_scale": "sqrt_hidden", "activation": "relu",
             "source": "transformers/models/ctrl/modeling_ctrl.py (positional_encoding; inputs_embeds * "
                       "sqrt(d_model_size); point_wise_feed_forward_network's nn.ReLU)"},
    "nanochat": {"weightless_norm": "rms", "weightless_embed_norm": True, "weightless_qk_norm": True,
                 "rope_inverse": True,
                 "source": "transformers/models/nanochat/modeling_nanochat.py (NanoChatRMSNorm without weight on the "
                           "embedding, both branches, q/k after rope and the output; rotate_half -> cat(x2, -x1))"},
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
    # MoE routing hard-coded in the modeling file (no norm_topk_prob in the config class)
    "dbrx": {"norm_eps": 1e-5, "norm_kind": "layer",
             "source": "transformers/models/dbrx/modeling_dbrx.py (nn.LayerNorm(d_model, bias=False): a LayerNorm "
                       "without bias, torch's default eps)"},
    "aria_text": {"scoring": "softmax", "renormalize": True,
                  "source": "transformers/models/aria/modeling_aria.py (AriaTextTopKRouter: softmax over the "
                            "top-k logits)"},
    "granitemoe": {"scoring": "softmax", "renormalize": True,
                   "source": "transformers/models/granitemoe/modeling_granitemoe.py (GraniteMoeTopKGating: "
                             "softmax over the top-k logits)"},
    "granitemoe_swa": {"scoring": "softmax", "renormalize": True,
                       "source": "transformers/models/granitemoe_swa/modeling_granitemoe_swa.py (softmax over "
                                 "the top-k logits)"},
    "granitemoehybrid": {"scoring": "softmax", "renormalize": True,
                         "source": "transformers/models/granitemoehybrid/modeling_granitemoehybrid.py (softmax "
                                   "over the top-k logits)"},
    "granitemoeshared": {"scoring": "softmax", "renormalize": True,
                         "source": "transformers/models/granitemoeshared/modeling_granitemoeshared.py (softmax "
                                   "over the top-k logits)"},
    "jetmoe": {"scoring": "softmax", "renormalize": True,
               "source": "transformers/models/jetmoe/modeling_jetmoe.py (JetMoeTopKGating: softmax over the "
                         "top-k logits)"},
    "hy_v3": {"scoring": "sigmoid", "renormalize": True,
              "source": "transformers/models/hy_v3/modeling_hy_v3.py (sigmoid, top-k on score + bias, "
                        "/ (sum + 1e-20), * router_scaling_factor)"},
    "minimax_m2": {"scoring": "sigmoid", "renormalize": True,
                   "source": "transformers/models/minimax_m2/modeling_minimax_m2.py (sigmoid, top-k on score + "
                             "bias, /= sum)"},
    "minimax_m3_vl_text": {"scoring": "sigmoid", "renormalize": True, "norm_offset": True,
                           "source": "transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py (sigmoid, top-k "
                                     "on score + bias, /= sum; routed output * routed_scaling_factor; "
                                     "MiniMaxM3VLRMSNorm scales by 1 + weight)"},
    "qwen3_5_moe_text": {"scoring": "softmax", "renormalize": True, "norm_offset": True,
                         "source": "transformers/models/qwen3_5_moe/modeling_qwen3_5_moe.py (softmax, top-k, "
                                   "/= sum; Qwen3_5MoeRMSNorm scales by 1 + weight)"},
    "phimoe": {"scoring": "sparsemixer",
               "source": "transformers/models/phimoe/modeling_phimoe.py (sparsemixer: per pick, a softmax over "
                         "the logits within 2 * router_jitter_noise of the best remaining one)"},
    "longcat_flash": {"scoring": "softmax", "renormalize": False,
                      "source": "transformers/models/longcat_flash/modeling_longcat_flash.py (softmax, top-k, "
                                "* routed_scaling_factor)"},
    "mistral_large4_text": {"scoring": "softmax", "renormalize": True,
                            "source": "transformers/models/mistral_large4/modeling_mistral_large4.py (softmax, "
                                      "group-limited top-k, / (sum + 1e-20))"},
    "qwen3_vl_moe_text": {"scoring": "softmax", "renormalize": True,
                          "source": "transformers/models/qwen3_vl_moe/modeling_qwen3_vl_moe.py (softmax, top-k, "
                                    "/= sum)"},
    "ernie4_5_vl_moe_text": {"scoring": "softmax", "renormalize": True,
                             "source": "transformers/models/ernie4_5_vl_moe/modeling_ernie4_5_vl_moe.py (softmax, "
                                       "top-k on probs + moe_statics bias, / clamp(sum, norm_min))"},
    "step3p5": {"scoring": "sigmoid", "renormalize": True,
                "source": "transformers/models/step3p7/modeling_step3p7.py (sigmoid, top-k on score + bias, /= sum; "
                          "routed output * routed_scaling_factor)"},
    "step3p7": {"scoring": "sigmoid", "renormalize": True,
                "source": "transformers/models/step3p7/modeling_step3p7.py (as step3p5)"},
    "laguna": {"head_gate_act": "softplus", "scoring": "sigmoid", "renormalize": True,
               "source": "transformers/models/laguna/modeling_laguna.py (sigmoid, top-k on score + bias, /= sum; "
                         "routed output * routed_scaling_factor; LagunaAttention: softplus(g_proj) per head)"},
}


def family_default(model_type: str | None, key: str):
    """The table's value for `key` in this family, or None."""
    row = FAMILY_DEFAULTS.get(model_type or "")
    return row.get(key) if row else None
