"""Byte-exact reads of single tensors, row ranges and rows from safetensors shards, every byte counted.

The lazy validate path (validate/decode.py, validate/lazy_experts.py) reads only what one token needs:
the rows of its token ids from the embedding, the routed experts of each MoE layer, and the other
weights a row-chunk at a time into reused buffers. `ShardIndex` keeps each tensor's absolute byte
range (the formats layer folds expert enumerations and drops offsets, which is right for inspect and
useless here); every header is first checked by `formats.safetensors.parse_header` (offsets inside the
data region, sizes matching dtype x shape, no overlaps), and files are opened only as regular files
inside the folder. `ByteReader` reads with `os.preadv` into caller-owned buffers, so memory stays at
the size of the buffers, not of the tensors, and `bytes_read` is the exact total asked of the kernel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from archprobe.errors import CheckpointError
from archprobe.formats.dtypes import TORCH_NAMES

TORCH_DTYPES = {name: getattr(torch, attr) for name, attr in TORCH_NAMES.items()}   # formats/dtypes.py


@dataclass(frozen=True)
class Span:
    """One tensor's place: shard number, absolute byte offset, byte count, dtype string, shape."""

    shard: int
    offset: int
    nbytes: int
    dtype: str
    shape: tuple[int, ...]

    @property
    def row_bytes(self) -> int:
        return self.nbytes // self.shape[0] if self.shape and self.shape[0] else self.nbytes


class ShardIndex:
    """checkpoint name -> Span, for the shard files of a local folder (headers checked, then indexed)."""

    def __init__(self, folder: str, files: list[str]):
        from archprobe.formats.safetensors import parse_header, read_header_bytes

        try:
            from orjson import loads
        except ImportError:  # pragma: no cover - orjson is a dependency
            from json import loads
        self.folder = folder
        self.paths: list[str] = []
        self.spans: dict[str, Span] = {}
        for k, file in enumerate(files):
            path = os.path.join(folder, file)
            raw, size = read_header_bytes(path, folder)
            n = len(raw)
            parse_header(raw, path, size)   # the guarded check; raises one CheckpointError naming the problem
            doc = loads(raw)
            doc.pop("__metadata__", None)
            base = 8 + n
            self.paths.append(path)
            for name, e in doc.items():
                if name in self.spans:
                    raise CheckpointError(path, f"tensor {name[:80]!r} is also in {self.paths[self.spans[name].shard]}")
                begin, end = e["data_offsets"]
                self.spans[name] = Span(k, base + begin, end - begin, e["dtype"], tuple(e["shape"]))
            del doc

    def __contains__(self, name: str) -> bool:
        return name in self.spans

    def __getitem__(self, name: str) -> Span:
        try:
            return self.spans[name]
        except KeyError:
            raise CheckpointError(self.folder, f"tensor {name!r} is in no shard") from None


class ByteReader:
    """Reads tensors, row ranges and row lists by name; `bytes_read` and `reads` count every request."""

    def __init__(self, index: ShardIndex):
        self.index = index
        self.bytes_read = 0
        self.reads = 0
        self._files: dict[int, object] = {}
        self._scratch: dict[str, torch.Tensor] = {}

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()

    def _fd(self, shard: int) -> int:
        f = self._files.get(shard)
        if f is None:
            from archprobe.formats.localfiles import open_inside

            f = self._files[shard] = open_inside(self.index.folder, self.index.paths[shard])
        return f.fileno()

    def scratch(self, slot: str, nbytes: int) -> torch.Tensor:
        """A reused uint8 buffer of at least `nbytes` (grown when needed): no fresh pages per read."""
        buf = self._scratch.get(slot)
        if buf is None or buf.numel() < nbytes:
            buf = self._scratch[slot] = torch.empty(max(nbytes, 1), dtype=torch.uint8)
        return buf[:nbytes]

    def _pread(self, span: Span, start: int, out: torch.Tensor) -> None:
        """Fill the uint8 tensor `out` with the tensor's bytes from `start` (relative to the tensor)."""
        want = out.numel()
        if start < 0 or start + want > span.nbytes:
            raise CheckpointError(self.index.paths[span.shard], "read outside a tensor's byte range")
        view = memoryview(out.numpy()).cast("B")
        fd, pos, done = self._fd(span.shard), span.offset + start, 0
        while done < want:
            got = os.preadv(fd, [view[done:]], pos + done)
            if got <= 0:
                raise CheckpointError(self.index.paths[span.shard], f"file ends inside a tensor ({done:,} of "
                                                                     f"{want:,} bytes)")
            done += got
        self.bytes_read += want
        self.reads += 1

    def _typed(self, raw: torch.Tensor, span: Span, rows: int | None = None) -> torch.Tensor:
        dtype = TORCH_DTYPES.get(span.dtype)
        if dtype is None:
            raise CheckpointError(self.index.paths[span.shard], f"dtype {span.dtype} is not readable here")
        shape = span.shape if rows is None else (rows, *span.shape[1:])
        return raw.view(dtype).view(shape)

    def read(self, name: str) -> torch.Tensor:
        """The whole tensor, in a fresh buffer of its stored dtype."""
        span = self.index[name]
        raw = torch.empty(span.nbytes, dtype=torch.uint8)
        self._pread(span, 0, raw)
        return self._typed(raw, span)

    def read_rows(self, name: str, start: int, stop: int, slot: str = "rows") -> torch.Tensor:
        """Rows [start, stop) of a tensor (stored dtype) in the reused buffer `slot` (valid until the next
        read into that slot)."""
        span = self.index[name]
        rb = span.row_bytes
        raw = self.scratch(slot, (stop - start) * rb)
        self._pread(span, start * rb, raw)
        return self._typed(raw, span, stop - start)

    def read_row_list(self, name: str, rows: list[int]) -> torch.Tensor:
        """The given rows (each read once, in the given order) in a fresh tensor [len(rows), ...]."""
        span = self.index[name]
        rb = span.row_bytes
        raw = torch.empty(len(rows) * rb, dtype=torch.uint8)
        for k, r in enumerate(rows):
            if not 0 <= r < span.shape[0]:
                raise CheckpointError(self.index.paths[span.shard], f"row {r} outside {name} {list(span.shape)}")
            self._pread(span, r * rb, raw[k * rb:(k + 1) * rb])
        return self._typed(raw, span, len(rows))

