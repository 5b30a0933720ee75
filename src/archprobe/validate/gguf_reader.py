"""GGUF weights for validate and diff: checkpoint name -> dense float32 tensor, read one tensor at a time.

Why: a GGUF file's names are bound to roles by the card (inspect already does this), so validate runs it
like a safetensors folder once each tensor can be read and dequantized (ops/gguf_quant.py, archprobe's
own code). Layout facts of the GGUF conversion are undone here, so the card's math applies unchanged:
llama.cpp's converter permutes the rows of llama's q and k projections so that ggml's rope can rotate
adjacent pairs; transformers' GGUF loader reverses that permutation, and so do we (same math, same rows).

Byte ranges come from the parsed header (formats/gguf.py: every offset checked against the file size);
files are opened only as regular files inside their folder and read with `os.pread`.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np
import torch

from archprobe.errors import CheckpointError
from archprobe.formats.gguf import ggml_type

PERMUTED_QK = {"llama"}   # GGUF architectures whose q/k rows llama.cpp's converter permutes


def reverse_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Rows of a llama.cpp-permuted q/k projection [n_head * d, ...] back in the HF order."""
    half = w.shape[0] // n_head // 2
    return w.reshape(n_head, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class GGUFTensorReader:
    """checkpoint name -> tensor for the GGUF shards of a RawCheckpoint (the same interface as
    validate.load.TensorReader: files, shape, all_shapes, session)."""

    def __init__(self, folder: str, headers, meta: dict, config: dict):
        from archprobe.formats.gguf import DATA_OFFSETS

        self.folder = folder
        self.files: dict[str, list[str]] = {}
        self.shapes: dict[str, tuple] = {}
        self.spans: dict[str, tuple[str, int, int, str]] = {}   # name -> (file, offset, nbytes, ggml type)
        for h in headers:
            offsets = h.metadata.get(DATA_OFFSETS) or {}
            for t in h.tensors:
                if t.name not in offsets:
                    raise CheckpointError(os.path.join(folder, h.file), f"no data offset for {t.name[:80]!r}")
                self.files[t.name] = [h.file]
                self.shapes[t.name] = tuple(t.shape)
                self.spans[t.name] = (h.file, offsets[t.name], t.nbytes, ggml_type(t.dtype))
        self.arch = meta.get("general.architecture")
        self.n_head = config.get("num_attention_heads")
        self.n_kv = config.get("num_key_value_heads") or self.n_head
        self.bytes_read = 0

    def listed(self, name: str) -> str | None:
        return name if name in self.spans else None

    def shape(self, name: str) -> tuple | None:
        return self.shapes.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self.spans

    def all_shapes(self, names) -> dict[str, tuple]:
        return {n: s for n in names if (s := self.shape(n)) is not None}

    def dtype(self, name: str) -> str:
        return self.spans[name][3]

    def _heads(self, name: str) -> int | None:
        """How many heads to un-permute `name` by, or None when it is not a permuted q/k."""
        if self.arch not in PERMUTED_QK or not isinstance(self.n_head, int):
            return None
        if ".attn_q." in name:
            return self.n_head
        if ".attn_k." in name:
            return self.n_kv if isinstance(self.n_kv, int) else self.n_head
        return None

    def read_numpy(self, name: str, fd_for) -> np.ndarray:
        from archprobe.ops.gguf_quant import dequantize

        file, offset, nbytes, qtype = self.spans[name]
        buf = bytearray(nbytes)
        view, fd, done = memoryview(buf), fd_for(file), 0
        while done < nbytes:
            got = os.preadv(fd, [view[done:]], offset + done)
            if got <= 0:
                raise CheckpointError(os.path.join(self.folder, file), f"file ends inside tensor {name[:80]!r}")
            done += got
        self.bytes_read += nbytes
        w = dequantize(buf, qtype, self.shapes[name])
        heads = self._heads(name)
        if heads and w.ndim >= 1 and w.shape[0] % (2 * heads) == 0:
            w = reverse_permute(w, heads)
        return np.ascontiguousarray(w)

    @contextmanager
    def session(self):
        """Yields `get(name) -> float32 tensor` (dequantized); each file opened once per session."""
        from archprobe.formats.limits import reading_deadline
        from archprobe.formats.localfiles import open_inside

        handles: dict[str, object] = {}

        def fd_for(file: str) -> int:
            if file not in handles:
                handles[file] = open_inside(self.folder, os.path.join(self.folder, file))
            return handles[file].fileno()

        def get(name: str) -> torch.Tensor:
            if name not in self.spans:
                raise CheckpointError(self.folder, f"tensor {name!r} is in no GGUF file")
            with reading_deadline(f"{os.path.join(self.folder, self.spans[name][0])}: tensor {name!r}"):
                return torch.from_numpy(self.read_numpy(name, fd_for))

        try:
            yield get
        finally:
            for f in handles.values():
                f.close()
