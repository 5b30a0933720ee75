"""observe against validate on the same model and the same tokens: wall time and peak RSS, each run in a
fresh process (`archprobe ... --json`, the document's own peak_rss_bytes).

Usage: python benchmarks/observe.py [SOURCE [--card CARD]] ...   (default: the embedded demo; a SOURCE may be
a safetensors folder or a GGUF file)
Targets (issue 27): observe's forward (--no-weights) within 1.5x validate's time and within 10% of its
peak RSS; the full observe (weights scan + forward) is printed beside it. On a shared machine the
process figures are noisy; the second table (one process, one thread) isolates what the scan adds.

Measured 2026-12-02 on 2 shared cores (load ~10), SmolLM2-135M (tests/support/real_models.py):
  forward alone vs + weights scan (CPU s, one thread, 240 tokens): safetensors fp32 1.16 -> 1.39 (1.20x);
  GGUF Q4_1 1.89 -> 1.99 (1.05x). Process runs vs validate: peak RSS 0.98-1.02x on the demo, SmolLM2
  safetensors and GGUF; wall time 1.2-1.7x (noisy: validate itself varied 13-37 s on the demo).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

from _util import ROOT, table

from archprobe.observe.sample import SAMPLE, encode_texts


def _run(args: list[str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the child, its peak RSS): on a shared machine CPU time is the steadier."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "archprobe.cli.main", *args, "--json"], capture_output=True, text=True,
                       env=env)
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode not in (0, 1):
        sys.exit(f"{' '.join(args)}: {r.stderr.strip()}")
    return took, cpu, json.loads(r.stdout)["peak_rss_bytes"]


def bench(source: str, card: list[str]) -> list[list]:
    from archprobe.formats.sources import open_source

    cfg = open_source(source).config or {}      # a folder's config.json, or the one a GGUF file implies
    vocab = int(cfg.get("vocab_size") or (cfg.get("text_config") or {}).get("vocab_size"))
    ids, _, _ = encode_texts(source, list(SAMPLE), vocab)
    prompt = ["--prompt-ids", ",".join(map(str, ids))]
    rows = []
    base_t, base_cpu, base_rss = _run(["validate", source, *prompt, *card])
    for label, args in (("validate", None), ("observe --no-weights", ["observe", source, *prompt, "--no-weights"]),
                        ("observe", ["observe", source, *prompt])):
        t, cpu, rss = (base_t, base_cpu, base_rss) if args is None else _run(args + card)
        rows.append([os.path.basename(source.rstrip("/")), label, len(ids), f"{t:.2f}", f"{t / base_t:.2f}x",
                     f"{cpu:.2f}", f"{cpu / base_cpu:.2f}x", f"{rss / 2**20:.0f}", f"{rss / base_rss:.2f}x"])
    return rows


def scan_overhead(source: str, ids: list[int], repeats: int = 2) -> list:
    """In one process, one thread, best of `repeats`: CPU seconds of observe's forward alone and with the
    weights scan riding it (what the scan adds, free of process start-up and thread-pool noise)."""
    import torch

    from archprobe.observe import observe

    torch.set_num_threads(1)
    best = {}
    for weights in (False, True) * repeats:
        t = time.process_time()
        observe(source, prompt_ids=ids, weights=weights)
        best[weights] = min(best.get(weights, float("inf")), time.process_time() - t)
    return [os.path.basename(source.rstrip("/")), len(ids), f"{best[False]:.2f}", f"{best[True]:.2f}",
            f"{best[True] / best[False]:.2f}x"]


def main(argv: list[str]) -> None:
    jobs, i = [], 0
    while i < len(argv):
        src, card = argv[i], []
        if i + 2 < len(argv) + 1 and i + 1 < len(argv) and argv[i + 1] == "--card":
            card, i = ["--card", argv[i + 2]], i + 2
        jobs.append((src, card))
        i += 1
    if not jobs:
        from archprobe.demo import demo_checkpoint

        jobs = [(str(demo_checkpoint()), [])]
    rows = [row for src, card in jobs for row in bench(src, card)]
    print(table(rows, ["model", "command", "tokens", "wall s", "vs validate", "CPU s", "vs validate",
                       "peak RSS MiB", "vs validate"]))
    over = [scan_overhead(src, list(range(100, 340))) for src, _ in jobs]
    print(table(over, ["model", "tokens", "forward CPU s", "+ weights scan", "ratio"]))


if __name__ == "__main__":
    main(sys.argv[1:])
