"""KDA and Gated DeltaNet forward on the CPU through the fused C recurrence (recurrences.c here).

Why: on a CPU the chunked form's many torch calls and passes cost more than its matmuls save; the
recurrence fused into one pass over the state per token, with the state's strips held in cache, ran
3-10x faster than the chunked form at T=8192 (benchmarks/kda.py). It is the recurrence of `kda_recurrent`
in float32, so it equals the reference up to float32 rounding, at every decay.
`forward` returns None where it does not apply (autograd, another device or dtype, no C compiler,
ARCHPROBE_NATIVE=0), and the caller runs the chunked form.
"""

from __future__ import annotations

import ctypes

import torch

from archprobe.ops.chunking import FLOAT32_EXP_FLOOR
from archprobe.ops.native import library

_P, _I = ctypes.c_void_p, ctypes.c_int64
MAX_KEY_DIM = 1 << 16   # a strip holds K rows; past this the chunked form runs


def _kernel():
    lib = library("recurrences")
    if lib is None:
        return None
    f = lib.delta_rule_forward
    f.argtypes = [_P, _P, _P, _P, _I, _P, _P, _P, _I, _I, _I, _I, _I, ctypes.c_float, ctypes.c_float, _I]
    f.restype = ctypes.c_int
    return f


def applies(*tensors) -> bool:
    """Forward only (nothing needs a gradient), on the CPU, computing in float32."""
    present = [x for x in tensors if x is not None]
    if any(x.device.type != "cpu" for x in present):
        return False
    if torch.is_grad_enabled() and any(x.requires_grad for x in present):
        return False
    return present[0].dtype != torch.float64


def _checked_shapes(q, k, v, g, beta, initial_state):
    """(B, T, H, K, V, per_channel); the C loop trusts these, so any mismatch is an error here."""
    if q.dim() != 4 or k.shape != q.shape or v.dim() != 4 or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"q, k [B, T, H, K] and v [B, T, H, V] disagree: {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    B, T, H, K = q.shape
    V = v.shape[-1]
    if g.shape[:3] != (B, T, H) or g.dim() != 4 or g.shape[-1] not in (1, K):
        raise ValueError(f"g must be [B, T, H, K] or one decay per head, got {tuple(g.shape)} for q {tuple(q.shape)}")
    if tuple(beta.shape) != (B, T, H):
        raise ValueError(f"beta must be [B, T, H] = {(B, T, H)}, got {tuple(beta.shape)}")
    if initial_state is not None and tuple(initial_state.shape) != (B, H, K, V):
        raise ValueError(f"initial_state must be [B, H, K, V] = {(B, H, K, V)}, got {tuple(initial_state.shape)}")
    return B, T, H, K, V, g.shape[-1] == K


def forward(q, k, v, g, beta, scale: float, initial_state):
    """(o [B, T, H, V] in q's dtype, final state [B, H, K, V] float32), or None where the kernel does
    not apply. g: [B, T, H, K] or [B, T, H, 1] (one decay per head)."""
    if not applies(q, k, v, g, beta, initial_state) or q.shape[-1] > MAX_KEY_DIM:
        return None
    B, T, H, K, V, per_channel = _checked_shapes(q, k, v, g, beta, initial_state)
    kernel = _kernel()
    if kernel is None:
        return None
    qf, kf, vf, gf, bf = (x.to(torch.float32).contiguous() for x in (q, k, v, g, beta))
    state = (torch.zeros(B, H, K, V) if initial_state is None
             else initial_state.to(torch.float32).clone(memory_format=torch.contiguous_format))
    out = torch.empty(B, T, H, V)
    # each token's decay is exp(max(g, floor)) inside the loop, floored as the chunked form's factors are
    failed = kernel(qf.data_ptr(), kf.data_ptr(), vf.data_ptr(), gf.data_ptr(), int(per_channel),
                    bf.data_ptr(), state.data_ptr(), out.data_ptr(), B, T, H, K, V, float(scale),
                    FLOAT32_EXP_FLOOR, torch.get_num_threads())
    if failed:
        raise MemoryError("the delta-rule kernel could not allocate its state strips")
    return out.to(q.dtype), state
