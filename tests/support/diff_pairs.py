"""Checkpoint pairs for the diff tests: a tiny llama saved by transformers, a copy whose tensors went through a
change, and a tensor rounded through a GGUF type by the gguf package (its own quantize and dequantize)."""

from __future__ import annotations

import shutil

import numpy as np
import torch
from safetensors.torch import load_file, save_file


def tiny_llama(folder, layers=4, hidden=64, inter=128, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=256, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():   # norms away from exactly 1 so they carry data too
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(str(folder))
    return str(folder)


def rewrite(src, dst, change):
    """A copy of folder `src` at `dst` whose tensors went through `change(name, tensor) -> tensor`."""
    shutil.copytree(src, dst)
    path = f"{dst}/model.safetensors"
    tensors = load_file(path)
    save_file({n: change(n, t).contiguous() for n, t in tensors.items()}, path, metadata={"format": "pt"})
    return str(dst)


def quantized(t: torch.Tensor, qtype) -> torch.Tensor:
    """t rounded through a GGUF type by the gguf package (its own quantize and dequantize)."""
    from gguf.quants import dequantize, quantize

    q = quantize(t.numpy().astype(np.float32), qtype)
    return torch.from_numpy(dequantize(q, qtype).reshape(t.shape).astype(np.float32))
