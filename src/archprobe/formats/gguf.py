"""GGUF headers through the `gguf` package: metadata key/values and tensor infos, never tensor data.

`GGUFReader` memory-maps the file and reads only the header pages; tensor data pages are never
touched. Shapes are converted from GGML order (innermost first) to PyTorch order (outermost first).
"""

from __future__ import annotations

import os

from archprobe.errors import CheckpointError
from archprobe.formats.safetensors import Header, TensorInfo

# GGUF metadata -> the config.json keys that structure/config.py understands
_ARCH_KEYS = {
    "block_count": "num_hidden_layers", "embedding_length": "hidden_size",
    "feed_forward_length": "intermediate_size", "context_length": "max_position_embeddings",
    "attention.head_count": "num_attention_heads", "attention.head_count_kv": "num_key_value_heads",
    "expert_count": "num_experts", "expert_used_count": "num_experts_per_tok",
    "expert_shared_count": "n_shared_experts", "expert_feed_forward_length": "moe_intermediate_size",
    "attention.kv_lora_rank": "kv_lora_rank", "attention.q_lora_rank": "q_lora_rank",
    "attention.key_length": "head_dim", "attention.sliding_window": "sliding_window",
    "vocab_size": "vocab_size", "leading_dense_block_count": "first_k_dense_replace",
    "rope.dimension_count": "qk_rope_head_dim", "ssm.state_size": "ssm_state_size",
}


def _value(field):
    """A metadata field's Python value (str, number, or list of them)."""
    import gguf

    types = field.types
    if not types:
        return None
    if types[0] == gguf.GGUFValueType.ARRAY:
        if len(types) > 1 and types[1] == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if types[0] == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
    return field.parts[field.data[0]].tolist()[0]


def read_gguf(path: str | os.PathLike) -> tuple[Header, dict, dict]:
    """(header with tensors, raw metadata, config-like dict) of a GGUF file."""
    import gguf

    path = os.fspath(path)
    try:
        reader = gguf.GGUFReader(path, "r")
    except Exception as exc:  # the gguf package raises anything on malformed input
        raise CheckpointError(path, f"not a readable GGUF file ({type(exc).__name__}: {str(exc)[:160]})") from None
    meta: dict = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.ggml.") and key not in ("tokenizer.ggml.model",):
            if key == "tokenizer.ggml.tokens":
                meta["tokenizer.ggml.tokens.count"] = len(field.data)
            continue
        try:
            meta[key] = _value(field)
        except Exception:  # an odd field must not stop the inspection
            meta[key] = None
    name = os.path.basename(path)
    tensors = []
    for t in reader.tensors:
        qtype = gguf.GGMLQuantizationType(t.tensor_type).name
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        tensors.append(TensorInfo(t.name, f"GGUF_{qtype}", shape, int(t.n_bytes), name))
    size = os.path.getsize(path)
    header_bytes = int(min(reader.tensors[0].data_offset, size)) if reader.tensors else size
    header = Header(name, tensors, {}, header_bytes, size, len(tensors))
    return header, meta, gguf_config(meta)


def gguf_config(meta: dict) -> dict:
    """A config.json-like dict from GGUF metadata (per-layer arrays kept as lists)."""
    arch = meta.get("general.architecture") or "unknown"
    cfg: dict = {"model_type": arch, "architectures": [f"gguf:{arch}"], "gguf_architecture": arch}
    prefix = arch + "."
    for key, value in meta.items():
        if key.startswith(prefix):
            sub = key[len(prefix):]
            if sub in _ARCH_KEYS:
                cfg[_ARCH_KEYS[sub]] = value
    if "vocab_size" not in cfg and "tokenizer.ggml.tokens.count" in meta:
        cfg["vocab_size"] = meta["tokenizer.ggml.tokens.count"]
    return cfg
