"""Checkpoint pairs for the diff tests: a tiny llama saved by transformers, a copy whose tensors went through a
change, and a tensor rounded through a GGUF type by the gguf package (its own quantize and dequantize)."""

from __future__ import annotations

import shutil

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from tests.support.tiny_models import build


def tiny_llama(folder, layers=4, hidden=64, inter=128, seed=0):
    from transformers import LlamaConfig

    def norms(model):   # norms away from exactly 1 so they carry data too
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.add_(0.1 * torch.randn_like(p))

    cfg = LlamaConfig(vocab_size=256, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    build(cfg, folder, seed=seed, adjust=norms)
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


HF_TO_GGUF = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
              "post_attention_layernorm": "ffn_norm"}


def llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """The row order llama.cpp's converter gives llama's q / k projections (ggml's rope rotates pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_twin(hf_folder, path, qtype_of) -> str:
    """A GGUF conversion of a tiny llama saved by transformers: names and q/k rows as llama.cpp writes them,
    each layer matrix quantized by the gguf package to `qtype_of(layer index, gguf name)` (None: F32)."""
    import json

    import gguf

    cfg = json.loads(open(f"{hf_folder}/config.json").read())
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_rope_freq_base(cfg["rope_theta"] if "rope_theta" in cfg else 10000.0)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    model = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}
    for hf, t in load_file(f"{hf_folder}/model.safetensors").items():
        base, data = hf.removesuffix(".weight"), t.float().numpy()
        if base in model:
            w.add_tensor(model[base] + ".weight", data)
            continue
        i, rest = base.removeprefix("model.layers.").split(".", 1)
        name = f"blk.{i}.{HF_TO_GGUF[rest]}"
        if rest == "self_attn.q_proj":
            data = llama_cpp_permute(data, cfg["num_attention_heads"])
        elif rest == "self_attn.k_proj":
            data = llama_cpp_permute(data, cfg["num_key_value_heads"])
        qtype = qtype_of(int(i), name) if data.ndim == 2 else None
        if qtype is None:
            w.add_tensor(name + ".weight", data)
        else:
            q = gguf.quants.quantize(np.ascontiguousarray(data), qtype)
            w.add_tensor(name + ".weight", q, raw_shape=q.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)
