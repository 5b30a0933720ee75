"""Per-family quirks that neither the shapes nor the common config keys show: one table, each row
naming the transformers file it was read from. Looked up by `model_type` only after shapes and
HF-conventional keys have had their say; a field set from here has origin `default`.

Keys: `conv1d_transposed` (weights stored [in, out]), `qkv_layout` (a fused qkv's row order:
`per_head` = [q, k, v] per head, `grouped` = per KV group [q..., k, v]), `gate_up` (`interleaved` =
even rows gate, odd rows up), `norm_offset` (RMSNorm applied as 1 + w), `embed_scale` (`sqrt_hidden`),
`alibi`, `parallel` (attention and MLP read the same normalised input), `post_norm`, `scoring`
(router), `sliding_all` (every attention layer uses `sliding_window`), `activation` (hard-coded, no
config key), `norm_eps` (hard-coded), `logits_scaling` (`multiply` where the family multiplies), `post_ln` (each norm
after its residual add), `weightless_norm` (`layer` / `rms`: pre-norms and final norm without
parameters, so without tensors), `attn_scale` (a hard-coded softmax scale), `alibi_scaled` (ALiBi added
before the softmax scale), `nope_full` (full-attention layers skip rope when others slide).
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
    "gptj": {"parallel": True, "source": "transformers/models/gptj/modeling_gptj.py (attn and mlp on ln_1)"},
    "codegen": {"parallel": True, "source": "transformers/models/codegen/modeling_codegen.py"},
    "phi": {"parallel": True, "source": "transformers/models/phi/modeling_phi.py (attn and mlp on input_layernorm)"},
    "cohere": {"parallel": True, "source": "transformers/models/cohere/modeling_cohere.py"},
    "cohere2": {"parallel": True, "nope_full": True,
                "source": "transformers/models/cohere2/modeling_cohere2.py (rope only if self.sliding_window)"},
    "cohere2_moe": {"nope_full": True, "source": "transformers/models/cohere2_moe/modeling_cohere2_moe.py "
                                                 "(rope if sliding_window or force_rope)"},
    "exaone4": {"nope_full": True, "source": "transformers/models/exaone4/modeling_exaone4.py "
                                             "(rope if sliding_window is None or is_sliding)"},
    "exaone_moe": {"nope_full": True, "source": "transformers/models/exaone_moe/modeling_exaone_moe.py "
                                                "(rope if sliding_window is None or is_sliding)"},
    "mistral": {"sliding_all": True, "source": "transformers/models/mistral/modeling_mistral.py"},
    "mixtral": {"sliding_all": True, "source": "transformers/models/mixtral/modeling_mixtral.py"},
    "deepseek_v3": {"scoring": "sigmoid", "source": "transformers/models/deepseek_v3/modeling_deepseek_v3.py "
                                                    "(router_logits.sigmoid())"},
    "glm4_moe": {"scoring": "sigmoid", "source": "transformers/models/glm4_moe/modeling_glm4_moe.py"},
    "dots1": {"scoring": "sigmoid", "source": "transformers/models/dots1/modeling_dots1.py"},
    "kimi_linear": {"scoring": "sigmoid", "source": "transformers/models/kimi_linear/modeling_kimi_linear.py"},
    "nemotron_h": {"scoring": "sigmoid", "source": "transformers/models/nemotron_h/modeling_nemotron_h.py"},
    "minimax": {"scoring": "softmax", "source": "transformers/models/minimax/modeling_minimax.py"},
    "opt": {"post_norm_key": "do_layer_norm_before", "norm_eps": 1e-5,
            "source": "transformers/models/opt/modeling_opt.py (nn.LayerNorm(embed_dim) at torch's eps 1e-5)"},
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
