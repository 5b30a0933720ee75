"""A minimal safetensors writer for synthetic checkpoints (demo, tests, benchmarks).

Data is given as raw little-endian bytes, or left out: then the file is extended with `truncate()`,
leaving a hole, so a 1.5 TB checkpoint costs only its headers on disk (a sparse file).
The layout follows the format: 8-byte length, JSON header padded with spaces to 8 bytes, data.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable

from archprobe.formats.dtypes import DTYPE_BITS


def write_safetensors(path: str | os.PathLike, tensors: Iterable[tuple[str, str, tuple, bytes | None]],
                      metadata: dict[str, str] | None = None) -> int:
    """Write `(name, dtype, shape, data_or_None)` entries; returns the file size in bytes."""
    header: dict = {"__metadata__": metadata} if metadata else {}
    blobs: list[bytes | None] = []
    offset = 0
    for name, dtype, shape, data in tensors:
        nbytes = math.prod(shape) * DTYPE_BITS[dtype] // 8
        if data is not None and len(data) != nbytes:
            raise ValueError(f"{name}: {len(data)} bytes given, {dtype}{list(shape)} needs {nbytes}")
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        blobs.append(data)
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        if all(b is None for b in blobs):
            f.truncate(8 + len(raw) + offset)
        else:
            for (_, dtype, shape, _), data in zip(header_items(header), blobs, strict=True):
                f.write(data if data is not None else bytes(math.prod(shape) * DTYPE_BITS[dtype] // 8))
    return 8 + len(raw) + offset


def header_items(header: dict) -> list[tuple[str, str, tuple, None]]:
    return [(k, v["dtype"], tuple(v["shape"]), None) for k, v in header.items() if k != "__metadata__"]
