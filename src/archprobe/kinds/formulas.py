"""Per-sequence cache/state bytes of one layer, by layer type. Each formula is one line of arithmetic
that a reader can check against the module that allocates the cache (archprobe.nn.cache / nn.kda).

T is the number of tokens the cache holds (already bounded by a window where one applies).
"""

from __future__ import annotations

DTYPE_BYTES = {"float32": 4, "fp32": 4, "f32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "f16": 2,
               "fp8": 1, "float8": 1, "f8": 1, "int8": 1, "int4": 0.5, "fp4": 0.5, "mxfp4": 0.5, "nvfp4": 0.5}


def dtype_bytes(name: str) -> float:
    key = name.lower().replace("torch.", "")
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[key]


def kv_cache(T: int, kv_heads: int, head_dim: int, kv_bytes: float) -> float:
    """Softmax attention (MHA/GQA/MQA, sliding window with T <= window): keys + values."""
    return 2 * kv_heads * head_dim * kv_bytes * T


def mla_cache(T: int, latent_width: int, kv_bytes: float, index_dim: int = 0) -> float:
    """MLA: the normalised latent c_kv plus the shared rope key (kv_lora_rank + rope_dim) per token;
    a DSA-style indexer adds its own `index_dim`-wide key per token."""
    return (latent_width + index_dim) * kv_bytes * T


def linear_state(heads: int, key_dim: int, value_dim: int, conv_dim: int, conv_kernel: int, state_bytes: float,
                 conv_bytes: float) -> float:
    """KDA / Gated DeltaNet: a [heads, K, V] state (constant in T) + (kernel - 1) pre-conv inputs."""
    return heads * key_dim * value_dim * state_bytes + (conv_kernel - 1) * conv_dim * conv_bytes


def mamba2_state(heads: int, head_dim: int, state_size: int, conv_dim: int, conv_kernel: int, state_bytes: float,
                 conv_bytes: float) -> float:
    """Mamba-2: an SSM state [heads, head_dim, state_size] + (kernel - 1) conv inputs."""
    return heads * head_dim * state_size * state_bytes + (conv_kernel - 1) * conv_dim * conv_bytes
