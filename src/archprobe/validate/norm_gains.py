"""Refuse a norm whose stored gains say "(1 + w)" when nothing else on the card does.

Gemma, Qwen3-Next, MiniMax-M3 and Nemotron (LayerNorm1P) store a norm's gain as w = gain - 1 and apply
(1 + w); the headers cannot show it and the config has no key for it, so the card knows it only from the
family table, by `model_type`. A renamed or new family with such norms would otherwise run with gains of
about 0 and `pass` (nothing checks logits without a reference). The stored values tell: a plain gain
centred on 0 would all but erase the normalised signal, which no trained or freshly initialised model
does. So when the card applies a norm as w x (offset unset by config, family table or user) and the mean
of its stored gains lies within `CENTRED` of 0, validate stops with NeedsField naming `norm.offset`.
"""

from __future__ import annotations

from archprobe.errors import CheckpointError
from archprobe.validate.build import NeedsField

CENTRED = 0.25     # |mean gain| below this: a zero-centred (1 + w) gain; plain gains sit near 1
# model_types whose RMSNorm transformers applies as plain `weight * x` (LlamaRMSNorm.forward in
# transformers/models/llama/modeling_llama.py: `return self.weight * hidden_states.to(input_dtype)`; the
# others copy it, "# Copied from ...LlamaRMSNorm"). Trained gains there may average ~0 (SmolLM2-135M's
# layer-0 input norm averages +0.001): the convention, not the values, decides.
PLAIN_GAIN_TYPES = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3",
                              "olmo2", "granite", "deepseek_v3", "smollm3", "ministral", "starcoder2"})


def _norm_roles(card) -> list[tuple[str, str]]:
    """(tensor role, card field of its offset) for the final norm and the first layer's norms."""
    roles = [("final_norm", "final_norm")]
    if card.layers:
        roles += [(f"layers.0.norm.{place}", f"layers.0.norm.{place}") for place in card.layers[0].norm]
    return [(role, field) for role, field in roles if role in card.tensors]


def check_norm_gains(card, get) -> None:
    """Raise NeedsField for the first norm applied as w x whose stored gains centre on 0 (`get`: name ->
    tensor, the reader's session)."""
    if (getattr(card, "model_type", None) or "") in PLAIN_GAIN_TYPES:
        return
    for role, field in _norm_roles(card):
        norm = card.get(field)
        if norm is None or norm.offset or card.origin(f"{field}.offset") != "unknown":
            continue
        try:
            w = get(card.tensors[role]).float()
        except CheckpointError:    # a shard not fetched (hub --layers): the streaming step reports it
            continue
        mean = float(w.mean()) if w.numel() else 1.0
        if abs(mean) < CENTRED:
            raise NeedsField(f"{field}.offset", f"its stored gains average {mean:+.3f}: true if the norm is applied "
                                                "as (1 + w), as Gemma and Qwen3-Next do; false if as w")
