"""Read many local shard headers on all cores: one task per shard, results in shard order.

A worker returns the folded `Header` (a few KB), so the cost of shipping results back is small.
With one core or few shards it runs in-process (forking costs more than it saves), and so it does when any
header is large: memory then holds one large parse at a time, not one per worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from archprobe.formats.safetensors import Header, read_header

MIN_SHARDS_FOR_PROCESSES = 8
MAX_HEADER_FOR_PROCESSES = 2 * 1024 * 1024   # larger headers: one at a time, so workers never hold several


def read_headers(paths: Sequence[str], on_done: Callable[[Header], None] | None = None,
                 workers: int | None = None, folder: str | None = None) -> list[Header]:
    """Headers of `paths` in order; `on_done` is called as each arrives (for progress bars; it may raise
    to stop the reading). Only regular files inside `folder` (default: each file's own) are opened."""
    workers = workers or min(os.cpu_count() or 1, 8)
    if (workers < 2 or len(paths) < MIN_SHARDS_FOR_PROCESSES or "fork" not in _methods()
            or _largest_header(paths, folder) > MAX_HEADER_FOR_PROCESSES):
        out = []
        for p in paths:
            out.append(read_header(p, folder))
            if on_done:
                on_done(out[-1])
        return out
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork"))
    futures = [pool.submit(read_header, p, folder) for p in paths]
    results = []
    try:
        for fut in futures:
            results.append(fut.result())  # re-raises a worker's CheckpointError as is
            if on_done:
                on_done(results[-1])
    except BaseException:
        # an error, or the command's deadline: stop the workers now (one may be stuck on a slow file),
        # rather than wait for them as `with` would
        processes = list(getattr(pool, "_processes", {}).values())
        _quiet_exit_wakeup(pool)
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            proc.terminate()
        # let the pool's manager thread finish closing its wakeup pipe before the error ends the process:
        # Python 3.11's exit hook otherwise races it and prints "Exception ignored ... Bad file descriptor"
        # under the one-line error (seen once in a CI run); bounded, as a worker stuck in the kernel may not die
        for proc in processes:
            proc.join(timeout=2)
        manager = getattr(pool, "_executor_manager_thread", None)
        if manager is not None:
            manager.join(timeout=5)
        raise
    pool.shutdown()
    return results


def _quiet_exit_wakeup(pool: ProcessPoolExecutor) -> None:
    """Python 3.11's exit hook wakes every pool's manager thread through a pipe that the manager closes as
    it finishes; when the two race (a loaded machine, a manager still shutting down after the joins below
    time out), the hook prints "Exception ignored ... Bad file descriptor" under the one-line error. A pipe
    already closed has nobody left to wake, so this pool's wakeup ignores that."""
    wakeup = getattr(pool, "_executor_manager_thread_wakeup", None)
    if wakeup is None:
        return
    send = wakeup.wakeup

    def wake_unless_closed():
        try:
            send()
        except (OSError, ValueError):
            pass
    wakeup.wakeup = wake_unless_closed


def _largest_header(paths: Sequence[str], folder: str | None) -> int:
    """The largest declared header length (8-byte prefixes only): a large one is parsed alone, in this
    process, so workers never hold several large parses in memory at once."""
    from archprobe.formats.localfiles import open_inside

    largest = 0
    for p in paths:
        try:
            with open_inside(folder or os.path.dirname(os.path.abspath(p)), p) as f:
                largest = max(largest, int.from_bytes(f.read(8), "little"))
        except Exception:  # read_header reports the problem with the file's name
            return 1 << 62
    return largest


def _methods() -> list[str]:
    from multiprocessing import get_all_start_methods

    return get_all_start_methods()
