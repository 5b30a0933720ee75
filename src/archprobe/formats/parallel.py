"""Read many local shard headers on all cores: one task per shard, results in shard order.

A worker returns the folded `Header` (a few KB), so the cost of shipping results back is small.
With one core or few shards it runs in-process (forking costs more than it saves).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from archprobe.formats.safetensors import Header, read_header

MIN_SHARDS_FOR_PROCESSES = 8


def read_headers(paths: Sequence[str], on_done: Callable[[Header], None] | None = None,
                 workers: int | None = None) -> list[Header]:
    """Headers of `paths` in order; `on_done` is called as each arrives (for progress bars)."""
    workers = workers or min(os.cpu_count() or 1, 8)
    if workers < 2 or len(paths) < MIN_SHARDS_FOR_PROCESSES or "fork" not in _methods():
        out = []
        for p in paths:
            out.append(read_header(p))
            if on_done:
                on_done(out[-1])
        return out
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
        futures = [pool.submit(read_header, p) for p in paths]
        results = []
        for fut in futures:
            results.append(fut.result())  # re-raises a worker's CheckpointError as is
            if on_done:
                on_done(results[-1])
    return results


def _methods() -> list[str]:
    from multiprocessing import get_all_start_methods

    return get_all_start_methods()
