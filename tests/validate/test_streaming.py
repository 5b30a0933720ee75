"""Streaming really bounds memory: a checkpoint of ~2 GB (real data, Llama layout) validated in a
fresh process grows its RSS by about one layer + embedding + head + activations, far below the
checkpoint size."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch
from safetensors.torch import save_file

H, F, LAYERS, VOCAB = 1536, 4096, 18, 8192


def _write_checkpoint(folder) -> tuple[int, int, int]:
    """Returns (total bytes, largest layer bytes, embedding + head bytes)."""
    gen = torch.Generator().manual_seed(0)
    total, largest = 0, 0
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        t = {p + "input_layernorm.weight": torch.ones(H), p + "post_attention_layernorm.weight": torch.ones(H)}
        for n, shape in (("self_attn.q_proj", (H, H)), ("self_attn.k_proj", (H, H)), ("self_attn.v_proj", (H, H)),
                         ("self_attn.o_proj", (H, H)), ("mlp.gate_proj", (F, H)), ("mlp.up_proj", (F, H)),
                         ("mlp.down_proj", (H, F))):
            t[p + n + ".weight"] = torch.randn(shape, generator=gen) * shape[1] ** -0.5
        size = sum(x.numel() * 4 for x in t.values())
        total, largest = total + size, max(largest, size)
        save_file(t, os.path.join(folder, f"model-{i:05d}.safetensors"))
    ends = {"model.embed_tokens.weight": torch.randn(VOCAB, H, generator=gen),
            "lm_head.weight": torch.randn(VOCAB, H, generator=gen) * H ** -0.5, "model.norm.weight": torch.ones(H)}
    save_file(ends, os.path.join(folder, "model-ends.safetensors"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "hidden_size": H, "intermediate_size": F, "num_hidden_layers": LAYERS,
                   "num_attention_heads": 12, "num_key_value_heads": 12, "vocab_size": VOCAB, "rms_norm_eps": 1e-6,
                   "rope_theta": 10000.0, "hidden_act": "silu",
                   "tie_word_embeddings": False}, f)
    emb_head = sum(x.numel() * 4 for x in ends.values())
    return total + emb_head, largest, emb_head


MEASURE = r"""
import json, sys
from archprobe.validate import validate
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
import torch  # imports first: their footprint is not the validation's
import archprobe.validate.pipeline  # noqa: F401  (archprobe.validate loads its pipeline on first use)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
base = status("VmRSS:")
doc = validate(sys.argv[1], prompt_ids=list(range(16)))
print(json.dumps({"status": doc["status"], "growth": status("VmHWM:") - base, "layers": len(doc["layers"])}))
"""


def test_peak_memory_is_about_one_layer(tmp_path):
    total, largest, emb_head = _write_checkpoint(tmp_path)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
    r = subprocess.run([sys.executable, "-c", MEASURE, str(tmp_path)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["status"] == "ran" and got["layers"] == LAYERS
    activations = 16 * (F + 8 * H) * 4 + 16 * VOCAB * 4
    bound = 1.3 * (largest + emb_head + activations)
    assert got["growth"] <= bound, f"RSS grew {got['growth']:,} B; bound {bound:,.0f} (checkpoint {total:,})"
    assert got["growth"] < total / 3
