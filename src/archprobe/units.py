"""Byte counts as a person reads them (2.50 GiB), in one place: the terminal renderers and memory's
messages (which sit below the CLI and must not import it) print the same figure."""

from __future__ import annotations


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, div in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n} B"
