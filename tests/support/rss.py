"""Peak resident memory of a stretch of code inside a long-lived test process.

`ru_maxrss` is the process's lifetime peak, so in a full suite it reports whatever the heaviest earlier
test reached. Linux lets a process reset its own peak (`clear_refs` value 5, kernel ≥ 4.0); the peak
growth over a block is then `VmHWM` at the end minus `VmRSS` at the start, exact rather than sampled.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


class PeakGrowth:
    bytes: int = 0


@contextmanager
def peak_rss_growth():
    """Yields an object whose `.bytes`, after the block, is the block's peak RSS above its starting RSS."""
    Path("/proc/self/clear_refs").write_text("5")
    start = _status_kib("VmRSS")
    out = PeakGrowth()
    try:
        yield out
    finally:
        out.bytes = (_status_kib("VmHWM") - start) * 1024
