"""The FFN kinds: a dense MLP (the default, no feature row), routed experts, and latent-space routed experts."""

from __future__ import annotations

from archprobe.kinds.spec import Kind

KINDS = [
    Kind("dense", "ffn", "dense", "#5aa469"),
    Kind("moe", "ffn", "MoE", "#9b59b6", "moe.routed"),
    Kind("latent_moe", "ffn", "LatentMoE", "#6c3483", "moe.routed"),   # plus moe.latent (features.py)
]
