"""Streaming validation of a checkpoint larger than half this machine's RAM.

Generates once (into $ARCHPROBE_BENCH_DIR, default /tmp/archprobe-bench-stream) a K3-layout checkpoint
of real random data (BF16 matrices, MXFP4-packed experts; one shard per layer, written a layer at a
time) of about BENCH_STREAM_GB gigabytes (default 14), then runs `archprobe validate` on it in a fresh
process and prints peak RSS and seconds per layer. Target (issue 5): peak RSS <= 2 GB.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import numpy as np
from _util import table

from archprobe.formats.dtypes import DTYPE_BITS
from archprobe.writers.safetensors import write_safetensors
from archprobe.writers.synthetic import K3Dims, k3_config, k3_inventory, random_tensor_bytes

DIMS = dict(hidden=2048, vocab=32768, heads=16, head_dim=128, rope_dim=64, q_lora=512, kv_lora=256, decay_rank=128,
            a_log_len=16, experts=64, top_k=4, expert_width=1024, latent=1024, shared=1, dense_width=8192,
            block_size=4, vision_blocks=0, vision_hidden=64)


def _size(d: K3Dims) -> int:
    return sum(math.prod(s) * DTYPE_BITS[t] // 8 for n, t, s in k3_inventory(d) if not n.startswith(("vision", "mm_")))


def generate(folder: str, gigabytes: float) -> K3Dims:
    per_layer = _size(K3Dims(num_layers=2, **DIMS)) - _size(K3Dims(num_layers=1, **DIMS))
    base = _size(K3Dims(num_layers=1, **DIMS)) - per_layer
    n = max(2, int((gigabytes * 1e9 - base) // per_layer))
    d = K3Dims(num_layers=n, **DIMS)
    marker = os.path.join(folder, "config.json")
    if os.path.exists(marker) and json.load(open(marker)).get("archprobe_synthetic", {}).get("num_layers") == n:
        return d
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    groups: dict[str, list] = {}
    for name, dtype, shape in k3_inventory(d):
        if name.startswith(("vision", "mm_")):
            continue
        key = name.split(".layers.")[1].split(".")[0] if ".layers." in name else "ends"
        groups.setdefault(key, []).append((name, dtype, shape))
    weight_map = {}
    for key, entries in groups.items():
        data = {}
        for name, dtype, shape in entries:
            blob = random_tensor_bytes(name, dtype, shape, rng)
            if name.endswith("weight_packed"):
                packed, scale = blob.split(b"\0SCALE\0")
                data[name], data[name[: -len("packed")] + "scale"] = packed, scale
            elif blob:
                data[name] = blob
        fname = f"layer-{key}.safetensors"
        write_safetensors(os.path.join(folder, fname), [(n, t, s, data[n]) for n, t, s in entries])
        weight_map.update({n: fname for n, _, _ in entries})
        print(f"  wrote {fname}", flush=True)
    cfg = k3_config(d)
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": weight_map}, f)
    with open(marker, "w") as f:
        json.dump(cfg, f)
    return d


MEASURE = r"""
import json, sys, time, resource
from archprobe.validate import validate
t = time.time()
doc = validate(sys.argv[1], prompt_ids=list(range(32)))
print(json.dumps({"status": doc["status"], "seconds": time.time() - t, "peak": doc["peak_rss_bytes"],
                  "layers": [(l["index"], l["kind"], l["seconds"]) for l in doc["layers"]]}))
"""


def main():
    folder = os.environ.get("ARCHPROBE_BENCH_DIR", "/tmp/archprobe-bench-stream")
    gb = float(os.environ.get("BENCH_STREAM_GB", "14"))
    t = time.time()
    d = generate(folder, gb)
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if f.endswith(".safetensors"))
    print(f"checkpoint: {size / 1e9:.2f} GB in {d.num_layers} layers (ready in {time.time() - t:.0f} s)")
    r = subprocess.run([sys.executable, "-c", MEASURE, folder], capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr[-3000:])
    got = json.loads(r.stdout.strip().splitlines()[-1])
    rows = [[i, kind, f"{s:.2f}"] for i, kind, s in got["layers"]]
    print(table(rows, ["layer", "kind", "seconds (load + run)"]))
    print(f"\nstatus {got['status']}; total {got['seconds']:.1f} s; peak RSS {got['peak'] / 2**30:.2f} GiB "
          f"(target <= 2 GB) for a {size / 1e9:.1f} GB checkpoint")


if __name__ == "__main__":
    main()
