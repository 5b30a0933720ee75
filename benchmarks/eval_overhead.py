"""Harness overhead: 2,000 attempts at concurrency 32 against a local stand-in that answers at once.

Anchor: the raw `openai` client loop (same requests, same concurrency, no ledger, no scoring).
Target (issue 6): archprobe eval with the ledger on keeps >= 80% of the raw loop's attempts/s.
The stand-in runs in its own process, so both loops meet the same server.
Run: .venv/bin/python benchmarks/eval_overhead.py  [BENCH_ATTEMPTS=2000 BENCH_REPEAT=3]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _util import table

ATTEMPTS = int(os.environ.get("BENCH_ATTEMPTS", "2000"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
CONCURRENCY = 32
PER_TASK = 5


def make_task_set(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "tasks.jsonl", "w") as f:
        for i in range(ATTEMPTS // PER_TASK):
            f.write(json.dumps({"id": f"t{i}", "prompt": f"What is {i} + 1?", "target": str(i + 1)}) + "\n")


def start_server(task_dir: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "archprobe.cli.main", "eval", "standin", str(task_dir),
                             "--port", str(port), "--p-correct", "0.7"], stderr=subprocess.PIPE)
    proc.stderr.readline()   # the "stand-in ... at URL" line: it is listening
    return proc


async def raw_loop(url: str, prompts: list[str]) -> None:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int, prompt: str):
        async with sem:
            r = await client.chat.completions.create(model="standin-model", seed=0,
                                                     messages=[{"role": "user", "content": prompt}],
                                                     extra_headers={"X-Archprobe-Attempt": f"raw/{i}"})
            return r.choices[0].message.content

    await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    await client.close()


def main() -> None:
    from archprobe.eval.ledger import Ledger
    from archprobe.eval.runner import RunOptions, run_eval
    from archprobe.eval.tasks import load_task_set

    work = Path(tempfile.mkdtemp(prefix="archprobe-bench-eval-"))
    make_task_set(work / "set")
    ts = load_task_set(work / "set")
    prompts = [t.prompt for t in ts.tasks for _ in range(PER_TASK)]
    port = 18000 + os.getpid() % 1000
    server = start_server(work / "set", port)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        asyncio.run(raw_loop(url, prompts[:200]))   # warm-up
        raw_t, harness_t = [], []
        for n in range(REPEAT):
            t = time.perf_counter()
            asyncio.run(raw_loop(url, prompts))
            raw_t.append(time.perf_counter() - t)
            ledger = Ledger(work / f"ledger-{n}.sqlite")
            t = time.perf_counter()
            run_id = run_eval(ledger, ts, RunOptions(endpoint=url, model="standin-model", attempts=PER_TASK,
                                                     concurrency=CONCURRENCY, max_retries=0))
            harness_t.append(time.perf_counter() - t)
            assert len(ledger.attempts(run_id)) == ATTEMPTS
            ledger.close()
    finally:
        server.terminate()
    raw, harness = statistics.median(raw_t), statistics.median(harness_t)
    rows = [["raw openai client loop (anchor)", f"{raw:.2f}", f"{ATTEMPTS / raw:.0f}", "", "1.00"],
            ["archprobe eval run (ledger on)", f"{harness:.2f}", f"{ATTEMPTS / harness:.0f}",
             f"{(harness - raw) / ATTEMPTS * 1e3:.2f}", f"{raw / harness:.2f}"]]
    print(f"{ATTEMPTS} attempts, concurrency {CONCURRENCY}, median of {REPEAT}")
    print(table(rows, ["loop", "seconds", "attempts/s", "overhead ms/attempt", "throughput vs raw"]))
    verdict = "MET" if raw / harness >= 0.8 else "MISSED"
    print(f"target >= 0.80 of the raw loop's throughput: {raw / harness:.2f} -> {verdict}")


if __name__ == "__main__":
    main()
