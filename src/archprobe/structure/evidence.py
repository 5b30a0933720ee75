"""Evidence rows and a small helper for finding tensors by their last name components."""

from __future__ import annotations

from archprobe.structure.tensors import Entry


def ev(entry: Entry, why: str) -> dict:
    """An evidence row: the checkpoint's own tensor name, its stored shape and dtype, and why."""
    count = f" (x{entry.count} experts)" if entry.count > 1 else ""
    return {"tensor": entry.name, "shape": list(entry.info.shape), "dtype": entry.dtype, "why": why + count}


def cfg_ev(key: str, value, why: str) -> dict:
    return {"tensor": f"config:{key}", "shape": None, "dtype": None, "why": f"{key} = {value!r}: {why}"}


def find(group: dict[str, Entry], *leaves: str) -> Entry | None:
    """The entry whose name ends with one of `leaves` (with or without a trailing .weight)."""
    for leaf in leaves:
        for rest, e in group.items():
            if rest == leaf or rest.endswith("." + leaf) or rest in (leaf + ".weight",) \
                    or rest.endswith("." + leaf + ".weight"):
                return e
    return None


def matrices(group: dict[str, Entry]) -> list[Entry]:
    return [e for e in group.values() if len(e.shape) == 2 and not e.role.metadata]
