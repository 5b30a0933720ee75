"""Mamba-2's SSD forward on the CPU through the fused C recurrence (recurrences.c here).

Why: the recurrence with its state held as a scalar times a matrix is two multiply-adds per state element
and token, in one pass over a cache-resident strip of the state for every two tokens; the chunked form's
matmuls do more arithmetic and many more passes. It is `ssd_recurrent` in float32, so it equals the
reference up to float32 rounding while the state stays below ~3e35 (float32's own limit is 3.4e38) and
C's entries are 0 or above ~1e-35 in magnitude; a per-token log-decay below -30 is a decay of 0, as in the
chunked form. `forward` returns None where it does not apply (autograd, another device, shapes it cannot
broadcast to its own, an empty dimension, no C compiler, ARCHPROBE_NATIVE=0), and the caller runs the
chunked form.
"""

from __future__ import annotations

import ctypes

import torch

from archprobe.ops.chunking import FLOAT32_EXP_FLOOR
from archprobe.ops.native import library
from archprobe.ops.native.delta_rule import as_float32

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


def forward(x, dt, A, B_, C_, initial_state):
    """(y [B, T, H, P] float32, final state [B, H, P, N] float32), or None where the kernel does not apply."""
    if not applies(x, dt, A, B_, C_, initial_state) or x.dim() != 4 or B_.dim() != 4:
        return None
    Bsz, T, H, P = x.shape
    N = B_.shape[-1]
    if min(Bsz, T, H, P, N) == 0:
        return None
    kernel = _kernel()
    if kernel is None:
        return None
    parts = [as_float32(t, s) for t, s in ((x, (Bsz, T, H, P)), (dt, (Bsz, T, H)), (A, (H,)),
                                          (B_, (Bsz, T, H, N)), (C_, (Bsz, T, H, N)))]
    state = torch.zeros(Bsz, H, P, N) if initial_state is None else as_float32(initial_state, (Bsz, H, P, N))
    if any(t is None for t in parts) or state is None:
        return None
    if initial_state is not None and state.data_ptr() == initial_state.data_ptr():
        state = state.clone()   # the kernel writes the state in place: never into the caller's tensor
    xf, dtf, Af, Bf, Cf = parts
    y = torch.empty(Bsz, T, H, P)
    # a token's decay below exp(floor) is 0, as the chunked form's exp_or_zero makes it
    failed = kernel(xf.data_ptr(), dtf.data_ptr(), Af.data_ptr(), Bf.data_ptr(), Cf.data_ptr(), state.data_ptr(),
                    y.data_ptr(), Bsz, T, H, P, N, FLOAT32_EXP_FLOOR, torch.get_num_threads())
    if failed:
        raise MemoryError("the SSD kernel could not allocate its state strips")
    return y, state
