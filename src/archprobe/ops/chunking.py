"""What the chunked linear recurrences (ops.kda.chunked, ops.ssd) share: the chunk-major layout and the
exp of a log-decay.

Both cut T tokens into N chunks of C and batch every chunk of every (batch, head) pair, R = B * H, so
their inputs go [B, T, H, X] -> [N, R, C, X] once, zero-padded to whole chunks. Both take exps of
log-decay sums (<= 0) that can run far below float32's range.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

EXP_FLOOR = -87.0   # below this float32's exp is subnormal or zero, and CPU exp kernels run ~10x slower there


def decay_exp(x: torch.Tensor) -> torch.Tensor:
    """exp of a log-decay (<= 0), arguments below EXP_FLOOR raised to it: the result moves by less than
    exp(-87) ~ 1.6e-38, and the exp stays on the CPU kernels' fast path (measured: ~7x faster over a
    chunk-64 decay range under K3's -5 bound)."""
    return x.clamp(min=EXP_FLOOR).exp()


def chunk_major(x_BTHX: torch.Tensor, chunk: int, dtype: torch.dtype) -> torch.Tensor:
    """[B, T, H, X] -> [N, R, C, X] in `dtype`, zero-padded to whole chunks, in one contiguous copy (even
    where reshape could return a view, B = 1: every later op follows this layout)."""
    B, T, H, X = x_BTHX.shape
    pad = (-T) % chunk
    x = x_BTHX.to(dtype)
    if pad:
        x = F.pad(x, (0, 0, 0, 0, 0, pad))
    N = (T + pad) // chunk
    return x.view(B, N, chunk, H, X).permute(1, 0, 3, 2, 4).reshape(N, B * H, chunk, X).contiguous()
