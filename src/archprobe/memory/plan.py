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

from archprobe.errors import ArchprobeError
from archprobe.memory.formulas import dtype_bytes, kv_cache, linear_state, mamba2_state, mla_cache

SCHEMA = "archprobe.memory/1"
KV_KINDS = ("gqa", "mha", "mqa")
ENGINES = (None, "vllm", "llamacpp", "reference")
FLOAT_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


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
    units = {"tib": 2**40, "gib": 2**30, "mib": 2**20, "tb": 10**12, "gb": 10**9, "mb": 10**6, "b": 1}
    for u, m in units.items():
        if t.lower().endswith(u):
            try:
                return int(float(t[: -len(u)]) * m)
            except ValueError:
                break
    raise MemoryPlanError(f"not a size: {text!r}", hint="use e.g. 80GB or 141GiB")


def _feature(doc: dict, fid: str) -> dict | None:
    return next((f for f in doc["features"] if f["id"] == fid), None)


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


def _per_layer(doc: dict, T: int, kv_b: float, act_b: float, state_b: float, engine: str | None):
    """(layer index, kind, bytes for one sequence) for every decoder layer."""
    feats = {f["id"]: f for f in doc["features"]}
    swa = feats.get("attention.sliding_window")
    swa_layers = set(swa["attrs"].get("layers") or swa["layers"]) if swa else set()
    idx = feats.get("attention.sparse_indexer")
    idx_layers = set(idx["layers"]) if idx else set()
    pad = {"vllm": 16, "llamacpp": 256}.get(engine or "", 1)
    rows, unknown = [], []
    for layer in doc["layers"]:
        i, kind = layer["index"], layer["mixer"]
        if kind in KV_KINDS:
            a = feats[f"attention.{kind}"]["attrs"]
            if not a.get("num_kv_heads") or not a.get("head_dim"):
                unknown.append(f"{i} ({kind}: KV heads or head_dim unknown)")
                continue
            window = swa["attrs"]["window"] if i in swa_layers else None
            t = min(T, window) if window else T
            label = "sliding_window" if window else kind
            rows.append((i, label, kv_cache(math.ceil(t / pad) * pad, a["num_kv_heads"], a["head_dim"], kv_b)))
        elif kind == "mla":
            a = feats["attention.mla"]["attrs"]
            index_dim = (idx["attrs"].get("index_dim") or 0) if i in idx_layers else 0
            rows.append((i, "mla", mla_cache(math.ceil(T / pad) * pad, a["cache_width_per_token"], kv_b, index_dim)))
        elif kind == "lowrank_kv":
            a = feats["attention.kv_compression"]["attrs"]
            width = a.get("cache_width_per_token")
            if not width:
                unknown.append(f"{i} (lowrank_kv: latent width unknown)")
                continue
            rows.append((i, "lowrank_kv", mla_cache(math.ceil(T / pad) * pad, width, kv_b)))
        elif kind == "kda":
            a = feats["linear_attention.kda"]["attrs"]
            h, d = a["num_heads"], a["head_dim"]
            rows.append((i, "kda", linear_state(h, d, d, 3 * h * d, a.get("conv_kernel") or 4, state_b, act_b)))
        elif kind == "gated_deltanet":
            a = feats["linear_attention.gated_deltanet"]["attrs"]
            if not (a.get("num_heads") and a.get("head_dim") and a.get("conv_dim")):
                unknown.append(f"{i} (gated_deltanet: head dims unknown)")
                continue
            rows.append((i, "gated_deltanet", linear_state(a["num_heads"], a["head_dim"],
                                                           a.get("value_head_dim") or a["head_dim"], a["conv_dim"],
                                                           a.get("conv_kernel") or 4, state_b, act_b)))
        elif kind == "mamba2":
            a = feats["ssm.mamba2"]["attrs"]
            if not (a.get("head_dim") and a.get("state_size") and a.get("conv_dim")):
                unknown.append(f"{i} (mamba2: head_dim/state_size unknown)")
                continue
            rows.append((i, "mamba2", mamba2_state(a["num_heads"], a["head_dim"], a["state_size"], a["conv_dim"],
                                                   a.get("conv_kernel") or 4, state_b, act_b)))
        elif kind == "none":
            rows.append((i, "none", 0))
        else:
            unknown.append(f"{i} ({kind})")
    if unknown:
        raise MemoryPlanError(f"unknown layer type at layer(s) {', '.join(unknown[:12])}"
                              + (" ..." if len(unknown) > 12 else "") + ": no cache formula",
                              hint="archprobe inspect shows what the detectors saw for these layers")
    return rows


def _activations(doc: dict, chunk: int, T: int, batch: int, act_b: float, engine: str | None) -> tuple[int, str]:
    """Prefill workspace of one chunk: the largest single layer's transient tensors, the AttnRes bank,
    and the last token's logits."""
    a = doc["architecture"]
    H = a.get("hidden_size") or 0
    feats = {f["id"]: f for f in doc["features"]}
    widths = [4 * H]
    for fid in ("attention.gqa", "attention.mha", "attention.mqa"):
        if fid in feats:
            at = feats[fid]["attrs"]
            widths.append(2 * (at.get("num_heads") or 0) * (at.get("head_dim") or 0)
                          + 2 * (at.get("num_kv_heads") or 0) * (at.get("head_dim") or 0))
    if "attention.mla" in feats:
        heads = a.get("num_heads") or 0
        widths.append(heads * 3 * 192 if heads else 0)
    if "linear_attention.kda" in feats:
        at = feats["linear_attention.kda"]["attrs"]
        h, d = at["num_heads"], at["head_dim"]
        # chunked KDA (C = 32, the modules' chunk): projections, conv, normalised q/k, gate, their chunked and
        # decayed copies (~24 h d per token alive at once) plus the chunk's [C, C] products and inverse (~4 C h)
        widths.append(24 * h * d + 4 * 32 * h)
    if a.get("intermediate_size"):
        widths.append(3 * a["intermediate_size"])
    moe = feats.get("moe.routed")
    if moe:
        widths.append(3 * (moe["attrs"].get("expert_width") or 0) * (a.get("top_k") or 1))
    per_token = 6 * H + max(widths)
    sources = 0
    ar = feats.get("residual.attnres")
    if ar:
        n = len(doc["layers"])
        block = ar["attrs"].get("block_size") or 1
        sources = math.ceil(n / block) + 1
    scores = 0
    if engine == "reference":
        heads = a.get("num_heads") or 0
        kinds = {layer["mixer"] for layer in doc["layers"]}
        # live copies of the [heads, chunk, context] fp32 scores: GQA has scores and their softmax; naive MLA
        # also holds its nope and rope score terms while summing them
        copies = 3 if "mla" in kinds else 2 if kinds & {*KV_KINDS, "lowrank_kv"} else 0
        scores = copies * heads * chunk * T * 4
    vocab = a.get("vocab_size") or 0
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
                mla_replicated: bool = True) -> dict:
    """The `archprobe.memory/1` document for the inspect document `doc`."""
    T = parse_tokens(context)
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
    rows = _per_layer(doc, T, kv_b, act_b, state_b, engine)
    by_type: dict[str, int] = {}
    for _, kind, b in rows:
        if kind != "none":
            by_type[kind] = by_type.get(kind, 0) + int(b * batch)
    cache = sum(by_type.values())
    acts, a_note = _activations(doc, chunk, T, batch, act_b, engine)
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
        mla = by_type.get("mla", 0)
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
    """The largest context whose peak fits `budget` (binary search; peak grows with context)."""
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
