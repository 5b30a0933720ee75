"""x @ W.T with W read from its shard a row-chunk at a time: plain float weights, or MXFP4 dequantized
on the fly.

Why chunks: a K3 token touches 137 GB of weights; reading each matrix whole would cost its size in
memory (a KDA layer's five projections are 880 MB of BF16, 1.8 GB as float32), and fresh buffers cost
page faults. A chunk of about `CHUNK_ELEMENTS` weights is read into a reused buffer, converted into a
second reused buffer, and multiplied at once, so memory is two small buffers per matrix shape and the
converted weights are still in cache when the multiply reads them.

MXFP4 (compressed-tensors `mxfp4-pack-quantized`, spec/kimi-k3.md 1.3): a byte holds columns 2j (low
nibble) and 2j + 1 (high nibble), E2M1 codes; `weight_scale` is E8M0, 2^(s - 127) per 32 columns. A
256-entry table maps each byte to its two float32 values at once (one gather per byte, not per
nibble), then each 32-column group is multiplied by its power of two; the result is exactly
`ops.quant.dequantize_mxfp4`'s, chunk by chunk.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from archprobe.ops.quant import E2M1, MX_GROUP

CHUNK_ELEMENTS = 1 << 18     # weights per chunk: 1 MB as float32 (measured: 128-256 rows of 7168 are fastest)


def _pair_table() -> np.ndarray:
    """byte -> int64 holding the float32 bits of (low nibble value, high nibble value), little-endian."""
    values = np.array(E2M1 + tuple(-v for v in E2M1), dtype=np.float32)
    pairs = np.stack([np.tile(values, 16), np.repeat(values, 16)], axis=-1)   # [256, 2]: b & 15, b >> 4
    if np.little_endian:
        return np.ascontiguousarray(pairs).view(np.int64).reshape(256)
    return np.ascontiguousarray(pairs[:, ::-1]).view(np.int64).reshape(256)   # pragma: no cover


PAIR_TABLE = _pair_table()


def _rows_per_chunk(cols: int) -> int:
    return max(1, CHUNK_ELEMENTS // max(cols, 1))


def _out(x: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.empty(x.shape[0], rows, dtype=x.dtype)


def dense_matmul(x: torch.Tensor, reader, name: str) -> torch.Tensor:
    """x [n, in] @ W.T for the stored float matrix `name` [out, in]; returns [n, out] in x's dtype."""
    span = reader.index[name]
    rows, cols = span.shape[0], span.shape[1]
    out = _out(x, rows)
    step = _rows_per_chunk(cols)
    conv = reader.scratch("dense_conv", step * cols * x.element_size()).view(x.dtype)
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        w = reader.read_rows(name, r0, r1, slot="dense_raw")
        if w.dtype != x.dtype:
            w = conv[: (r1 - r0) * cols].view(r1 - r0, cols).copy_(w)
        out[:, r0:r1] = F.linear(x, w)   # F.linear, as nn.Linear: a one-chunk matrix gives its exact bits
    return out


def mxfp4_matmul(x: torch.Tensor, reader, packed: str, scale: str) -> torch.Tensor:
    """x [n, in] @ W.T for the MXFP4 matrix stored as `packed` U8 [out, in/2] + `scale` U8 [out, in/32]."""
    span = reader.index[packed]
    rows, half = span.shape
    cols = half * 2
    if reader.index[scale].shape != (rows, cols // MX_GROUP):
        raise ValueError(f"{scale}: shape {list(reader.index[scale].shape)} does not fit {packed} {[rows, half]}")
    out = _out(x, rows)
    step = _rows_per_chunk(cols)
    pairs = reader.scratch("mx_pairs", step * half * 8).view(torch.int64)
    conv = reader.scratch("mx_conv", step * cols * x.element_size()).view(x.dtype)
    for r0 in range(0, rows, step):
        n = min(rows, r0 + step) - r0
        codes = reader.read_rows(packed, r0, r0 + n, slot="mx_packed")
        exps = reader.read_rows(scale, r0, r0 + n, slot="mx_scale")
        p = pairs[: n * half]
        # mode="clip" (a byte is always a valid index): numpy's default "raise" with out= goes through a
        # buffered copy, measured 10-30x slower (0.4 vs 4-12 ns per weight), most of a K3 token's time
        np.take(PAIR_TABLE, codes.numpy(), out=p.numpy().reshape(n, half), mode="clip")
        w = p.view(torch.float32).view(n, cols // MX_GROUP, MX_GROUP)
        w.mul_(torch.exp2(exps.float() - 127.0).unsqueeze(-1))
        w = w.view(n, cols)
        if x.dtype != torch.float32:
            w = conv[: n * cols].view(n, cols).copy_(w)
        out[:, r0:r0 + n] = F.linear(x, w)
    return out
