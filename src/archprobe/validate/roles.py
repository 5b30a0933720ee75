"""Card roles -> archprobe.nn parameter names: where each bound tensor goes in the module tree.

A role (`layers.3.mixer.q`, whatever the checkpoint calls it) names a parameter of DecoderLayer 3 through
its kind's table (archprobe.kinds: role leaf -> parameter path) or the tables below (FFN, norms, residual,
model level). A role stored in a layout the module does not hold as is (fused, stacked, per piece) names a
source that validate/layouts.py turns into module tensors.
"""

from __future__ import annotations

import re

from archprobe import kinds
from archprobe.validate.layouts import GDN_SOURCES, KDA_FUSED_CONV, Layout, Source
from archprobe.validate.plan import LATENT_NAMES, NORM_MODULES, Unsupported

FFN_PARAMS = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
MODEL_PARAMS = {"embed": "embed_tokens", "pos_embed": "embed_positions", "embed_norm": "embed_layernorm",
                "embed_proj": "embed_proj", "head_proj": "head_proj",
                "final_norm": "norm", "head": "lm_head"}
RESIDUAL_PARAMS = {"pre_mixer.query": "self_attention_res.proj.weight",
                   "pre_mixer.norm": "self_attention_res.norm.weight",
                   "pre_ffn.query": "mlp_res.proj.weight", "pre_ffn.norm": "mlp_res.norm.weight",
                   "depth_weights": "dwa_weights"}
OUTPUT_RESIDUAL = {"output_residual.query": "output_attn_res.proj.weight",
                   "output_residual.norm": "output_attn_res.norm.weight"}


def _mixer_roles(kind: str) -> dict:
    """Role leaf -> parameter path for a HybridConfig mixer type, from its kind's spec."""
    spec = kinds.BY_NN_KIND.get(kind)
    return (spec.roles or {}) if spec is not None else {}


def _bare(kind, stem: str) -> bool:
    """A role stored as a bare Parameter (no `.weight` leaf): its kind's `bare_roles` (kinds/<kind>.py)."""
    return kind is not None and stem in kind.bare_roles


def _ffn_module(cfg, i: int) -> str:
    return "mlp" if cfg.ffn_types[i] == "dense" else "block_sparse_moe"


def layer_target(cfg, i: int, part: str, leaf: str, card) -> str | Source | None:
    """archprobe.nn parameter name (inside DecoderLayer i) for a role's leaf; a `Source` for a tensor stored
    in a layout (fused, stacked, apart) that validate/layouts.py turns into parameters; None: no place."""
    bias = leaf.endswith(".bias")
    stem = leaf[: -len(".bias")] if bias else leaf
    suffix = ".bias" if bias else ".weight"
    if part == "norm":
        if stem == "latent":
            return f"block_sparse_moe.{LATENT_NAMES[2]}{suffix}"
        return NORM_MODULES[stem] + suffix if stem in NORM_MODULES else None
    if part == "residual":
        return None if bias else RESIDUAL_PARAMS.get(stem)
    if part == "parallel_mixer":
        kind = cfg.parallel_mixer_types[i]
        table = _mixer_roles(kind)
        if stem not in table or (card.layers[i].parallel_mixer.layout or {}).get("transposed"):
            return None
        name = "parallel_mixer." + table[stem]
        return name if _bare(kinds.BY_NN_KIND.get(kind), stem) and not bias else name + suffix
    if part == "mixer":
        kind = cfg.mixer_types[i]
        table = _mixer_roles(kind)
        if kind == "lightning" and stem == "qkv":
            stem = "lightning_qkv"          # per head [q | k | v]: the module reads it as stored
        if kind == "lightning" and stem.startswith("decay."):
            return Source(Layout.UNUSED, f"self_attn.{stem}")   # block-decay tables precomputed from slope_rate
        if stem in ("qkv",):
            return Source(Layout.FUSED_QKV, f"self_attn.qkv{suffix}")
        if kind == "gated_deltanet" and stem in GDN_SOURCES and not bias:
            return Source(Layout.GDN_PIECE, f"self_attn.{stem}.weight", stem)
        if kind == "kda" and stem == "conv1d" and not bias:
            return KDA_FUSED_CONV
        if stem not in table:
            return None
        name = "self_attn." + table[stem]
        return name if _bare(kinds.BY_NN_KIND.get(kind), stem) and not bias else name + suffix
    # ffn
    ffn = _ffn_module(cfg, i)
    own = (kinds.FFNS[cfg.ffn_types[i]].roles or {}) if cfg.ffn_types[i] in kinds.FFNS else {}
    if own:                      # an FFN mechanism's roles (kinds/<kind>.py), vectors stored bare
        if stem not in own:
            return None
        return f"{ffn}.{own[stem]}" + ("" if _bare(kinds.FFNS[cfg.ffn_types[i]], stem) and not bias else suffix)
    if ffn == "mlp":
        if stem.startswith("act.") and not bias:    # a learned activation's own tensors (xIELU alpha_p, ...)
            return f"mlp.act_fn.{stem[4:]}"
        if stem == "sub_norm":
            return f"mlp.sub_norm{suffix}"
        if stem == "gate_up":
            return Source(Layout.GATE_UP, f"mlp.gate_up{suffix}")
        return f"mlp.{FFN_PARAMS[stem]}{suffix}" if stem in FFN_PARAMS else None
    if stem == "out":      # an output bias stored bare (JetMoE's mlp.bias): the `#bias` companion of `out`
        return f"{ffn}.out.weight"
    if stem == "router":
        if bias:
            return f"{ffn}.gate." + ("e_score_correction_bias" if cfg.moe_router_bias else "bias")
        return f"{ffn}.gate.weight"
    if stem in LATENT_NAMES:
        return f"{ffn}.{stem}{suffix}"
    if stem == "shared_gate":
        return f"{ffn}.shared_expert_gate{suffix}"
    if stem.startswith("shared."):
        sub = stem.split(".", 1)[1]
        owner = "shared_expert" if cfg.shared_expert_gate else "shared_experts"
        if sub == "gate_up":
            return Source(Layout.GATE_UP, f"{ffn}.{owner}.gate_up{suffix}")
        return f"{ffn}.{owner}.{FFN_PARAMS[sub]}{suffix}" if sub in FFN_PARAMS else None
    m = re.match(r"^experts\.(\d+)\.(\w+)$", stem)
    if m:
        e, sub = m.groups()
        if bias:
            raise Unsupported(f"layers.{i}.ffn.experts.{e}.{sub}.bias: per-expert biases stored one by one")
        if sub == "gate_up":
            return Source(Layout.GATE_UP, f"{ffn}.experts.{e}.gate_up.weight")
        return f"{ffn}.experts.{e}.{FFN_PARAMS[sub]}.weight" if sub in FFN_PARAMS else None
    m = re.match(r"^experts\.(gate_up|gate|up|down)$", stem)
    if m:
        return Source(Layout.STACKED, f"{ffn}.experts.{m.group(1)}{suffix}")
    return None

