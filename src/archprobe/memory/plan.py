"""`plan_memory`: weights + per-sequence caches + activation workspace = peak, from inspect's structure.

Every assumption the figure depends on is listed in the output. Layer types without a formula are
an error that names the layers, never a silent zero. Engine rules are named options:
  * `engine="vllm"`: KV/latent caches are allocated in blocks of 16 tokens (paged attention).
  * `engine="llamacpp"`: the context is padded to a multiple of 256 cells.
  * `engine="reference"`: archprobe's own reference modules (eager attention materialises the
    [heads, chunk, context] float32 score matrix; prefill in one chunk).
  * `engine=None` (default): a fused attention kernel (no score matrix), prefill in `chunk` tokens.
"""

from __future__ import annotations

import math

from archprobe import kinds as registry
from archprobe.errors import ArchprobeError
from archprobe.formats.dtypes import TORCH_NAMES
from archprobe.kinds.formulas import dtype_bytes
from archprobe.kinds.spec import CacheContext

SCHEMA = "archprobe.memory/1"
ENGINES = (None, "vllm", "llamacpp", "reference")
FLOAT_DTYPES = {d: TORCH_NAMES[d] for d in ("F32", "BF16", "F16")}   # the float a model computes in


class MemoryPlanError(ArchprobeError):
    pass


def parse_tokens(text: str | int) -> int:
    """'128k' -> 131072, '1M' -> 1048576, '4096' -> 4096."""
    if isinstance(text, int):
        return text
    t = str(text).strip().lower()
    mult = {"k": 1024, "m": 1024 ** 2}.get(t[-1:], 1)
    try:
        value = float(t[:-1] if mult > 1 else t)
    except ValueError:
        raise MemoryPlanError(f"not a token count: {text!r}", hint="use e.g. 4096, 32k or 1M") from None
    if value <= 0:
        raise MemoryPlanError(f"token count must be positive, got {text!r}")
    return int(value * mult)


def parse_bytes(text: str) -> int:
    """'80GB' -> 80e9 bytes, '80GiB' -> 80 * 2^30."""
    t = str(text).strip()
    units = {"tib": 2**40, "gib": 2**30, "mib": 2**20, "kib": 2**10, "tb": 10**12, "gb": 10**9, "mb": 10**6,
             "kb": 10**3, "b": 1}
    for u, m in units.items():
        if t.lower().endswith(u):
            try:
                return int(float(t[: -len(u)]) * m)
            except ValueError:
                break
    raise MemoryPlanError(f"not a size: {text!r}", hint="use e.g. 80GB or 141GiB")


def card_of(doc: dict, card=None):
    """The architecture card the plan reads: the one given (`--card`), else the one inspect built."""
    from archprobe.structure.card import Card

    if card is not None:
        return card
    cached = _CARDS.get(id(doc))
    if cached is not None and cached[0] is doc["card"]:
        return cached[1]
    if "card" not in doc:
        raise MemoryPlanError("this inspect document carries no architecture card",
                              hint="re-run archprobe inspect with this version")
    parsed = Card.from_dict(doc["card"])
    _CARDS.clear()                       # one document at a time: sweeps and searches re-plan the same one
    _CARDS[id(doc)] = (doc["card"], parsed)
    return parsed


_CARDS: dict[int, tuple] = {}


def _model_dtype(doc: dict) -> str:
    floats = {k: v for k, v in doc["storage"]["dtypes"].items() if k in FLOAT_DTYPES}
    return FLOAT_DTYPES[max(floats, key=floats.get)] if floats else "bfloat16"


def _weights(doc: dict, weight_dtype: str | None) -> tuple[int, str]:
    if weight_dtype is None:
        stored = sum(doc["storage"]["dtypes"].values())
        return stored, "weights: the stored tensors at their stored size (packed formats packed)"
    b = dtype_bytes(weight_dtype)
    n = doc["params"]["total"]
    scale = {"mxfp4": 1 / 32, "nvfp4": 1 / 16}.get(weight_dtype.lower(), 0)   # one 8-bit scale per group
    note = f"weights: {n:,} logical parameters re-planned at {weight_dtype} ({b} B/param"
    note += (f" + {scale:.4f} B/param scales)" if scale else ")")
    return int(math.ceil(n * (b + scale))), note


def _per_layer(card, T: int, kv_b: float, act_b: float, state_b: float, engine: str | None, pad: int | None = None,
               swa_extra_block: bool = False):
    """(layer index, kind, bytes for one sequence) for every decoder layer, from the card's mixers.

    `pad`: tokens per cache page (default: the engine's); `swa_extra_block`: a sliding-window layer holds one
    page beyond its window (vLLM's hybrid manager)."""
    pad = pad or {"vllm": 16, "llamacpp": 256}.get(engine or "", 1)
    known = {name for name, k in registry.ALL.items() if k.cache is not None}   # each kind's own formula
    odd = [f"{i} ({layer.mixer.kind})" for i, layer in enumerate(card.layers) if layer.mixer.kind not in known]
    if odd:
        raise MemoryPlanError(f"unknown layer type at layer(s) {', '.join(odd[:12])}"
                              + (" ..." if len(odd) > 12 else "") + ": no cache formula",
                              hint="archprobe card SOURCE shows what the shapes said for these layers")
    needed = [f for f in card.unknown_fields() if ".mixer." in f or ".parallel_mixer." in f or f == "hidden_size"]
    if needed:
        raise MemoryPlanError(f"the card leaves {len(needed)} field(s) unknown that the cache size needs: "
                              + ", ".join(needed[:8]) + (" ..." if len(needed) > 8 else ""),
                              hint="archprobe card SOURCE -o card.yaml, fill them in, then --card card.yaml")
    rows = []
    for i, layer in enumerate(card.layers):
        rows.append(_mixer_row(i, layer.mixer, T, pad, kv_b, act_b, state_b, swa_extra_block))
    for i, layer in enumerate(card.layers):       # an FFN with a state of its own (RWKV channel mixing)
        k = registry.ALL.get(layer.ffn.kind)
        if k is not None and k.role == "ffn" and k.cache is not None:
            label, size = k.cache(layer.ffn, CacheContext(T, pad, kv_b, act_b, state_b, swa_extra_block,
                                                          card.hidden_size))
            rows.append((i, label, size))
    for i, layer in enumerate(card.layers):       # a second mixer beside the first keeps its own state
        if layer.parallel_mixer is not None:
            rows.append(_mixer_row(i, layer.parallel_mixer, T, pad, kv_b, act_b, state_b, swa_extra_block))
    return rows


def _mixer_row(i: int, m, T: int, pad: int, kv_b: float, act_b: float, state_b: float, swa_extra_block=False):
    """(layer index, kind, bytes for one sequence) of one mixer: its kind's cache formula (kinds/)."""
    k = registry.ALL.get(m.kind)
    if k is None or k.cache is None:
        raise MemoryPlanError(f"unknown layer type at layer {i} ({m.kind}): no cache formula",
                              hint="archprobe card SOURCE shows what the shapes said for this layer")
    label, size = k.cache(m, CacheContext(T, pad, kv_b, act_b, state_b, swa_extra_block))
    return (i, label, size)


def _activations(doc: dict, card, chunk: int, T: int, batch: int, act_b: float,
                 engine: str | None) -> tuple[int, str]:
    """Prefill workspace of one chunk: the largest single layer's transient tensors, the AttnRes bank,
    and the last token's logits."""
    H = card.hidden_size or 0
    widths = [4 * H]
    kinds = {layer.mixer.kind for layer in card.layers}
    heads = max([layer.mixer.num_heads or 0 for layer in card.layers] or [0])
    for layer in card.layers:
        m, f = layer.mixer, layer.ffn
        spec = registry.MIXERS.get(m.kind)
        if spec is not None and spec.act_width is not None:
            widths.append(spec.act_width(m))
        if f.kind == "dense" and f.width:
            widths.append(3 * f.width)
        elif f.kind in ("moe", "latent_moe"):
            widths.append(3 * (f.expert_width or 0) * (f.top_k or 1))
    per_token = 6 * H + max(widths)
    sources = 0
    ar = [layer.residual for layer in card.layers if layer.residual.kind == "attnres"]
    if ar:
        block = ar[0].block_size or 1
        sources = math.ceil(len(card.layers) / block) + 1
    scores = 0
    if engine == "reference":
        # live copies of the [heads, chunk, context] fp32 scores: GQA has scores and their softmax; naive MLA
        # also holds its nope and rope score terms while summing them
        copies = max([registry.MIXERS[k].eager_score_copies for k in kinds if k in registry.MIXERS] or [0])
        scores = copies * heads * chunk * T * 4
    vocab = card.vocab_size or 0
    stream = chunk * (2 + sources) * H * act_b                      # residual stream (+ AttnRes bank), persistent
    layer_peak = chunk * per_token * act_b + scores                   # one layer's transients at a time
    logits = vocab * 4                                                # the last token's logits, fp32
    total = batch * (stream + max(layer_peak, logits))
    note = (f"activations: prefill in chunks of {chunk:,} tokens; the residual stream"
            + (f" and an AttnRes bank of {sources} [chunk, H] sources" if sources else "")
            + f" persist; one layer's transients at a time (~{per_token:,} values/token"
            + (" + eager attention scores and softmax [heads, chunk, context] fp32)" if scores else
               ", fused attention: no score matrix)") + "; last-token logits in fp32")
    return int(total), note


def plan_memory(doc: dict, context: int | str, batch: int = 1, *, weight_dtype: str | None = None,
                kv_dtype: str | None = None, act_dtype: str | None = None, state_dtype: str = "float32",
                devices: int = 1, engine: str | None = None, chunk: int | None = None,
                mla_replicated: bool = True, card=None) -> dict:
    """The `archprobe.memory/1` document for the inspect document `doc` (sizes) and its card (layers).

    `card`: a user's card (`--card`) to plan from instead of the one inspect derived.
    """
    T = parse_tokens(context)
    card = card_of(doc, card)
    if batch < 1 or devices < 1:
        raise MemoryPlanError(f"batch ({batch}) and devices ({devices}) must be >= 1")
    if engine not in ENGINES:
        raise MemoryPlanError(f"unknown engine {engine!r}; known: vllm, llamacpp, reference")
    model_dtype = _model_dtype(doc)
    try:
        kv_b = dtype_bytes(kv_dtype or model_dtype)
        act_b = dtype_bytes(act_dtype or model_dtype)
        state_b = dtype_bytes(state_dtype)
    except ValueError as exc:
        raise MemoryPlanError(str(exc)) from None
    chunk = min(T, chunk or (T if engine == "reference" else 2048))
    weights, w_note = _weights(doc, weight_dtype)
    rows = _per_layer(card, T, kv_b, act_b, state_b, engine)
    by_type: dict[str, int] = {}
    for _, kind, b in rows:
        if kind != "none":
            by_type[kind] = by_type.get(kind, 0) + int(b * batch)
    cache = sum(by_type.values())
    acts, a_note = _activations(doc, card, chunk, T, batch, act_b, engine)
    assumptions = [w_note,
                   f"KV/latent caches in {kv_dtype or model_dtype}; recurrent states in {state_dtype}; conv caches and "
                   f"activations in {act_dtype or model_dtype}",
                   f"context {T:,} tokens x batch {batch}", a_note,
                   "no framework overhead (CUDA context, allocator fragmentation, graph buffers) included"]
    if engine == "vllm":
        assumptions.append("vLLM: KV/latent caches rounded up to blocks of 16 tokens")
    if engine == "llamacpp":
        assumptions.append("llama.cpp: context padded to a multiple of 256 cells")
    doc_out = {
        "schema": SCHEMA, "context": T, "batch": batch,
        "weight_dtype": weight_dtype or "stored", "kv_dtype": kv_dtype or model_dtype,
        "weights_bytes": weights, "cache_bytes": cache, "cache_by_layer_type": by_type,
        "activation_bytes": acts, "peak_bytes": weights + cache + acts,
        "per_layer": [{"index": i, "kind": k, "bytes_per_sequence": int(b)} for i, k, b in rows],
        "assumptions": assumptions,
    }
    if devices > 1:
        # caches every device keeps whole (MLA's latent); the rest split with the heads
        mla = sum(by_type.get(name, 0) for name, k in registry.MIXERS.items() if k.tp_replicated)
        per_cache = (cache - mla) / devices + (mla if mla_replicated else mla / devices)
        doc_out["devices"] = devices
        doc_out["per_device_peak_bytes"] = int(weights / devices + per_cache + acts)
        assumptions.append(f"{devices} devices: weights and attention heads split evenly (tensor/expert parallel)"
                           + ("; the MLA latent cache is replicated on every device (one latent per token shared by "
                              "all heads)" if mla and mla_replicated else ""))
    return doc_out


def sweep(doc: dict, contexts: list[int | str], **kwargs) -> list[dict]:
    return [plan_memory(doc, c, **kwargs) for c in contexts]


def largest_fitting_context(doc: dict, budget: int, low: int = 1, high: int = 1 << 24, **kwargs) -> int | None:
    """The largest context whose peak fits `budget` (binary search; peak grows with context), never above the
    model's own maximum (max_position_embeddings)."""
    cap = card_of(doc, kwargs.get("card")).max_position_embeddings
    high = min(high, cap) if cap else high
    key = "per_device_peak_bytes" if kwargs.get("devices", 1) > 1 else "peak_bytes"
    if plan_memory(doc, low, **kwargs)[key] > budget:
        return None
    if plan_memory(doc, high, **kwargs)[key] <= budget:
        return high
    while high - low > 1:
        mid = (low + high) // 2
        if plan_memory(doc, mid, **kwargs)[key] <= budget:
            low = mid
        else:
            high = mid
    return low
