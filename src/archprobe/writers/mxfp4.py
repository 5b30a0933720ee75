"""MXFP4 in the compressed-tensors `mxfp4-pack-quantized` layout, in numpy (no torch).

`weight_packed` U8 [out, in/2]: byte j of a row holds logical columns 2j (low nibble) and 2j+1 (high
nibble); a nibble is an E2M1 code (bit 3 sign, bits 0-2 index {0, .5, 1, 1.5, 2, 3, 4, 6}).
`weight_scale` U8 [out, in/32]: E8M0, value 2^(byte - 127). See spec/kimi-k3.md section 1.3.
"""

from __future__ import annotations

import numpy as np

E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)
GROUP = 32


def quantize_mxfp4(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Round a float [out, in] matrix (in % 32 == 0) to MXFP4; returns (packed U8, scale U8)."""
    w = np.asarray(w, dtype=np.float32)
    out, inp = w.shape
    if inp % GROUP:
        raise ValueError(f"input width {inp} is not a multiple of {GROUP}")
    groups = w.reshape(out, inp // GROUP, GROUP)
    amax = np.abs(groups).max(axis=-1)
    # shared exponent: the largest power of two with amax / 2^e <= 6 (E2M1's largest magnitude)
    exp = np.where(amax > 0, np.ceil(np.log2(np.maximum(amax, 1e-38) / 6.0)), -127).astype(np.int32)
    exp = np.clip(exp, -127, 127)
    scaled = groups / np.exp2(exp)[..., None].astype(np.float32)
    mag = np.abs(scaled)[..., None]
    code = np.abs(mag - E2M1_VALUES).argmin(axis=-1).astype(np.uint8)
    code |= (scaled < 0).astype(np.uint8) << 3
    code = code.reshape(out, inp)
    packed = (code[:, 0::2] | (code[:, 1::2] << 4)).astype(np.uint8)
    return packed, (exp + 127).astype(np.uint8)


def dequantize_mxfp4_np(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The float32 [out, in] matrix that (packed, scale) encode."""
    packed = np.asarray(packed, dtype=np.uint8)
    codes = np.empty((packed.shape[0], packed.shape[1] * 2), dtype=np.uint8)
    codes[:, 0::2] = packed & 0x0F
    codes[:, 1::2] = packed >> 4
    values = E2M1_VALUES[codes & 7] * np.where(codes & 8, -1.0, 1.0).astype(np.float32)
    factors = np.exp2(scale.astype(np.float32) - 127.0)
    return values * np.repeat(factors, GROUP, axis=1)
