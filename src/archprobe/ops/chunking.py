"""The chunk-major layout and the exp of a log-decay, for the chunked linear recurrences.

ops.kda.chunked cuts T tokens into N chunks of C and batches every chunk of every (batch, head) pair,
R = B * H, so its inputs go [B, T, H, X] -> [N, R, C, X] once, zero-padded to whole chunks; it takes exps
of log-decay sums (<= 0) that can run far below float32's range. ops.ssd shares the exp floor
(FLOAT32_EXP_FLOOR) and works on views of its inputs instead (ssd.chunked_view), into buffers it keeps.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# The smallest exponent a decay factor keeps. Factors are multiplied with each other and with data, and a
# product below float32's smallest normal (1.2e-38, exp(-87)) is computed in microcode on x86 (10-100x
# slower per operation). With every factor >= exp(-30) ~ 9.4e-14, a product of two factors and two
# data values of 1e-3 is still ~1e-32. The decays this drops are below 1e-13 (relative to exact ones).
EXP_FLOOR = {torch.float64: -600.0}
FLOAT32_EXP_FLOOR = -30.0


def exp_floor(dtype: torch.dtype) -> float:
    return EXP_FLOOR.get(dtype, FLOAT32_EXP_FLOOR)


def decay_exp(x: torch.Tensor) -> torch.Tensor:
    """exp of a log-decay (<= 0), the argument raised to exp_floor: a factor is either exact or one that
    no longer matters (< 1e-13), never small enough for products of it to turn subnormal."""
    return x.clamp(min=exp_floor(x.dtype)).exp()


def chunk_major(x_BTHX: torch.Tensor, chunk: int, dtype: torch.dtype) -> torch.Tensor:
    """[B, T, H, X] -> [N, R, C, X] in `dtype`, zero-padded to whole chunks, in one contiguous copy (even
    where reshape could return a view, B = 1: every later op follows this layout)."""
    B, T, H, X = x_BTHX.shape
    pad = (-T) % chunk
    x = x_BTHX.to(dtype)
    if pad:
        x = F.pad(x, (0, 0, 0, 0, 0, pad))
    N = (T + pad) // chunk
    return x.reshape(B, N, chunk, H, X).permute(1, 0, 3, 2, 4).reshape(N, B * H, chunk, X).contiguous()
