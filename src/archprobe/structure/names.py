"""The one vocabulary of names: shapes decide structure, names only break ties between candidates that shapes
leave equal (q vs k vs v of one width, A_log vs D vs dt_bias of one length). Every detector in structure/ and
kinds/ asks `rank` or `says` with a role from WORDS; no detector holds its own word list, so adding a
family's spelling is one line here (tests/structure/test_names.py enforces it)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

WORDS: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in {
    # --- token mixers: attention (Llama q_proj, GPT-NeoX query, Mistral-native wq) ---
    "q": {"q", "q_proj", "query", "wq"},
    "k": {"k", "k_proj", "key", "wk"},
    "v": {"v", "v_proj", "value", "wv"},
    "q_norm": {"q_norm", "q", "query_layernorm", "q_layernorm", "query", "wq", "wq_norm"},   # Qwen3, OLMo2, Cohere
    "k_norm": {"k_norm", "k", "key_layernorm", "k_layernorm", "key", "wk", "wk_norm"},
    "mixer_out": {"o", "out", "out_proj", "o_proj", "wo", "dense"},          # every mixer's writer; Phi dense
    "output_gate": {"g", "g_proj", "gate", "o_gate", "output_gate"},          # gated attention, KDA, GDN
    "mla_q_down": {"q", "q_a_proj", "wq_a"},                                  # DeepSeek q_a_proj, native wq_a
    "mla_kv_down": {"kv", "kv_a_proj_with_mqa", "wkv_a"},
    "indexer": {"indexer"},                                                   # DeepSeek-V3.2's sparse indexer
    "kv_up_k": {"k", "k_up"},                                                 # shared low-rank K/V up-projections
    "kv_up_v": {"v", "v_up"},
    # --- linear attention / SSM (Mamba-2, Gated DeltaNet, KDA, Lightning) ---
    "a_log": {"a_log", "a"},
    "ssm_d": {"d"},
    "dt_bias": {"dt_bias", "dt"},
    "beta_proj": {"b", "in_proj_b", "b_proj"},                                # Qwen3-Next in_proj_b, KDA b_proj
    "alpha_proj": {"a", "in_proj_a", "a_proj"},
    "kda_f": {"f", "f_a", "f_a_proj"},                                        # KDA's low-rank decay pair
    "q_conv": {"q", "q_conv1d"},
    "k_conv": {"k", "k_conv1d"},
    "v_conv": {"v", "v_conv1d"},
    "dt_norm": {"dt", "dt_layernorm"},                                        # Jamba's inner Mamba norms
    "b_norm": {"b", "b_layernorm"},
    "c_norm": {"c", "c_layernorm"},
    # --- RG-LRU (RecurrentGemma) ---
    "input_gate": {"input_gate", "input", "input_gate_weight"},
    "recurrent_gate": {"recurrent_gate", "recurrent"},
    "input_gate_bias": {"input_gate_bias", "input"},
    "recurrent_gate_bias": {"recurrent_gate_bias", "recurrent"},
    "linear_x": {"x", "linear_x"},
    "linear_y": {"y", "linear_y"},
    # --- RWKV-4 time mixing ---
    "rwkv_output": {"output", "out", "o"},
    "rwkv_receptance": {"receptance", "r"},
    "rwkv_decay": {"time_decay", "decay", "w"},
    "rwkv_bonus": {"time_first", "first", "u", "bonus"},
    "rwkv_mix_key": {"time_mix_key", "key", "k"},
    "rwkv_mix_value": {"time_mix_value", "value", "v"},
    "rwkv_mix_receptance": {"time_mix_receptance", "receptance", "r"},
    # --- FFN (Llama gate/up/down, Mixtral w1/w3/w2, T5 wi_0/wi_1/wo, GPT-2 c_fc/c_proj, Falcon dense_4h_to_h) ---
    "writer": {"down", "w2", "fc2", "out", "o", "wo", "dense_4h_to_h", "fc_out", "proj_out", "c_proj", "output",
               "dense", "out_proj", "o_proj", "down_proj", "linear_proj", "attn_out", "linear_fc2"},
    "ffn_down": {"down", "w2", "wo", "fc2", "out"},                          # flattened expert banks
    "ffn_gate": {"gate", "w1", "wi_0", "gate_proj", "fc1", "c_fc", "fc_in"},
    "expert_gate": {"gate", "w1", "wi_0"},                                    # flattened expert banks
    "ffn_up": {"up", "w3", "wi_1", "up_proj", "v1"},
    "shared_expert": {"shared", "shared_expert", "shared_experts", "shexp"},  # DeepSeek, Qwen2-MoE, GGUF shexp
    # --- a layer's sub-blocks and its norms' placement ---
    "mixer_block": {"attn", "attention", "self_attn", "self_attention", "mixer", "mamba", "linear_attn", "conv",
                    "token_mixer", "ssm"},
    "ffn_block": {"mlp", "ffn", "feed_forward", "moe", "block_sparse_moe", "experts", "feedforward"},
    "pre_mixer": {"input_layernorm", "ln_1", "attention_norm", "attn_norm", "input", "self_attn_layer_norm",
                  "ln_attn", "norm1", "pre_attention", "pre_mixer", "operator_norm", "norm_1", "attention_layernorm"},
    "post_mixer": {"post_attention_layernorm", "post_attn", "post_mixer", "post_self_attn_layernorm"},
    "pre_ffn": {"post_attention_layernorm", "ln_2", "ffn_norm", "pre_feedforward_layernorm", "ln_mlp",
                "final_layer_norm", "norm2", "mlp_norm", "pre_ffn", "norm_2", "ffn_layernorm", "pre_mlp"},
    "post_ffn": {"post_feedforward_layernorm", "post_ffn", "post_mlp_layernorm", "post_mlp"},
    "mixer_side": {"input", "attn", "attention", "mix", "mixer", "self", "ln_1", "norm1", "1", "pre", "operator",
                   "token", "seq", "ln_attn", "sa"},                    # a norm's side when placements tie
    "ffn_side": {"ffn", "mlp", "mid", "post", "ln_2", "norm2", "2", "feed", "forward", "feedforward", "channel",
                 "moe", "ln_mlp", "final"},
    "post": {"post"},                                                     # Peri-LN post_norm1 / post_norm2
    "bias": {"bias"},                                                     # GPT-NeoX-Japanese dense_bias
    "attn_residual_query": {"self_attention_res_proj", "attn", "attention"},  # Attention Residuals' queries
    "residual_scale": {"gate", "scale", "alpha", "gamma", "lambda", "res"},   # Gemma-3n, Cohere2 layer scalars
    "block0_embed_norm": {"pre_ln", "ln0", "ln_emb"},   # RWKV: the embedding's LayerNorm stored in block 0
    # --- model level ---
    "embed_norm": {"word_embeddings_layernorm", "embed", "embeddings", "emb", "embedding_norm", "ln_embd"},  # BLOOM
    "lm_head": {"lm_head", "head", "output", "unembed", "embed_out", "classifier", "logits"},
    "embed": {"embed", "embedding", "embeddings", "embed_tokens", "tok", "tok_embeddings", "wte", "token", "word",
              "word_embeddings", "tokens"},
}.items()}

# Sub-strings (not whole words) of the tensors archprobe sets aside: other modalities' towers and
# multi-token-prediction heads (DeepSeek-V3 mtp, GLM nextn); GGUF's mmproj prefixes.
VISION_SUBSTRINGS = ("vision", "visual", "image", "audio", "mm_projector", "multi_modal", "vit", "patch_embed",
                     "siglip", "clip", "speech", "video")
VISION_PREFIXES = ("v.", "mm.")
MTP_SUBSTRINGS = ("mtp", "nextn")


class _Named(Protocol):
    path: str


T = TypeVar("T", bound=_Named)


def words(path: str) -> set[str]:
    """Lower-case name tokens of a module path ("model.layers.0.self_attn.q_proj" -> q_proj, q, proj, ...)."""
    out = set()
    for part in path.lower().replace("-", "_").split("."):
        out.add(part)
        out.update(p for p in part.split("_") if p)
    return out


def says(path: str, *roles: str) -> bool:
    """Whether a path's words name any of these roles."""
    w = words(path)
    return any(w & WORDS[r] for r in roles)


def rank(mods: Iterable[T], *roles: str) -> list[T]:
    """The tie-break: order same-shaped candidates by the first role each one's name says (then by path);
    candidates no role names come last. Never drops a candidate: names order, shapes decide."""
    wanted = [WORDS[r] for r in roles]

    def key(m: T):
        w = words(m.path)
        return next((i for i, ws in enumerate(wanted) if w & ws), len(wanted)), m.path
    return sorted(mods, key=key)
