"""One registry of the mixer and FFN kinds a card can hold: per kind its label (terminal, report), its colour
(report), its inspect feature id and the attrs that feature carries. The terminal renderer, the report and
structure/features.py read it instead of lists of their own, so a kind is labelled everywhere or nowhere
(tests/structure/test_kinds_registry.py walks it). Detection, memory and nn hooks are not here yet."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    name: str                                   # the card's `kind` value
    role: str                                   # mixer | ffn
    label: str                                  # short label: the terminal's layer plan, the report
    colour: str                                 # the report's layer strip and legend
    feature: str | None = None                  # inspect feature id (spec/contracts.md); None: no row of its own
    attrs: Callable[[object, int | None], dict] | None = None   # (the card's Mixer/Ffn, hidden size) -> attrs


def _attention(m, H):
    return {"num_heads": m.num_heads, "num_kv_heads": m.num_kv_heads, "head_dim": m.head_dim}


def _mla(m, H):
    return {"kv_lora_rank": m.kv_lora_rank, "q_lora_rank": m.q_lora_rank, "rope_dim": m.rope_dim,
            "cache_width_per_token": m.cache_width_per_token, "num_heads": m.num_heads}


def _lowrank_kv(m, H):
    return {"ratio": round(m.kv_lora_rank / H, 4) if H and m.kv_lora_rank else None, "rank": m.kv_lora_rank,
            "cache_width_per_token": m.cache_width_per_token, "num_heads": m.num_heads}


def _kda(m, H):
    a = {"num_heads": m.num_heads, "head_dim": m.head_dim, "conv_kernel": m.conv_kernel,
         "gate_lower_bound": m.gate_lower_bound, "output_gate": m.output_gate}
    if m.a_log_stored is not None:
        a["a_log_stored"] = m.a_log_stored
    return a


def _gdn(m, H):
    return {"num_heads": m.num_heads, "head_dim": m.head_dim, "value_head_dim": m.value_head_dim,
            "conv_dim": m.conv_dim, "conv_kernel": m.conv_kernel}


def _mamba2(m, H):
    return {"num_heads": m.num_heads, "head_dim": m.head_dim, "state_size": m.state_size, "n_groups": m.n_groups,
            "conv_dim": m.conv_dim, "conv_kernel": m.conv_kernel}


def _moa(m, H):
    return {"num_experts": m.num_experts, "top_k": m.top_k, "num_heads": m.num_heads,
            "num_kv_heads": m.num_kv_heads, "head_dim": m.head_dim}


MIXERS: dict[str, Kind] = {k.name: k for k in [
    Kind("gqa", "mixer", "GQA", "#e0a35a", "attention.gqa", _attention),
    Kind("mha", "mixer", "MHA", "#c96f2d", "attention.mha", _attention),
    Kind("mqa", "mixer", "MQA", "#e8b77d", "attention.mqa", _attention),
    Kind("mla", "mixer", "MLA", "#d5793a", "attention.mla", _mla),
    Kind("lowrank_kv", "mixer", "LowRankKV", "#b5651d", "attention.kv_compression", _lowrank_kv),
    # JetMoE's mixture of attention heads; not in spec/contracts.md's vocabulary yet, so an id of its own
    Kind("moa", "mixer", "MoA", "#a0522d", "attention.moa", _moa),
    Kind("kda", "mixer", "KDA", "#3a7bd5", "linear_attention.kda", _kda),
    Kind("gated_deltanet", "mixer", "GDN", "#5aa0e8", "linear_attention.gated_deltanet", _gdn),
    Kind("lightning", "mixer", "Lightning", "#2e86c1", "linear_attention.lightning",
         lambda m, H: {"num_heads": m.num_heads, "head_dim": m.head_dim}),
    Kind("mamba2", "mixer", "Mamba2", "#7fb3d5", "ssm.mamba2", _mamba2),
    Kind("mamba", "mixer", "Mamba", "#76a5c9", "ssm.mamba",
         lambda m, H: {"state_size": m.state_size, "conv_dim": m.conv_dim, "conv_kernel": m.conv_kernel}),
    Kind("rg_lru", "mixer", "RG-LRU", "#48a9a6", "recurrent.rg_lru",
         lambda m, H: {"width": m.conv_dim, "conv_kernel": m.conv_kernel, "num_heads": m.num_heads}),
    Kind("short_conv", "mixer", "ShortConv", "#1abc9c", "conv.short",
         lambda m, H: {"conv_dim": m.conv_dim, "conv_kernel": m.conv_kernel}),
]}

FFNS: dict[str, Kind] = {k.name: k for k in [
    Kind("dense", "ffn", "dense", "#5aa469"),          # no feature row: a dense FFN is the default
    Kind("moe", "ffn", "MoE", "#9b59b6", "moe.routed"),
    Kind("latent_moe", "ffn", "LatentMoE", "#6c3483", "moe.routed"),   # plus moe.latent (features.py)
]}

# what a layer holds where the card has no kind: no mixer/FFN at all, or one the card could not explain
ABSENT: dict[str, Kind] = {k.name: k for k in [
    Kind("none", "either", "-", "#cccccc"),
    Kind("unknown", "either", "?", "#7f8c8d"),
]}

ALL: dict[str, Kind] = {**MIXERS, **FFNS, **ABSENT}


def label(kind: str) -> str:
    """The short label of `kind`; a kind the registry lacks is shown as itself."""
    k = ALL.get(kind) if isinstance(kind, str) else None
    return k.label if k else str(kind)


def colour(kind: str, default: str = "#7f8c8d") -> str:
    k = ALL.get(kind) if isinstance(kind, str) else None
    return k.colour if k else default
