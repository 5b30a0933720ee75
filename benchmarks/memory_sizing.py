"""Sizing answers on the full-size K3 headers (sparse files): seconds per question (the target: under 2 s each,
inspect included). Run: PYTHONPATH=src:. python benchmarks/memory_sizing.py"""

from __future__ import annotations

import tempfile
import time

from _util import table

from archprobe.memory.sizing import sizing_document
from archprobe.structure.inspect import inspect_checkpoint
from archprobe.writers.synthetic import K3Dims, write_k3_checkpoint

QUESTIONS = {
    "how many H200 at 128k": dict(context=131072, gpu="h200"),
    "16 x H200 under vLLM, 1M": dict(context=1 << 20, gpu="h200", devices=16, engine_name="vllm"),
    "TP8 PP2 on H200, batch 8": dict(context=131072, batch=8, gpu="h200", tp=8, pp=2),
    "DP16 EP16 on B300 under vLLM": dict(context=1 << 20, gpu="b300", dp=16, ep=16, engine_name="vllm"),
    "how many H200 under SGLang, 128k": dict(context=131072, gpu="h200", engine_name="sglang"),
    "16 x H200 vLLM, MTP on, fp8 KV": dict(context=1 << 20, gpu="h200", devices=16, engine_name="vllm", mtp=True,
                                          kv_dtype="fp8"),
    "budget 16x141GB, vLLM, batch 32": dict(context=131072, batch=32, budget=(16, 141 * 10 ** 9),
                                            engine_name="vllm"),
}


def main() -> None:
    folder = tempfile.mkdtemp()
    write_k3_checkpoint(folder, K3Dims(), shards=96, sparse=True)
    times = []
    for _ in range(2):                  # the first read after writing can be cold; report the better of two
        t = time.perf_counter()
        doc = inspect_checkpoint(folder)
        times.append(time.perf_counter() - t)
    inspect_s = min(times)
    rows = []
    for name, q in QUESTIONS.items():
        q = dict(q)
        ctx, batch = q.pop("context"), q.pop("batch", 1)
        t = time.perf_counter()
        d = sizing_document(doc, ctx, batch, **q)
        s = time.perf_counter() - t
        rows.append([name, f"{s:.3f}", f"{s + inspect_s:.2f}", d["devices"], d.get("fits"),
                     d.get("largest_fitting_context")])
    print(table(rows, ["question", "sizing s", "with inspect s", "devices", "fits", "largest context"]))


if __name__ == "__main__":
    main()
