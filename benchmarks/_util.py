"""Small helpers shared by the benchmark scripts (timing, tables)."""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks reuse the tests' hub stand-in
    sys.path.insert(0, str(ROOT))


def set_threads(env: str, default: int) -> None:
    """torch's thread count from the environment variable `env` (else `default`). Set it to 1 on a loaded
    host: with more threads than free cores torch's worker threads wait on each other (measured 10-100x
    slower per call at load 8 on 2 cores), and the ratios then measure that."""
    import torch

    value = os.environ.get(env, str(default))
    if not value.isdigit() or int(value) < 1:
        sys.exit(f"{env} must be a positive whole number of threads, not {value!r}")
    torch.set_num_threads(int(value))


def timed(fn, repeat: int = 5) -> tuple[float, object]:
    """Median wall time of `repeat` calls (after one warm-up) and the last result."""
    result = fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def round_robin(forms: dict, rounds: int) -> dict[str, tuple[float, list[float]]]:
    """Each form once for warm-up, then every form once per round, in turn: a slow minute on a noisy
    machine then slows every form alike. Returns {name: (median seconds, the per-round seconds)}."""
    for fn in forms.values():
        fn()
    times = {name: [] for name in forms}
    for _ in range(rounds):
        for name, fn in forms.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: (statistics.median(ts), ts) for name, ts in times.items()}


def paired_ratio(timed: dict, slower: str, faster: str) -> float:
    """Median over the rounds of round_robin's result of time(slower) / time(faster): how many times
    faster `faster` ran, each round's two timings taken seconds apart."""
    pairs = zip(timed[slower][1], timed[faster][1], strict=True)
    return statistics.median(a / b for a, b in pairs)


def table(rows: list[list], header: list[str]) -> str:
    cols = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cols]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def measured_fp32_peak() -> float:
    """FLOP/s of a large fp32 matmul on this machine now (the anchors assume ~300e9; AVX2-only hosts see less)."""
    import torch

    a, b = torch.randn(4096, 1024), torch.randn(1024, 1024)
    a @ b
    best = float("inf")
    for _ in range(9):   # the best of several: a peak, not a typical time, so noise cannot inflate ratios
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * 4096 * 1024 * 1024 / best
