"""Save an archprobe.nn.HybridDecoder as a checkpoint inspect can read, and measure a real run's
cache bytes and peak memory in a fresh process (for the memory planner's measured tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict

LAYER_TYPES = {"kda": "linear_attention", "gqa": "full_attention", "mla": "full_attention",
               "swa": "sliding_attention", "lowrank_kv": "full_attention", "none": "none"}


def _attention_args(cfg):
    """The heads a config.json states: the first layer's softmax-attention-like arguments (GQA's defaults
    when no layer has K/V heads)."""
    for i in range(cfg.num_hidden_layers):
        args = cfg.layer_spec(i).mixer.args
        if hasattr(args, "num_kv_heads"):
            return args
    return cfg.mixer_spec("gqa").args


def config_json(cfg) -> dict:
    attn = _attention_args(cfg)
    return {
        "model_type": "archprobe_hybrid", "architectures": ["HybridDecoder"], "hidden_size": cfg.hidden_size,
        "num_hidden_layers": cfg.num_hidden_layers, "vocab_size": cfg.vocab_size,
        "num_attention_heads": attn.num_heads, "num_key_value_heads": attn.num_kv_heads,
        "head_dim": attn.head_dim, "intermediate_size": cfg.intermediate_size,
        "num_experts_per_tok": cfg.num_experts_per_token,
        "sliding_window": cfg.mixer_spec("swa").args.sliding_window,
        "layer_types": [LAYER_TYPES[m] for m in cfg.mixer_types],
        "kv_lora_rank": cfg.mixer_spec("mla").args.kv_lora_rank if "mla" in cfg.mixer_types else None,
        "attn_res_block_size": cfg.attn_res_block_size, "hidden_act": cfg.hidden_act,
        "archprobe_hybrid_config": {k: v for k, v in asdict(cfg).items() if k != "extra"},
    }


def save_decoder(model, folder) -> str:
    from safetensors.torch import save_file

    os.makedirs(folder, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config_json(model.config), f)
    return str(folder)


MEASURE = r"""
import json, sys
import torch


def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

from archprobe.nn.decoder import HybridConfig, HybridDecoder
spec = json.loads(sys.argv[1])
cfg = HybridConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in spec["config"].items()})
torch.set_num_threads(1)
with open("/proc/self/clear_refs", "w") as f:  # reset the high-water mark: import-time spikes do not count
    f.write("5")
base = status("VmRSS:")
torch.manual_seed(0)
model = HybridDecoder(cfg).eval()
weights = sum(t.numel() * t.element_size() for t in model.state_dict().values())
ids = torch.randint(0, cfg.vocab_size, (spec["batch"], spec["context"]))
with torch.no_grad():
    logits, caches = model(ids, use_cache=True, logits_to_keep=1)
peak = status("VmHWM:") - base
cache = sum(c.nbytes() for c in caches if c is not None)
# the framework's own first-forward footprint (thread pools, kernel caches): a 1-token run in a fresh model
print(json.dumps({"weights": weights, "cache": cache, "peak": peak}))
"""


def measure(cfg, context: int, batch: int) -> dict:
    """Run a prefill of `batch` x `context` tokens in a fresh process; exact cache bytes and peak RSS growth."""
    spec = {"config": {k: v for k, v in asdict(cfg).items() if k != "extra"}, "context": context, "batch": batch}
    # large blocks through mmap, so freed memory leaves RSS at once and the high-water mark tracks live tensors
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0", "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(spec)], capture_output=True, text=True,
                       timeout=600, env=env)
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def planned_vs_measured(cfg, runs, folder) -> list[dict]:
    """For each (context, batch): the planner's figures (engine="reference", fp32) on the saved and inspected
    checkpoint, next to a real run's exact cache bytes and its peak RSS growth minus the framework's own
    1-token footprint (which the planner lists as excluded)."""
    import torch

    from archprobe.memory import plan_memory
    from archprobe.nn.decoder import HybridDecoder
    from archprobe.structure.inspect import inspect_checkpoint

    torch.manual_seed(0)
    doc = inspect_checkpoint(save_decoder(HybridDecoder(cfg), folder))
    one = measure(cfg, 1, 1)
    framework = one["peak"] - one["weights"] - one["cache"]
    rows = []
    for context, batch in runs:
        got = measure(cfg, context, batch)
        plan = plan_memory(doc, context, batch, kv_dtype="float32", act_dtype="float32", engine="reference")
        rows.append({"context": context, "batch": batch, "plan": plan, "got": got, "framework": framework,
                     "measured_peak": got["peak"] - framework})
    return rows
