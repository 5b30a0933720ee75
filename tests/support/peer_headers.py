"""Full-size checkpoints of headers only, with the tensor inventory of the peer's own model: transformers
builds the model from its config on the meta device (no memory, no weights), and every parameter's name,
shape and dtype goes into a sparse safetensors file beside the config. Transformers 5 fuses routed experts
into one tensor per layer; checkpoints store one tensor per expert, so the fused ones are written back out
per expert under the names the published checkpoints use."""

from __future__ import annotations

import json
import os
import re

from archprobe.writers.safetensors import write_safetensors

_FUSED = re.compile(r"^(?P<pre>.*\.experts)\.(?P<what>gate_up_proj|down_proj)$")
_DTYPE = {"torch.bfloat16": "BF16", "torch.float32": "F32", "torch.float16": "F16"}


def inventory(config) -> list[tuple[str, str, tuple]]:
    """(name, safetensors dtype, shape) of every tensor the peer's model holds, experts unfused."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    out = []
    for name, t in model.state_dict().items():
        dtype = _DTYPE[str(t.dtype)]
        m = _FUSED.match(name)
        if not m:
            out.append((name, dtype, tuple(t.shape)))
            continue
        experts, a, b = t.shape                    # [E, 2 * inter, hidden] or [E, hidden, inter]
        for e in range(experts):
            p = f"{m['pre']}.{e}."
            if m["what"] == "gate_up_proj":
                out += [(p + "gate_proj.weight", dtype, (a // 2, b)), (p + "up_proj.weight", dtype, (a // 2, b))]
            else:
                out.append((p + "down_proj.weight", dtype, (a, b)))
    return out


def write_peer_checkpoint(folder, config, shards: int = 4) -> str:
    """config.json + `shards` sparse safetensors files holding the peer model's inventory."""
    os.makedirs(folder, exist_ok=True)
    items = inventory(config)
    per = -(-len(items) // shards)
    weight_map = {}
    for s in range(shards):
        part = items[s * per:(s + 1) * per]
        if not part:
            continue
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(folder, fname), [(*e, None) for e in part])
        weight_map.update({n: fname for n, _, _ in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    cfg = config.to_dict()
    cfg["torch_dtype"] = "bfloat16"
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    return str(folder)
