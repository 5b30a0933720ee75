"""config.json normalised: one dataclass whatever the model family spells its keys.

Field names follow the most common upstream keys; `aliases` lists the other spellings. Nested
language-model configs (`text_config`, `llm_config`, `language_config`) are resolved, and
`quantization_config` is looked up there first (K3 keeps it inside `text_config` only). Unknown keys
stay in `extra` for the feature detectors. The per-layer schedule the config declares (1-based
`kda_layers`, `layer_types`, `hybrid_override_pattern`, `first_k_dense_replace`, ...) is resolved
once into `mixer_plan` / `ffn_plan`; `None` where the config says nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NESTED_TEXT_KEYS = ("text_config", "llm_config", "language_config", "text_model_config")

ALIASES: dict[str, tuple[str, ...]] = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "d_model", "n_embd", "dim", "model_dim"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "num_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "num_kv_heads": ("num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num"),
    "head_dim": ("head_dim", "kv_channels"),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"),
    "num_experts": ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"),
    "top_k": ("num_experts_per_tok", "num_experts_per_token", "moe_top_k", "top_k", "moe_k"),
    "num_shared_experts": ("n_shared_experts", "num_shared_experts", "shared_expert_count"),
    "moe_intermediate_size": ("moe_intermediate_size", "expert_intermediate_size"),
    "max_position_embeddings": ("max_position_embeddings", "model_max_length", "n_positions", "seq_length"),
    "kv_lora_rank": ("kv_lora_rank",),
    "q_lora_rank": ("q_lora_rank",),
    "rope_dim": ("qk_rope_head_dim",),
    "nope_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "sliding_window": ("sliding_window", "attention_window_size"),
    "latent_size": ("routed_expert_hidden_size", "moe_latent_size"),
}


def _get(cfg: dict, keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            return v
    return None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass
class ModelConfig:
    """The language model's config, normalised. `raw` is the (nested) text config as written."""

    model_type: str = "unknown"
    architectures: list[str] = field(default_factory=list)
    num_layers: int | None = None
    hidden_size: int | None = None
    vocab_size: int | None = None
    num_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    intermediate_size: int | None = None
    num_experts: int | None = None
    top_k: int | None = None
    num_shared_experts: int | None = None
    moe_intermediate_size: int | None = None
    max_position_embeddings: int | None = None
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    rope_dim: int | None = None
    nope_dim: int | None = None
    v_head_dim: int | None = None
    sliding_window: int | None = None
    latent_size: int | None = None
    mixer_plan: tuple[str | None, ...] = ()
    ffn_plan: tuple[str | None, ...] = ()
    quantization_config: dict | None = None
    remote_code: bool = False
    nested_in: str | None = None
    wrapper_model_type: str | None = None
    raw: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        """A raw key of the text config (also looks into `linear_attn_config`)."""
        if key in self.raw:
            return self.raw[key]
        lac = self.raw.get("linear_attn_config")
        if isinstance(lac, dict) and key in lac:
            return lac[key]
        return default


def normalize_config(cfg: dict | None) -> ModelConfig:
    """ModelConfig from a config.json dict (or an empty one when there is no config)."""
    if not cfg:
        return ModelConfig()
    text, nested_in = cfg, None
    for key in NESTED_TEXT_KEYS:
        if isinstance(cfg.get(key), dict) and cfg[key]:
            text, nested_in = cfg[key], key
            break
    mc = ModelConfig(raw=text, nested_in=nested_in)
    mc.model_type = str(text.get("model_type") or cfg.get("model_type") or "unknown")
    mc.wrapper_model_type = str(cfg.get("model_type")) if nested_in else None
    archs = text.get("architectures") or cfg.get("architectures") or []
    mc.architectures = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    mc.remote_code = bool(cfg.get("auto_map") or text.get("auto_map"))
    known = set()
    for fname, keys in ALIASES.items():
        known.update(keys)
        setattr(mc, fname, _int(_get(text, keys)))
    qc = text.get("quantization_config") or cfg.get("quantization_config") or text.get("quantization")
    mc.quantization_config = qc if isinstance(qc, dict) else None
    if mc.head_dim is None and mc.hidden_size and mc.num_heads and not mc.kv_lora_rank:
        mc.head_dim = mc.hidden_size // mc.num_heads
    if mc.num_kv_heads is None and mc.num_heads and not mc.kv_lora_rank:
        mc.num_kv_heads = mc.num_heads
    mc.mixer_plan, mc.ffn_plan = _plans(text, mc)
    mc.extra = {k: v for k, v in text.items() if k not in known}
    return mc


def _full_attention_kind(mc: ModelConfig) -> str:
    return "mla" if mc.kv_lora_rank else "gqa"


def _linear_kind(mc: ModelConfig) -> str:
    return {"kimi_linear": "kda", "qwen3_next": "gated_deltanet", "nemotron_h": "mamba2"}.get(
        mc.model_type, "linear")


def _plans(text: dict, mc: ModelConfig) -> tuple[tuple, tuple]:
    """Per-layer mixer and FFN kinds as the config declares them (None = not declared)."""
    n = mc.num_layers
    lac = text.get("linear_attn_config") if isinstance(text.get("linear_attn_config"), dict) else {}
    pattern = text.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:  # Nemotron-H: one block kind per layer
        kinds = {"M": ("mamba2", "none"), "*": ("gqa", "none"), "E": ("none", "moe"), "-": ("none", "dense")}
        pairs = [kinds.get(c, (None, None)) for c in pattern]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    block_types = text.get("layers_block_type")
    if isinstance(block_types, list) and block_types:
        kinds = {"mamba": ("mamba2", "none"), "linear_attention": ("mamba2", "none"),
                 "attention": ("gqa", "none"), "full_attention": ("gqa", "none"),
                 "moe": ("none", "moe"), "mlp": ("none", "dense")}
        pairs = [kinds.get(str(c), (None, None)) for c in block_types]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    if not n or n > 100_000:
        return (), ()
    mixer: list[str | None] = [None] * n
    full, linear = lac.get("full_attn_layers"), lac.get("kda_layers")
    if isinstance(full, list) and isinstance(linear, list):  # Kimi: 1-based layer numbers
        for i in full:
            if isinstance(i, int) and 1 <= i <= n:
                mixer[i - 1] = _full_attention_kind(mc)
        for i in linear:
            if isinstance(i, int) and 1 <= i <= n:
                mixer[i - 1] = "kda"
    elif isinstance(text.get("layer_types"), list) and len(text["layer_types"]) == n:
        names = {"full_attention": _full_attention_kind(mc), "attention": _full_attention_kind(mc),
                 "linear_attention": _linear_kind(mc), "sliding_attention": "sliding_window",
                 "chunked_attention": "sliding_window"}
        mixer = [names.get(str(t)) for t in text["layer_types"]]
    elif mc.num_heads:
        mixer = [_full_attention_kind(mc)] * n
    ffn: list[str | None] = [None] * n
    moe_kind = "latent_moe" if mc.latent_size else "moe"
    mlp_types = text.get("mlp_layer_types")
    if isinstance(mlp_types, list) and len(mlp_types) == n:
        ffn = [moe_kind if t == "sparse" else "dense" if t == "dense" else None for t in mlp_types]
    elif mc.num_experts:
        first_dense = _int(text.get("first_k_dense_replace")) or 0
        freq = _int(text.get("moe_layer_freq")) or _int(text.get("decoder_sparse_step")) or 1
        dense_only = set(text.get("mlp_only_layers") or [])
        ffn = [("dense" if i < first_dense or i in dense_only or (i + 1) % freq else moe_kind)
               for i in range(n)] if freq > 0 else ffn
    elif mc.intermediate_size:
        ffn = ["dense"] * n
    return tuple(mixer), tuple(ffn)
