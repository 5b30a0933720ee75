"""The independent implementation: the same checkpoint through transformers (shipped model types
only, never trust_remote_code), its per-layer hidden states, logits and, for pinned routing, the
input each MoE block saw."""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

MOE_BLOCK = re.compile(r"(?:^|\.)layers\.(\d+)\.(mlp|block_sparse_moe|mixer|feed_forward)$")


@dataclass
class Reference:
    name: str
    logits: torch.Tensor
    hidden: list[torch.Tensor]
    moe_inputs: dict[int, torch.Tensor]
    generated: list[int] | None = None    # greedy continuation (generate > 0)


def run_transformers(folder: str, config: dict, ids: torch.Tensor, capture_moe: bool = False,
                     gguf_file: str | None = None, generate: int = 0) -> Reference | dict:
    """A Reference, or {"name", "error"} when transformers cannot be the reference here. `gguf_file`:
    a GGUF file in `folder`, loaded (dequantized) by transformers' own GGUF loader. `generate`: also
    decode that many tokens greedily after `ids` (transformers' own generate, with its caches)."""
    try:
        from transformers import AutoModelForCausalLM
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except ImportError:
        return {"name": "transformers", "error": "transformers is not installed (pip install 'archprobe[hf]')"}
    mt = config.get("model_type")
    if mt not in CONFIG_MAPPING:
        return {"name": "transformers", "error": f"transformers ships no {mt!r} model (remote code is never run)"}
    extra = {"gguf_file": gguf_file} if gguf_file else {}
    try:
        ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, trust_remote_code=False,
                                                   **extra).eval()
    except (ValueError, NotImplementedError, ImportError) as exc:
        if not gguf_file:
            raise
        return {"name": "transformers", "error": f"transformers cannot load {gguf_file}: {str(exc)[:200]}"}
    moe_inputs: dict[int, torch.Tensor] = {}
    handles = []
    if capture_moe:
        for name, module in ref.named_modules():
            m = MOE_BLOCK.search(name)
            if m and hasattr(module, "experts"):
                i = int(m.group(1))
                handles.append(module.register_forward_pre_hook(
                    lambda _mod, args, i=i: moe_inputs.__setitem__(i, args[0].detach().float().clone())))
    try:
        with torch.no_grad():
            out = ref(ids, output_hidden_states=True, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    generated = None
    if generate > 0:
        with torch.no_grad():
            seq = ref.generate(ids, max_new_tokens=generate, min_new_tokens=generate, do_sample=False,
                               attention_mask=torch.ones_like(ids), pad_token_id=0)
        generated = seq[0, ids.shape[1]:].tolist()
    return Reference(f"transformers {ref.__class__.__name__}", out.logits.float(),
                     [h.float() for h in out.hidden_states], moe_inputs, generated)


def compare(ref: Reference, logits: torch.Tensor, hidden_at) -> dict:
    """Logit agreement and per-layer max |diff|; `hidden_at(i)` gives our layer i output."""
    logp_ref = torch.log_softmax(ref.logits.double(), -1)   # float64: float32 rounding gives KL < 0
    logp = torch.log_softmax(logits.double(), -1)
    kl = (logp_ref.exp() * (logp_ref - logp)).sum(-1).mean().item()
    per_layer = []
    for i in range(len(ref.hidden) - 2):  # transformers' last hidden state is after the final norm
        per_layer.append((hidden_at(i).float() - ref.hidden[i + 1]).abs().max().item())
    return {"name": ref.name, "max_abs_diff": (ref.logits - logits).abs().max().item(),
            "logit_scale": ref.logits.abs().max().item(), "kl": kl,
            "top1_agreement": (ref.logits.argmax(-1) == logits.argmax(-1)).float().mean().item(),
            "per_layer_max_abs_diff": per_layer}
