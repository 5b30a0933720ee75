"""Which families transformers applies a norm's stored gain as plain `w · x` (the rest of the offset story,
`(1 + w) · x`, is `norm_offset` in structure/family_defaults.py).

A trained model's gains are not ones (SmolLM2-135M's layer-0 input norm averages +0.001), so the stored
values cannot tell the two conventions apart for a family transformers knows: its modeling file does. Each
row names the file and the norm class read; tests/structure/test_norm_convention.py checks every row against
the installed transformers (no `1 + self.weight` in the file)."""

from __future__ import annotations


def _row(model_type: str, norm: str, folder: str | None = None) -> tuple[str, str]:
    folder = folder or model_type
    return model_type, f"transformers/models/{folder}/modeling_{folder}.py ({norm}: self.weight * hidden_states)"


PLAIN_GAINS: dict[str, str] = dict([
    _row("llama", "LlamaRMSNorm"),
    _row("mistral", "MistralRMSNorm"),
    _row("mixtral", "MixtralRMSNorm"),
    _row("qwen2", "Qwen2RMSNorm"),
    _row("qwen2_moe", "Qwen2MoeRMSNorm"),
    _row("qwen3", "Qwen3RMSNorm"),
    _row("qwen3_moe", "Qwen3MoeRMSNorm"),
    _row("phi3", "Phi3RMSNorm"),
    _row("olmo2", "Olmo2RMSNorm"),
    _row("olmo3", "Olmo3RMSNorm"),
    _row("granite", "GraniteRMSNorm"),
    _row("granitemoe", "GraniteMoeRMSNorm"),
    _row("smollm3", "SmolLM3RMSNorm"),
    _row("deepseek_v2", "DeepseekV2RMSNorm"),
    _row("deepseek_v3", "DeepseekV3RMSNorm"),
    _row("glm", "GlmRMSNorm"),
    _row("glm4", "Glm4RMSNorm"),
    _row("ernie4_5", "Ernie4_5RMSNorm"),
    _row("hunyuan_v1_dense", "HunYuanDenseV1RMSNorm"),
    _row("minimax", "MiniMaxRMSNorm"),
    _row("exaone4", "Exaone4RMSNorm"),
    _row("apertus", "ApertusRMSNorm"),
    _row("seed_oss", "SeedOssRMSNorm"),
    _row("arcee", "ArceeRMSNorm"),
    _row("helium", "HeliumRMSNorm"),
    _row("starcoder2", "nn.LayerNorm"),
    _row("phi", "nn.LayerNorm"),
    _row("stablelm", "nn.LayerNorm"),
    _row("olmo", "OlmoLayerNorm (no weight)"),
    _row("cohere", "CohereLayerNorm"),
])


def plain_gain_source(model_type: str | None) -> str | None:
    """The modeling file that applies this family's norms as w · x, or None where the table has no row."""
    return PLAIN_GAINS.get(model_type or "")
