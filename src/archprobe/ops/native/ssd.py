"""Mamba-2's SSD forward on the CPU through the fused C recurrence (recurrences.c here).

Why: the recurrence with its state held as a scalar times a matrix is two multiply-adds per state element
and token, in one pass over a cache-resident strip of the state for every two tokens; the chunked form's
matmuls do more arithmetic and many more passes. It is `ssd_recurrent` in float32, so it equals the
reference up to float32 rounding. `forward` returns None where it does not apply (autograd, another
device, no C compiler, ARCHPROBE_NATIVE=0), and the caller runs the chunked form.
"""

from __future__ import annotations

import ctypes

import torch

from archprobe.ops.chunking import FLOAT32_EXP_FLOOR
from archprobe.ops.native import library

_P, _I = ctypes.c_void_p, ctypes.c_int64


def _kernel():
    lib = library("recurrences")
    if lib is None:
        return None
    f = lib.ssd_forward
    f.argtypes = [_P, _P, _P, _P, _P, _P, _P, _I, _I, _I, _I, _I, ctypes.c_float, _I]
    f.restype = ctypes.c_int
    return f


def applies(*tensors) -> bool:
    """Forward only (nothing needs a gradient), on the CPU."""
    present = [x for x in tensors if x is not None]
    if any(x.device.type != "cpu" for x in present):
        return False
    return not (torch.is_grad_enabled() and any(x.requires_grad for x in present))


def _checked_shapes(x, dt, A, B_, C_, initial_state):
    """(B, T, H, P, N); the C loop trusts these, so any mismatch is an error here."""
    if x.dim() != 4:
        raise ValueError(f"x must be [B, T, H, P], got {tuple(x.shape)}")
    Bsz, T, H, P = x.shape
    if tuple(dt.shape) != (Bsz, T, H) or tuple(A.shape) != (H,):
        raise ValueError(f"dt must be [B, T, H] = {(Bsz, T, H)} and A [H] = {(H,)}, got {tuple(dt.shape)}, "
                         f"{tuple(A.shape)}")
    if B_.dim() != 4 or B_.shape[:3] != x.shape[:3] or C_.shape != B_.shape:
        raise ValueError(f"B and C must be [B, T, H, N] alike, got {tuple(B_.shape)}, {tuple(C_.shape)}")
    N = B_.shape[-1]
    if initial_state is not None and tuple(initial_state.shape) != (Bsz, H, P, N):
        raise ValueError(f"initial_state must be [B, H, P, N] = {(Bsz, H, P, N)}, got {tuple(initial_state.shape)}")
    return Bsz, T, H, P, N


def forward(x, dt, A, B_, C_, initial_state):
    """(y [B, T, H, P] float32, final state [B, H, P, N] float32), or None where the kernel does not apply."""
    if not applies(x, dt, A, B_, C_, initial_state):
        return None
    Bsz, T, H, P, N = _checked_shapes(x, dt, A, B_, C_, initial_state)
    kernel = _kernel()
    if kernel is None:
        return None
    xf, dtf, Af, Bf, Cf = (t.to(torch.float32).contiguous() for t in (x, dt, A, B_, C_))
    state = (torch.zeros(Bsz, H, P, N) if initial_state is None
             else initial_state.to(torch.float32).clone(memory_format=torch.contiguous_format))
    y = torch.empty(Bsz, T, H, P)
    # a token's decay below exp(floor) is 0, as the chunked form's exp_or_zero makes it
    failed = kernel(xf.data_ptr(), dtf.data_ptr(), Af.data_ptr(), Bf.data_ptr(), Cf.data_ptr(), state.data_ptr(),
                    y.data_ptr(), Bsz, T, H, P, N, FLOAT32_EXP_FLOOR, torch.get_num_threads())
    if failed:
        raise MemoryError("the SSD kernel could not allocate its state strips")
    return y, state
