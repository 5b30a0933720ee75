"""Harness overhead against the raw client loop, for chat attempts and for sandboxed agentic attempts.

1. Ledger with hashing: N chat attempts at concurrency 32 against a local stand-in that answers at once.
   Anchor: the raw `openai` client loop (same requests, same concurrency, no ledger, no scoring).
   archprobe eval run writes every attempt and outcome to the SQLite ledger, each row hash-chained.
2. Sandbox per agentic attempt: repository tasks whose test command is `python -m unittest`, at
   concurrency 4. (Not pytest: on this host a pytest start spends ~2 s of its ~4 s waiting outside the
   sandbox and less inside it, where there is no network, which would flatter the sandbox.) Anchor: the
   raw loop does the same work without a sandbox (request, copy the repo, write the model's file, run
   the tests with plain subprocess, remove the copy); archprobe runs each test in fresh namespaces as
   an unprivileged uid (eval/sandbox.py). A second row uses a trivial test command (`python t.py`) to
   show the worst case, where the sandbox's fixed cost per command dominates.
Target (issue 16): both archprobe loops keep >= 80% of their raw loop's attempts/s. Forms are timed
round-robin and the ratio is the median of paired rounds (_util.paired_ratio), so a slow minute on this
shared machine slows both alike.
Run: .venv/bin/python benchmarks/eval_overhead.py  [BENCH_ATTEMPTS=2000 BENCH_AGENTIC=40 BENCH_ROUNDS=3]
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _util import paired_ratio, round_robin, table

ATTEMPTS = int(os.environ.get("BENCH_ATTEMPTS", "2000"))
AGENTIC = int(os.environ.get("BENCH_AGENTIC", "40"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
CONCURRENCY, AGENT_CONCURRENCY, PER_TASK = 32, 4, 5
FILE_BLOCK = re.compile(r"^FILE:[ \t]*([^\n]*?)[ \t]*\n```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def chat_set(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "tasks.jsonl", "w") as f:
        for i in range(ATTEMPTS // PER_TASK):
            f.write(json.dumps({"id": f"t{i}", "prompt": f"What is {i} + 1?", "target": str(i + 1)}) + "\n")


def agentic_set(root: Path, test: str) -> None:
    """AGENTIC / PER_TASK repository tasks: fix add() in calc.py; the reference is the fix."""
    root.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(max(1, AGENTIC // PER_TASK)):
        repo = root / f"repo{i}"
        repo.mkdir(exist_ok=True)
        (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        (repo / "test_calc.py").write_text(f"import unittest\n\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
                                           f"    def test_add(self):\n        self.assertEqual(add({i}, 1), {i + 1})\n")
        (repo / "t.py").write_text(f"from calc import add\nassert add({i}, 1) == {i + 1}\n")
        fix = "FILE: calc.py\n```python\ndef add(a, b):\n    return a + b\n```\n"
        lines.append(json.dumps({"id": f"fix{i}", "prompt": f"Fix add() in repo {i}.", "scorer": "command",
                                 "repo": f"repo{i}", "test_command": test, "reference": fix}))
    (root / "tasks.jsonl").write_text("\n".join(lines) + "\n")


def start_server(task_dirs: list[Path], port: int) -> subprocess.Popen:
    merged = task_dirs[0].parent / "all"
    merged.mkdir(exist_ok=True)
    for d in task_dirs:
        for repo in d.glob("repo*"):
            shutil.copytree(repo, merged / repo.name, dirs_exist_ok=True)
    (merged / "tasks.jsonl").write_text("".join((d / "tasks.jsonl").read_text() for d in task_dirs))
    proc = subprocess.Popen([sys.executable, "-m", "archprobe.cli.main", "eval", "standin", str(merged),
                             "--port", str(port), "--p-correct", "0.7"], stderr=subprocess.PIPE)
    proc.stderr.readline()   # the "stand-in ... at URL" line: it is listening
    return proc


async def raw_chat(url: str, prompts: list[str]) -> None:
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


async def raw_agentic(url: str, ts) -> int:
    """The agentic work without a sandbox: ask, copy, apply the FILE blocks, run the tests, clean up."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
    sem = asyncio.Semaphore(AGENT_CONCURRENCY)

    def test(task, answer: str) -> int:
        work = Path(tempfile.mkdtemp(prefix="bench-raw-"))
        try:
            shutil.copytree(ts.root / task.repo, work / "repo")
            for m in FILE_BLOCK.finditer(answer):
                (work / "repo" / m.group(1)).write_text(m.group(2))
            return subprocess.run(["sh", "-c", task.test_command], cwd=work / "repo", capture_output=True,
                                  timeout=120).returncode
        finally:
            shutil.rmtree(work)

    async def one(task, n: int):
        async with sem:
            r = await client.chat.completions.create(
                model="standin-model", seed=0, messages=[{"role": "user", "content": task.prompt}],
                extra_headers={"X-Archprobe-Attempt": f"raw/{task.id}/{n}"})
            return await asyncio.to_thread(test, task, r.choices[0].message.content or "")

    codes = await asyncio.gather(*(one(t, n) for t in ts.tasks for n in range(PER_TASK)))
    await client.close()
    return sum(c == 0 for c in codes)


def main() -> None:
    from archprobe.eval.ledger import Ledger
    from archprobe.eval.runner import RunOptions, run_eval
    from archprobe.eval.sandbox import probe
    from archprobe.eval.tasks import load_task_set

    work = Path(tempfile.mkdtemp(prefix="archprobe-bench-eval-"))
    chat_set(work / "chat")
    agentic_set(work / "unittest", f"{sys.executable} -m unittest -q")
    agentic_set(work / "trivial", f"{sys.executable} t.py")
    sets = {name: load_task_set(work / name) for name in ("chat", "unittest", "trivial")}
    port = 18000 + os.getpid() % 1000
    server = start_server([work / "chat", work / "unittest"], port)
    url = f"http://127.0.0.1:{port}/v1"
    prompts = [t.prompt for t in sets["chat"].tasks for _ in range(PER_TASK)]
    counter = iter(range(10**6))

    def archprobe(name: str, concurrency: int):
        def go():
            n = next(counter)
            ledger = Ledger(work / f"ledger-{name}-{n}.sqlite")
            run_id = run_eval(ledger, sets[name], RunOptions(endpoint=url, model="standin-model", attempts=PER_TASK,
                                                             concurrency=concurrency, max_retries=0, timeout_s=120))
            assert len(ledger.attempts(run_id)) == len(sets[name].tasks) * PER_TASK
            assert ledger.verify(run_id)["ok"]
            ledger.close()
        return go

    try:
        asyncio.run(raw_chat(url, prompts[:200]))   # warm-up
        chat = round_robin({"raw": lambda: asyncio.run(raw_chat(url, prompts)),
                            "archprobe": archprobe("chat", CONCURRENCY)}, ROUNDS)
        agent = {}
        for name in ("unittest", "trivial"):
            agent[name] = round_robin({"raw": lambda n=name: asyncio.run(raw_agentic(url, sets[n])),
                                       "archprobe": archprobe(name, AGENT_CONCURRENCY)}, ROUNDS)
    finally:
        server.terminate()
        shutil.rmtree(work, ignore_errors=True)

    n_agentic = len(sets["unittest"].tasks) * PER_TASK
    rows = []
    verdicts = []
    for label, timing, n in (("chat, ledger + hash chain", chat, ATTEMPTS),
                             ("agentic, sandbox (unittest tests)", agent["unittest"], n_agentic),
                             ("agentic, sandbox (trivial test: worst case)", agent["trivial"], n_agentic)):
        raw, ours = timing["raw"][0], timing["archprobe"][0]
        ratio = 1.0 / paired_ratio(timing, "archprobe", "raw")
        rows.append([label, f"{n}", f"{n / raw:.1f}", f"{n / ours:.1f}", f"{(ours - raw) / n * 1e3:.1f}",
                     f"{ratio:.2f}"])
        verdicts.append((label, ratio))
    print(f"median of {ROUNDS} round-robin rounds; sandbox mode here: {probe()[0]}")
    print(table(rows, ["loop", "attempts", "raw attempts/s", "archprobe attempts/s", "overhead ms/attempt",
                       "throughput vs raw"]))
    for label, ratio in verdicts[:2]:
        print(f"target >= 0.80 of the raw loop ({label}): {ratio:.2f} -> {'MET' if ratio >= 0.8 else 'MISSED'}")
    print(f"(worst case, not a target: {verdicts[2][1]:.2f})")


if __name__ == "__main__":
    main()
