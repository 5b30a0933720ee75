"""validate at K3 scale: a full-depth forward of the 93-layer, 1.45 TB K3 layout on this machine, then
greedy decoding with the caches, reading only what each token needs.

The checkpoint is the sparse benchmark checkpoint (real headers of all 96 shards and 497,220 tensors,
the data regions holes: zero data), written once into $ARCHPROBE_BENCH_DIR (default: a folder in
/dev/shm, where reading a hole copies the kernel's zero page instead of filling the page cache; on
ext4 the same reads ran at 0.19 GB/s). The measurement runs in a fresh process: archprobe's lazy path
(validate/decode.py) builds the model from the headers, runs the prompt token through all 93 layers,
then decodes BENCH_K3_DECODE tokens (default 16) one at a time with the KDA states and MLA latent
caches. Zero data makes every router score 0.5: routing is deterministic (exact ties go to the lower
expert index, so experts 0..15 of every MoE layer), and those experts are read and dequantized for real.

Printed per forward: seconds, bytes read (the reader's count, and the kernel's `rchar` from
/proc/self/io as an independent count), bytes the token needs (from the headers: every non-expert
weight of the text model, the 16 routed experts per layer, the embedding row; resident small tensors
read once at build), their ratio; then peak RSS (target <= 8 GB) and seconds per token.
BENCH_K3_THREADS sets torch's threads (default 1: on a shared 2-core machine more threads spin).

Measured (issue 17, 2-vCPU AMD EPYC with 24 GB RAM, load 5-15 from other jobs, 1 thread, after the MXFP4 lookup's
np.take moved to mode="clip"): build 98 s (39 s in a quieter minute); every forward read 136.94 GB, exactly the
136.94 GB the token needs (1.0000x; the kernel's rchar agrees), 16 experts per MoE layer, finite logits; peak RSS
1.42 GiB after the prompt, 2.18 GiB with the caches (target <= 8 GB). Prompt 362.7 s wall / 77.1 CPU-s; decode steps
1-16 with the KDA states and MLA caches (wall / CPU seconds): 432.9 / 79.4, 691.6 / 76.3, 664.8 / 76.0, 608.2 /
74.7, 482.5 / 73.6, 240.5 / 70.7, 176.2 / 70.1, 152.4 / 68.7, 162.1 / 70.8, 116.8 / 68.5, 73.6 / 65.5, 64.8 / 64.3,
63.6 / 63.1, 64.8 / 64.1, 66.0 / 65.5, 74.3 / 67.6. Wall time fell as other jobs finished (load 15 -> 5); all 16
decode steps ran: 2327.9 GB read for 2327.9 GB needed over 17 forwards, decode mean 258.4 s wall / 69.9 CPU-s, 63.6
s wall on the quiet machine. Where one token's ~77 CPU-s go (cProfile): the MXFP4 byte-pair gather (np.take) ~28%,
the matmuls ~13%, the reads ~9%, the rest per-chunk conversions, scale multiplies and Python overhead (before the
mode="clip" change: ~85 CPU-s per token on this zero-data checkpoint, and 4-12 ns per weight instead of 0.4 on
random codes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from _util import table

from archprobe.writers.synthetic import K3Dims, write_k3_checkpoint

MEASURE = r"""
import json, os, resource, sys, time
import torch
torch.set_num_threads(int(sys.argv[3]))

def rchar():
    with open("/proc/self/io") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("rchar"))

def hwm():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM"))

from archprobe.validate.decode import LazyModel
t = time.perf_counter()
r0 = rchar()
model = LazyModel(sys.argv[1])
build = {"seconds": time.perf_counter() - t, "resident_bytes": model.resident_bytes, "rchar": rchar() - r0,
         "streamed_matrices": len(model.streamed), "moe_layers": len(model.banks)}
print(json.dumps({"build": build}), flush=True)
last = [rchar(), time.process_time()]

def on_token(rec):
    now, cpu = rchar(), time.process_time()
    rec["rchar"], rec["cpu_seconds"] = now - last[0], cpu - last[1]
    last[:] = [now, cpu]
    rec["experts_per_layer"] = sorted({len(v) for v in rec.pop("experts").values()})
    rec["peak_rss"] = hwm()
    print(json.dumps({"token": rec}), flush=True)

model.generate([int(sys.argv[4])], int(sys.argv[2]), on_token=on_token)
print(json.dumps({"done": {"peak_rss": hwm(), "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}}),
      flush=True)
"""


def default_folder() -> str:
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    return os.path.join(base, "archprobe-bench-k3-validate")


def ensure_checkpoint(folder: str) -> dict:
    marker = os.path.join(folder, "config.json")
    if os.path.exists(marker):
        with open(marker) as f:
            if json.load(f).get("archprobe_synthetic", {}).get("num_layers") == K3Dims().num_layers:
                return {"written": False}
    t = time.time()
    print(f"writing the sparse K3 checkpoint into {folder} ...", flush=True)
    info = write_k3_checkpoint(folder, K3Dims(), shards=96, sparse=True)
    return {"written": True, "seconds": time.time() - t, **info}


def main() -> None:
    folder = os.environ.get("ARCHPROBE_BENCH_DIR") or default_folder()
    decode = int(os.environ.get("BENCH_K3_DECODE", "16"))
    threads = os.environ.get("BENCH_K3_THREADS", "1")
    bos = str(163584)   # K3's bos_token_id
    ensure_checkpoint(folder)
    shards = [f for f in os.listdir(folder) if f.endswith(".safetensors")]
    apparent = sum(os.path.getsize(os.path.join(folder, f)) for f in shards)
    print(f"checkpoint: {len(shards)} shards, {apparent / 2**40:.3f} TiB apparent, in {folder}; decoding {decode} "
          f"tokens after the prompt, torch threads {threads}", flush=True)
    proc = subprocess.Popen([sys.executable, "-c", MEASURE, folder, str(decode), threads, bos],
                            stdout=subprocess.PIPE, text=True)
    rows, done, build, total_read, total_need, first_need = [], None, None, 0, 0, 0
    for line in proc.stdout:
        item = json.loads(line)
        if "build" in item:
            build = item["build"]
            print(f"build: {build['seconds']:.1f} s, resident small tensors {build['resident_bytes'] / 1e6:.1f} MB, "
                  f"{build['streamed_matrices']} streamed matrices, {build['moe_layers']} MoE layers", flush=True)
        elif "token" in item:
            r = item["token"]
            total_read += r["bytes_read"]
            total_need += r["bytes_needed"]
            first_need = first_need or r["bytes_needed"]
            rows.append([r["step"], "prompt" if r["step"] == 0 else "decode", r["input"][-1], r["next_token"],
                         f"{r['seconds']:.1f}", f"{r['cpu_seconds']:.1f}", f"{r['bytes_read'] / 1e9:.2f}",
                         f"{r['rchar'] / 1e9:.2f}",
                         f"{r['bytes_needed'] / 1e9:.2f}", f"{r['bytes_read'] / max(r['bytes_needed'], 1):.4f}",
                         "/".join(map(str, r["experts_per_layer"])), "yes" if r["finite"] else "NO",
                         f"{r['peak_rss'] / 2**30:.2f}"])
            print("  " + " | ".join(str(c) for c in rows[-1]), flush=True)
        elif "done" in item:
            done = item["done"]
    if proc.wait() != 0 or done is None:
        sys.exit(f"the measurement failed (exit {proc.returncode})")
    print()
    print(table(rows, ["step", "kind", "input id", "next id", "seconds", "CPU s", "GB read", "GB rchar", "GB needed",
                       "read/needed", "experts/layer", "finite", "peak RSS GiB"]))
    secs = [float(r[4]) for r in rows]
    cpu = [float(r[5]) for r in rows]
    decode_secs, decode_cpu = secs[1:] or secs, cpu[1:] or cpu
    print(f"\nbytes read {total_read / 1e9:.1f} GB for {total_need / 1e9:.1f} GB needed "
          f"({total_read / max(total_need, 1):.4f}x) over {len(rows)} forwards, plus "
          f"{build['resident_bytes'] / 1e6:.1f} MB of small tensors read once; the whole checkpoint is "
          f"{apparent / 1e9:,.0f} GB ({apparent / max(first_need, 1):.0f}x one token's need)")
    print(f"seconds per token: prompt {secs[0]:.1f}, decode mean {sum(decode_secs) / len(decode_secs):.1f} "
          f"(min {min(decode_secs):.1f}, max {max(decode_secs):.1f}); CPU seconds per token: prompt {cpu[0]:.1f}, "
          f"decode mean {sum(decode_cpu) / len(decode_cpu):.1f} (wall exceeds CPU when the machine is shared)")
    print(f"peak RSS {done['peak_rss'] / 2**30:.2f} GiB (target <= 8 GB = {8e9 / 2**30:.2f} GiB)")


if __name__ == "__main__":
    main()
