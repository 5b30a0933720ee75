"""GGUF (ggml) block formats -> float32, in numpy, vectorised over blocks.

Why here: validate and diff read GGUF weights through archprobe's own code (the `gguf` package's
`quants` module is the independent check in tests/, never the implementation). Every function takes
the raw bytes of one tensor and returns float32 of `n` elements, row-major as ggml stores them
(innermost dimension first in ggml order = the last dimension in PyTorch order).

Layouts (per block, little-endian; `d`, `m`, `dmin` are float16 unless noted):
  Q4_0 (32): d, 16 B nibbles (low nibble = element j, high = j+16); x = (q - 8) d
  Q4_1 (32): d, m, 16 B nibbles; x = q d + m
  Q5_0 (32): d, u32 high bits (bit j -> element j), 16 B nibbles; x = (q - 16) d
  Q5_1 (32): d, m, u32 high bits, 16 B nibbles; x = q d + m
  Q8_0 (32): d, 32 x int8; x = q d
  Q2_K (256): 16 B scales (low 4 bits scale, high 4 bits min), 64 B 2-bit codes, d, dmin
  Q3_K (256): 32 B high-bit mask, 64 B 2-bit codes, 12 B packed 6-bit scales (bias 32), d
  Q4_K (256): d, dmin, 12 B packed 6-bit scales and mins (8 sub-blocks of 32), 128 B nibbles
  Q5_K (256): d, dmin, 12 B scales/mins, 32 B high bits, 128 B nibbles
  Q6_K (256): 128 B low nibbles, 64 B 2-bit highs, 16 x int8 scales, d; x = (q - 32) d s
  Q8_K (256): float32 d, 256 x int8, 16 x int16 sums (unused here)
  MXFP4 (32): E8M0 exponent byte, 16 B E2M1 nibbles (low = j, high = j+16); x = e2m1 * 2^(e-127)
  NVFP4 (64): 4 unsigned E4M3 scales (one per 16), 4 x 8 B E2M1 nibbles (low = j, high = j+8 of
              each 16); x = e2m1 * scale (0x7F, E4M3's NaN, reads as 0 as ggml does)
"""

from __future__ import annotations

import numpy as np

from archprobe.errors import ArchprobeError
from archprobe.formats.gguf import ggml_type

QK_K = 256
BLOCKS = {  # type -> (elements per block, bytes per block)
    "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "F64": (1, 8), "I8": (1, 1), "I16": (1, 2), "I32": (1, 4),
    "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34),
    "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210),
    "Q8_K": (256, 292), "MXFP4": (32, 17), "NVFP4": (64, 36),
}
E2M1_DOUBLED = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float32)


class UnsupportedQuant(ArchprobeError):
    """A ggml type archprobe does not dequantize (the IQ and ternary families)."""


def _f16(col: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(col).view(np.float16).astype(np.float32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """[n, k] bytes -> [n, 2k] codes: low nibbles first, then high ones (ggml's element order)."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def _q4_0(b):
    return (_nibbles(b[:, 2:]).astype(np.float32) - 8) * _f16(b[:, :2])


def _q4_1(b):
    return _nibbles(b[:, 4:]).astype(np.float32) * _f16(b[:, :2]) + _f16(b[:, 2:4])


def _high_bits(qh: np.ndarray) -> np.ndarray:
    """[n, 4] bytes of a u32 -> [n, 32] bits (bit j of the little-endian word is element j)."""
    return np.unpackbits(qh, axis=1, bitorder="little")


def _q5_0(b):
    q = _nibbles(b[:, 6:]) | (_high_bits(b[:, 2:6]) << 4)
    return (q.astype(np.float32) - 16) * _f16(b[:, :2])


def _q5_1(b):
    q = _nibbles(b[:, 8:]) | (_high_bits(b[:, 4:8]) << 4)
    return q.astype(np.float32) * _f16(b[:, :2]) + _f16(b[:, 2:4])


def _q8_0(b):
    return b[:, 2:].view(np.int8).astype(np.float32) * _f16(b[:, :2])


def _q2_k(b):
    n = len(b)
    scales, qs = b[:, :16], b[:, 16:80]
    d, dmin = _f16(b[:, 80:82]), _f16(b[:, 82:84])
    # element 128h + 32s + 16k + l: code (qs[32h + 16k + l] >> 2s) & 3, scale index 8h + 2s + k
    q = qs.reshape(n, 2, 1, 32) >> (np.arange(4, dtype=np.uint8) * 2).reshape(1, 1, 4, 1) & 3
    sc = scales.reshape(n, 2, 4, 2, 1)
    dl = d.reshape(n, 1, 1, 1, 1) * (sc & 0xF)
    ml = dmin.reshape(n, 1, 1, 1, 1) * (sc >> 4)
    return (dl * q.reshape(n, 2, 4, 2, 16) - ml).reshape(n, QK_K)


def _q3_k(b):
    n = len(b)
    hmask, qs, packed = b[:, :32], b[:, 32:96], b[:, 96:108]
    d = _f16(b[:, 108:110])
    i = np.arange(16)
    low = np.where(i < 8, packed[:, i % 8] & 0xF, packed[:, i % 8] >> 4)
    high = (packed[:, 8 + i % 4] >> (2 * (i // 4)).astype(np.uint8)) & 3
    sc = (low | (high << 4)).astype(np.float32) - 32                        # [n, 16]
    q = (qs.reshape(n, 2, 1, 32) >> (np.arange(4, dtype=np.uint8) * 2).reshape(1, 1, 4, 1)) & 3
    bit = (np.arange(2).reshape(2, 1) * 4 + np.arange(4).reshape(1, 4)).astype(np.uint8)   # 4h + s
    h = (hmask.reshape(n, 1, 1, 32) >> bit.reshape(1, 2, 4, 1)) & 1
    v = q.astype(np.float32) - np.where(h == 1, 0, 4)
    return (d.reshape(n, 1, 1, 1, 1) * sc.reshape(n, 2, 4, 2, 1) * v.reshape(n, 2, 4, 2, 16)).reshape(n, QK_K)


def _k_scales(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 8 six-bit scales and mins of Q4_K / Q5_K from their 12 packed bytes."""
    sc = np.empty((len(packed), 8), dtype=np.uint8)
    mn = np.empty_like(sc)
    sc[:, :4] = packed[:, :4] & 63
    mn[:, :4] = packed[:, 4:8] & 63
    sc[:, 4:] = (packed[:, 8:12] & 0xF) | ((packed[:, :4] >> 6) << 4)
    mn[:, 4:] = (packed[:, 8:12] >> 4) | ((packed[:, 4:8] >> 6) << 4)
    return sc.astype(np.float32), mn.astype(np.float32)


def _q4_k(b):
    n = len(b)
    d, dmin = _f16(b[:, :2]), _f16(b[:, 2:4])
    sc, mn = _k_scales(b[:, 4:16])
    qs = b[:, 16:144].reshape(n, 4, 1, 32)
    q = np.concatenate([qs & 0xF, qs >> 4], axis=2).reshape(n, 8, 32)     # sub-block 2c low, 2c+1 high
    return (d[:, :, None] * sc[:, :, None] * q - dmin[:, :, None] * mn[:, :, None]).reshape(n, QK_K)


def _q5_k(b):
    n = len(b)
    d, dmin = _f16(b[:, :2]), _f16(b[:, 2:4])
    sc, mn = _k_scales(b[:, 4:16])
    qh = b[:, 16:48].reshape(n, 1, 32)
    qs = b[:, 48:176].reshape(n, 4, 1, 32)
    low = np.concatenate([qs & 0xF, qs >> 4], axis=2).reshape(n, 8, 32)
    high = (qh >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1       # sub-block j: bit j of qh[l]
    q = (low | (high << 4)).astype(np.float32)
    return (d[:, :, None] * sc[:, :, None] * q - dmin[:, :, None] * mn[:, :, None]).reshape(n, QK_K)


def _q6_k(b):
    n = len(b)
    ql = b[:, :128].reshape(n, 2, 2, 32)          # half h, then l / l+32
    qh = b[:, 128:192].reshape(n, 2, 1, 32)
    scales = b[:, 192:208].view(np.int8).astype(np.float32).reshape(n, 2, 4, 2)
    d = _f16(b[:, 208:210])
    low = np.concatenate([ql & 0xF, ql >> 4], axis=2)                      # [n, 2, 4, 32]: q1 q2 q3 q4
    high = (qh >> (np.arange(4, dtype=np.uint8) * 2).reshape(1, 1, 4, 1)) & 3
    q = (low | (high << 4)).astype(np.float32) - 32
    s = np.repeat(scales, 16, axis=3)                                      # element l uses scale l // 16
    return (d.reshape(n, 1, 1, 1) * s * q).reshape(n, QK_K)


def _q8_k(b):
    d = np.ascontiguousarray(b[:, :4]).view(np.float32)
    return b[:, 4:260].view(np.int8).astype(np.float32) * d


def _mxfp4(b):
    scale = np.ldexp(np.float32(1.0), b[:, :1].astype(np.int32) - 128)     # doubled table: 2^(e-127) / 2
    return E2M1_DOUBLED[_nibbles(b[:, 1:])] * scale


def _ue4m3_half(x: np.ndarray) -> np.ndarray:
    """Unsigned E4M3 (bias 7) times 0.5 (the doubled E2M1 table); 0x7F (NaN) reads as 0."""
    exp = (x >> 3).astype(np.int32) & 0xF
    man = (x & 7).astype(np.float32)
    value = np.where(exp == 0, man * 2.0 ** -9, (1 + man / 8) * np.ldexp(np.float32(1.0), exp - 7))
    return np.where((x == 0) | (x == 0x7F), 0.0, value * 0.5).astype(np.float32)


def _nvfp4(b):
    n = len(b)
    scale = _ue4m3_half(b[:, :4]).reshape(n, 4, 1)
    qs = b[:, 4:].reshape(n, 4, 8)
    codes = np.concatenate([qs & 0xF, qs >> 4], axis=2)
    return (E2M1_DOUBLED[codes] * scale).reshape(n, 64)


_BLOCK_FNS = {"Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q8_0": _q8_0, "Q2_K": _q2_k,
              "Q3_K": _q3_k, "Q4_K": _q4_k, "Q5_K": _q5_k, "Q6_K": _q6_k, "Q8_K": _q8_k, "MXFP4": _mxfp4,
              "NVFP4": _nvfp4}
_PLAIN = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I8": np.int8, "I16": np.int16, "I32": np.int32}
CHUNK_BLOCKS = 1 << 16   # blocks per vectorised step: bounds the temporaries (~100 MB for Q2_K)


def nbytes(qtype: str, n: int) -> int:
    """Bytes of `n` elements of `qtype` (n a whole number of blocks)."""
    block, size = _block(qtype)
    if n % block:
        raise ArchprobeError(f"{n:,} elements is not a whole number of {qtype} blocks of {block}")
    return n // block * size


def _block(qtype: str) -> tuple[int, int]:
    qtype = ggml_type(qtype)
    if qtype not in BLOCKS:
        raise UnsupportedQuant(f"ggml type {qtype} is not dequantized by archprobe "
                               f"(supported: {', '.join(BLOCKS)})")
    return BLOCKS[qtype]


def dequantize(raw, qtype: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """float32 values of the ggml tensor whose bytes are `raw` (bytes, memoryview or uint8 array),
    reshaped to `shape` (PyTorch order) when given."""
    qtype = ggml_type(qtype)
    block, size = _block(qtype)
    data = np.frombuffer(raw, dtype=np.uint8) if not isinstance(raw, np.ndarray) else raw.reshape(-1).view(np.uint8)
    if len(data) % size:
        raise ArchprobeError(f"{len(data):,} bytes is not a whole number of {qtype} blocks of {size} bytes")
    if qtype in _PLAIN:
        out = data.view(_PLAIN[qtype]).astype(np.float32)
    elif qtype == "BF16":
        out = (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        blocks = data.reshape(-1, size)
        out = np.empty(len(blocks) * block, dtype=np.float32)
        fn = _BLOCK_FNS[qtype]
        for at in range(0, len(blocks), CHUNK_BLOCKS):
            part = blocks[at:at + CHUNK_BLOCKS]
            out[at * block:(at + len(part)) * block] = fn(part).reshape(-1)
    if shape is not None:
        if int(np.prod(shape)) != out.size:
            raise ArchprobeError(f"{out.size:,} {qtype} values do not fill shape {list(shape)}")
        out = out.reshape(shape)
    return out
