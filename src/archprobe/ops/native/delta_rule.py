"""KDA and Gated DeltaNet forward on the CPU through the fused C recurrence (recurrences.c here).

Why: on a CPU the chunked form's many torch calls and passes cost more than its matmuls save; the
recurrence fused into one pass over the state per token, with the state's strips held in cache, ran
2.5-5x faster than the chunked form at T=8192 (benchmarks/kda.py). It is the recurrence of `kda_recurrent`
in float32, so it equals the reference up to float32 rounding; a per-token log-decay below exp's floor
(-30, as in the chunked form) is a decay of exactly 0, and values below float32's smallest normal
(1.2e-38) count as 0 (flush-to-zero in the kernel's threads).
`forward` returns None where it does not apply (autograd, another device or dtype, shapes it cannot
broadcast to its own, an empty dimension, no C compiler, ARCHPROBE_NATIVE=0), and the caller runs the
chunked form, which answers such inputs as it always did.
"""

from __future__ import annotations

import ctypes
import math

import torch

from archprobe.ops.chunking import FLOAT32_EXP_FLOOR
from archprobe.ops.native import forward_only_on_cpu, kernel

_P, _I = ctypes.c_void_p, ctypes.c_int64
MAX_KEY_DIM = 1 << 16   # a strip holds K rows; past this the chunked form runs
FLOAT32_MAX = 3.4028234663852886e38


def _kernel():
    return kernel("delta_rule_forward",
                  [_P, _P, _P, _P, _I, _P, _P, _P, _I, _I, _I, _I, _I, ctypes.c_float, ctypes.c_float, _I])


def applies(*tensors) -> bool:
    """Forward only, on the CPU, computing in float32 (float64 inputs keep their float64 chunked form)."""
    return forward_only_on_cpu(*tensors) and tensors[0].dtype != torch.float64


def as_float32(x: torch.Tensor, shape: tuple) -> torch.Tensor | None:
    """x broadcast to `shape` as one contiguous float32 block (negation and conjugation bits resolved), or
    None where it does not broadcast: the C loop reads exactly this layout."""
    try:
        x = torch.broadcast_to(x, shape)
    except RuntimeError:
        return None
    return x.resolve_neg().resolve_conj().to(torch.float32).contiguous()


def float32_inputs(pairs, initial_state, state_shape: tuple):
    """Each (tensor, shape) through `as_float32`, and the state the kernel updates in place (zeros, or a
    float32 copy of the caller's, never the caller's own tensor); None where any does not broadcast."""
    parts = [as_float32(x, shape) for x, shape in pairs]
    state = torch.zeros(state_shape) if initial_state is None else as_float32(initial_state, state_shape)
    if any(x is None for x in parts) or state is None:
        return None
    if initial_state is not None and state.data_ptr() == initial_state.data_ptr():
        state = state.clone()
    return parts, state


def forward(q, k, v, g, beta, scale: float, initial_state):
    """(o [B, T, H, V] in q's dtype, final state [B, H, K, V] float32), or None where the kernel does
    not apply. g: [B, T, H, K] or [B, T, H, 1] (one decay per head)."""
    if not applies(q, k, v, g, beta, initial_state) or q.dim() != 4 or v.dim() != 4 or g.dim() != 4:
        return None
    B, T, H, K = q.shape
    V = v.shape[-1]
    if min(B, T, H, K, V) == 0 or K > MAX_KEY_DIM or not math.isfinite(scale) or abs(scale) > FLOAT32_MAX:
        return None
    run = _kernel()
    if run is None:
        return None
    per_channel = g.shape[-1] != 1 or K == 1
    prepared = float32_inputs(((q, (B, T, H, K)), (k, (B, T, H, K)), (v, (B, T, H, V)),
                               (g, (B, T, H, K if per_channel else 1)), (beta, (B, T, H))), initial_state, (B, H, K, V))
    if prepared is None:
        return None
    (qf, kf, vf, gf, bf), state = prepared
    out = torch.empty(B, T, H, V)
    failed = run(qf.data_ptr(), kf.data_ptr(), vf.data_ptr(), gf.data_ptr(), int(per_channel), bf.data_ptr(),
                 state.data_ptr(), out.data_ptr(), B, T, H, K, V, float(scale), FLOAT32_EXP_FLOOR,
                 torch.get_num_threads())
    if failed:
        raise MemoryError("the delta-rule kernel could not allocate its state strips")
    return out.to(q.dtype), state
