"""Mamba-2's SSD forward on the CPU through the fused C recurrence (recurrences.c here).

Why: the recurrence with its state held as a scalar times a matrix is two multiply-adds per state element
and token, in one pass over a cache-resident strip of the state for every two tokens; the chunked form's
matmuls do more arithmetic and many more passes. It is `ssd_recurrent` in float32, so it equals the
reference up to float32 rounding while the state stays below ~3e35 (float32's own limit is 3.4e38) and
C's entries are 0 or above ~1e-35 in magnitude; a per-token log-decay below -30 is a decay of 0, as in the
chunked form. `forward` returns None where it does not apply (autograd, another device, shapes other than the
chunked form's, an empty dimension, no C compiler, ARCHPROBE_NATIVE=0), and the caller runs the
chunked form. The scale's log is summed in float64, so slow decays do not drift over long sequences.
"""

from __future__ import annotations

import ctypes

import torch

from archprobe.ops.chunking import FLOAT32_EXP_FLOOR
from archprobe.ops.native import forward_only_on_cpu, kernel
from archprobe.ops.native.delta_rule import float32_inputs

_P, _I = ctypes.c_void_p, ctypes.c_int64


def _kernel():
    return kernel("ssd_forward", [_P, _P, _P, _P, _P, _P, _P, _I, _I, _I, _I, _I, ctypes.c_float, _I])


def forward(x, dt, A, B_, C_, initial_state):
    """(y [B, T, H, P] float32, final state [B, H, P, N] float32), or None where the kernel does not apply."""
    if not forward_only_on_cpu(x, dt, A, B_, C_, initial_state) or x.dim() != 4 or B_.dim() != 4:
        return None
    Bsz, T, H, P = x.shape
    N = B_.shape[-1]
    if min(Bsz, T, H, P, N) == 0:
        return None
    # exactly the shapes the torch form takes (only B and C may be shared over the batch, as there), so a
    # call does not work or fail depending on whether a compiler is present
    if tuple(dt.shape) != (Bsz, T, H) or tuple(A.shape) != (H,) or \
            (initial_state is not None and tuple(initial_state.shape) != (Bsz, H, P, N)):
        return None
    run = _kernel()
    if run is None:
        return None
    prepared = float32_inputs(((x, (Bsz, T, H, P)), (dt, (Bsz, T, H)), (A, (H,)), (B_, (Bsz, T, H, N)),
                               (C_, (Bsz, T, H, N))), initial_state, (Bsz, H, P, N))
    if prepared is None:
        return None
    (xf, dtf, Af, Bf, Cf), state = prepared
    y = torch.empty(Bsz, T, H, P)
    # a token's decay below exp(floor) is 0, as the chunked form's exp_or_zero makes it
    failed = run(xf.data_ptr(), dtf.data_ptr(), Af.data_ptr(), Bf.data_ptr(), Cf.data_ptr(), state.data_ptr(),
                 y.data_ptr(), Bsz, T, H, P, N, FLOAT32_EXP_FLOOR, torch.get_num_threads())
    if failed:
        raise MemoryError("the SSD kernel could not allocate its state strips")
    return y, state
