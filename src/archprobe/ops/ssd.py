"""Mamba-2's state-space recurrence (SSD), in its recurrent reference form and chunked.

Mamba-2, arXiv 2405.21060, section 6 (the SSD algorithm). Per head, with a scalar log-decay
a_t = dt_t * A <= 0 per token, input u_t = dt_t x_t [P], key B_t [N] and query C_t [N]:

    S_t = exp(a_t) S_{t-1} + u_t B_t^T        (state [P, N], float32)
    y_t = S_t C_t

Chunked over C tokens, with cum the in-chunk cumulative sum of a (inclusive) and seg[r, s] = cum_r - cum_s:

    y   = ((C B^T) * L) U + exp(cum) (C S_prev^T),     L[r, s] = exp(seg[r, s]) for s <= r, else 0
    S   = exp(cum_last) S_prev + (exp(cum_last - cum) U)^T B

How the fast form (no autograd) stays exact and cheap:
- cum is summed in float64 and split into hi (its float32 rounding) and a tiny rest lo. seg = hi_r - hi_s is
  then one float32 subtraction of two nearby numbers (exact where it matters, |seg| <= 30), and the rest's
  factors exp(lo_r), exp(-lo_s) ride on per-token vectors (C's rows and U). A float32 cum_r - cum_s would
  lose 5 digits at a decay sum of ~1000; summing every segment directly costs a cumsum over [C, C].
- Every exp whose argument is below the float32 floor (exp(-30) ~ 1e-13) is exactly 0, never subnormal.
- Mild decays (a chunk's decay within 2^-40) skip the [C, C] exps: exp(seg) = exp(cum_r - cum_0) exp(cum_0 -
  cum_s) is put on C and B, which are copied into the chunk layout anyway, and C B^T is masked by tril.
- Each chunk's own state (its B^T times U decayed to the chunk's end), the read-out C S_prev^T and the intra
  products are batched matmuls over all chunks of a segment; the sequential part is one fused multiply-add
  per chunk on the state (S_{n+1} = d_n S_n + local_n, in place in the buffer the read-out reads).
- Long sequences run as a chain of segments sized to stay in cache, in buffers kept between calls.
The autograd form is the same algorithm in out-of-place ops with its decays in float64.
The D skip, the gate and the norm stay in the module (nn/mamba2.py).
Legend: B batch, T tokens, H heads, P head dim, N state size, C chunk size, R = B * H, NC chunks.
"""

from __future__ import annotations

import math
import threading

import torch
import torch.nn.functional as F

from archprobe.ops.chunking import FLOAT32_EXP_FLOOR
from archprobe.ops.native import ssd as native_ssd

LOG2E = 1.0 / math.log(2.0)
FLOOR2 = FLOAT32_EXP_FLOOR * LOG2E   # the exp floor in log2 units: exp2 runs ~3x faster than exp on CPU


def ssd_recurrent(x_BTHP, dt_BTH, A_H, B_BTHN, C_BTHN, *, initial_state=None, output_final_state=False):
    """The definition, token by token. Returns (y [B, T, H, P] float32, final state [B, H, P, N] or None)."""
    Bsz, T, H, P = x_BTHP.shape
    N = B_BTHN.shape[-1]
    x, dt, Bm, Cm = (t.float() for t in (x_BTHP, dt_BTH, B_BTHN, C_BTHN))
    S = initial_state.float().clone() if initial_state is not None else x.new_zeros(Bsz, H, P, N)
    decay = torch.exp(dt * A_H.float())                                           # [B, T, H]
    ys = []
    for t in range(T):
        S = S * decay[:, t, :, None, None] + (dt[:, t, :, None] * x[:, t]).unsqueeze(-1) * Bm[:, t].unsqueeze(-2)
        ys.append(torch.einsum("bhpn,bhn->bhp", S, Cm[:, t]))
    y = torch.stack(ys, 1) if ys else x.new_zeros(Bsz, 0, H, P)
    return y, (S if output_final_state else None)


SEGMENT_BYTES = 2 << 20   # a segment's x, B and C in float32 (its buffers are ~3x that), at 1 thread


# The op's chunk when the caller gives none (FLOPs per token and head 2C(N + P) + 4NP, so smaller chunks cost
# less but run smaller matmuls and more sequential steps). Measured at H=4, P=N=64 and H=8, P=64, N=128, fp32
# CPU time at 1 thread: 32 ran ~1.25x 16 and 1.0-1.15x 48 or 64; at 2 threads the three larger sizes were
# within the shared host's noise.
DEFAULT_CHUNK = 32


def segment_tokens(R: int, P: int, N: int, chunk: int) -> int:
    """Tokens per segment (a whole number of chunks): the segment's buffers stay in cache and its ops are
    long enough to amortise their dispatch. Measured on a 2-core host: 1.5-2 MB of inputs best at 1 thread,
    3 MB at 2 (each thread works on half of every op); more threads are untested and get 2's size."""
    budget = SEGMENT_BYTES + (min(torch.get_num_threads(), 2) - 1) * SEGMENT_BYTES // 2
    tokens = budget // max(1, R * (P + 2 * N) * 4)
    return max(chunk, tokens // chunk * chunk)


def ssd_chunked(x_BTHP, dt_BTH, A_H, B_BTHN, C_BTHN, *, initial_state=None, output_final_state=False,
                chunk_size=None):
    """Same contract as `ssd_recurrent`: the chunked (matmul) form. chunk_size: tokens per chunk, or None
    for the op's own choice: forward-only on the CPU, the fused C recurrence (`native.ssd.forward`, no
    chunk), else DEFAULT_CHUNK. Long sequences run as a chain of segments with the state carried across
    (exact), so the working memory does not grow with T."""
    Bsz, T, H, P = x_BTHP.shape
    N = B_BTHN.shape[-1]
    if T == 0:
        return ssd_recurrent(x_BTHP, dt_BTH, A_H, B_BTHN, C_BTHN, initial_state=initial_state,
                             output_final_state=output_final_state)
    if chunk_size is None:   # the op's choice: the fused recurrence where it applies, else DEFAULT_CHUNK
        fused = native_ssd.forward(x_BTHP, dt_BTH, A_H, B_BTHN, C_BTHN, initial_state)
        if fused is not None:
            return fused[0], (fused[1] if output_final_state else None)
    C = DEFAULT_CHUNK if chunk_size is None else int(chunk_size)
    if C < 1:
        raise ValueError(f"chunk_size {chunk_size} must be a positive number of tokens")
    R = Bsz * H
    A_R = A_H.float().repeat(Bsz)                                                  # [R], r = b * H + h
    S_T = (initial_state.float().reshape(R, P, N).mT.contiguous() if initial_state is not None
           else x_BTHP.new_zeros(R, N, P, dtype=torch.float32))                   # the state, transposed
    grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                           for t in (x_BTHP, dt_BTH, A_H, B_BTHN, C_BTHN, initial_state))
    L = segment_tokens(R, P, N, C)
    if grad:
        parts = []
        for start in range(0, T, L):
            seg = slice(start, start + L)
            y, S_T = _segment_autograd(x_BTHP[:, seg], dt_BTH[:, seg], A_R, B_BTHN[:, seg], C_BTHN[:, seg], S_T, C)
            parts.append(y)
        out = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
    else:
        out, S_T = _chunked_inplace(x_BTHP, dt_BTH, A_R, B_BTHN, C_BTHN, S_T, C, L)
    return out, (S_T.mT.reshape(Bsz, H, P, N).contiguous() if output_final_state else None)


def chunked_view(t_BTHX: torch.Tensor, C: int) -> torch.Tensor:
    """[B, T, H, X] -> a [NC, B, H, C, X] view (no copy), zero-padded first when T is not whole chunks."""
    Bsz, T, H, X = t_BTHX.shape
    pad = (-T) % C
    if pad:
        t_BTHX = F.pad(t_BTHX, (0, 0, 0, 0, 0, pad))
    return t_BTHX.view(Bsz, (T + pad) // C, C, H, X).permute(1, 0, 3, 2, 4)


def in_chunk_decay_sums(dt_BTH, A_R, C):
    """(dt [NC, R, C] float32, cum [NC, R, C] float64): the in-chunk cumulative log-decay of one segment,
    summed in float64 from the float32 products dt * A the recurrence uses."""
    Bsz, T, H = dt_BTH.shape
    dt = chunked_view(dt_BTH.float().unsqueeze(-1), C).reshape(-1, Bsz * H, C)
    return dt, (dt * A_R[:, None]).double().cumsum(-1)


def exp_or_zero(log_e):
    """exp(log_e) where log_e >= the float32 floor, else exactly 0; as float32 [..., 1]. Computed in float64,
    so no float32 product of it can turn subnormal."""
    return torch.where(log_e >= FLOAT32_EXP_FLOOR, torch.exp(log_e), 0.0).float().unsqueeze(-1)


FACTOR_SPAN2 = 40.0   # log2 units: chunks whose decay spans less than 2^-40 take the factored form


def decay_factors(dt_BTH, A_R, C):
    """The per-token factors of a sequence (see the module docstring), float32, chunk-major, [NC, R, C, 1]:
    hi, the in-chunk decay sum in log2 units; f_x [2, NC, R, C, 1] = (dt exp(-lo), that times
    exp(cum_last - cum + lo)), for x in the intra-chunk product and in the state update; f_C, for C (exp(lo));
    f_B, for B (None: B as it is); f_read, for the read-out rows (exp(cum - lo)); d [NC, R, 1, 1] =
    exp(cum_last), the decay over the whole chunk. Only the sum runs in float64: with hi and lo apart, every
    factor is a float32 exp2 of a difference of two hi (exact where it matters) or of a tiny lo. Below the
    floor a factor is exactly 0.
    Factored (when every chunk's decay spans at most 2^-FACTOR_SPAN2, as mild decays do): the decay from s to
    r is split exp(cum_r - cum_0) exp(cum_0 - cum_s) onto C and B (factors within 2^-40..2^40, no [C, C]
    exp), so U's state-update factor and the read-out's are one number per chunk."""
    dt, cum = in_chunk_decay_sums(dt_BTH, A_R, C)                                # [NC, R, C]
    c2 = cum.mul_(LOG2E)                                                           # in log2 units
    hi = c2.float()
    f_lo = torch.exp2(c2.sub_(hi).float())                                         # exp(lo), ~1
    NC, R = dt.shape[:2]
    f_x = dt.new_empty(2, NC, R, C)
    torch.div(dt, f_lo, out=f_x[0])
    hi_first, hi_last = hi[..., :1], hi[..., -1:]
    d = F.threshold(hi_last, FLOOR2, -float("inf")).exp2_().mul_(f_lo[..., -1:])
    if (hi_first - hi_last).max() <= FACTOR_SPAN2:
        rel = hi - hi_first                                                        # in [-40, 0]
        f_C = torch.exp2(rel).mul_(f_lo)
        f_B = torch.exp2(rel.neg_())
        torch.mul(f_x[0], torch.exp2(hi_last - hi_first).mul_(f_lo[..., -1:]), out=f_x[1])
        f_read = F.threshold(hi_first, FLOOR2, -float("inf")).exp2_()             # [NC, R, 1]
        f_B = f_B.unsqueeze(-1)
    else:
        to_end = F.threshold_(torch.sub(hi_last, hi, out=f_x[1]), FLOOR2, -float("inf")).exp2_()
        to_end.mul_(f_lo[..., -1:]).mul_(f_x[0])
        f_C, f_B, f_read = f_lo, None, F.threshold(hi, FLOOR2, -float("inf")).exp2_()
    return (hi.unsqueeze(-1), f_x.unsqueeze(-1), f_C.unsqueeze(-1), f_B, f_read.unsqueeze(-1),
            d.unsqueeze(-1))


def causal_mask(C: int, device) -> torch.Tensor:
    """[C, C]: 0 on and below the diagonal, -inf above (added to a log-decay, it zeroes the future)."""
    return torch.zeros(C, C, device=device).masked_fill_(torch.ones(C, C, dtype=torch.bool, device=device).triu_(1),
                                                         -float("inf"))


class Workspace(threading.local):
    """The no-grad path's buffers, kept per thread between calls: a fresh large temporary costs a page
    fault per 4 KB on first touch (measured: a quarter of the op's time at T = 8192). Capped in size."""
    limit_bytes = 64 << 20

    def __init__(self):
        self.flat = torch.empty(0)

    def views(self, *shapes, device=None) -> list[torch.Tensor]:
        """Contiguous float32 tensors of these shapes, carved from one buffer (reused when it fits; kept only
        for the CPU)."""
        sizes = [math.prod(s) for s in shapes]
        total = sum(sizes)
        flat = self.flat
        if flat.numel() < total or flat.device != torch.device(device or "cpu"):
            flat = torch.empty(total, device=device)
            if total * 4 <= self.limit_bytes and flat.device.type == "cpu":
                self.flat = flat
        out, at = [], 0
        for shape, n in zip(shapes, sizes, strict=True):
            out.append(flat[at:at + n].view(shape))
            at += n
        return out


WORKSPACE = Workspace()


def _chunked_inplace(x_BTHP, dt_BTH, A_R, B_BTHN, C_BTHN, S_T, C, L):
    """The whole sequence without autograd: the factors once, the buffers and their views once, then segment
    after segment of L tokens, each written into `out`."""
    Bsz, T, H, P = x_BTHP.shape
    N = B_BTHN.shape[-1]
    R = Bsz * H
    hi, f_x, f_C, f_B, f_read, d = decay_factors(dt_BTH, A_R, C)
    NC = hi.shape[0]
    f_x, f_C = f_x.view(2, NC, Bsz, H, C, 1), f_C.view(NC, Bsz, H, C, 1)
    f_B = None if f_B is None else f_B.view(NC, Bsz, H, C, 1)
    d_n = d.unbind(0)
    mask = causal_mask(C, hi.device)
    out = x_BTHP.new_empty(Bsz, T, H, P, dtype=torch.float32)
    M = min(L, NC * C) // C                                                        # chunks per segment
    bufs = WORKSPACE.views((M + 1, R, N, P), (M, R, C, C), (M, R, C, C), (2, M, Bsz, H, C, P),
                           (M, Bsz, H, C, N), (M, Bsz, H, C, N), (M, R, C, P), device=x_BTHP.device)
    views = {}
    bufs[0][0] = S_T
    for start in range(0, T, L):
        seg = slice(start, start + L)
        x6, B6, C6 = (chunked_view(t[:, seg].float(), C) for t in (x_BTHP, B_BTHN, C_BTHN))
        m = x6.shape[0]
        v = views.get(m) or views.setdefault(m, SegmentViews(bufs, m, Bsz, H, C, N, P))
        if start:
            v.S[0].copy_(bufs[0][M])   # the state after the last segment (a full one)
        c0 = start // C
        cs = slice(c0, c0 + m)
        fac = (hi[cs], f_x[:, cs], f_C[cs], None if f_B is None else f_B[cs], f_read[cs], d_n[cs])
        _segment(x6, B6, C6, fac, mask, v, out[:, seg])
    return out, v.S[m].clone()


class SegmentViews:
    """The views of the buffers one segment of m chunks works in, made once per call and size."""

    def __init__(self, bufs, m, Bsz, H, C, N, P):
        states, G, decay, x2, Bc, Cc, y = bufs
        R = Bsz * H
        self.S = states[:m + 1].unbind(0)                        # the state at each chunk's start, then the last
        self.local, self.prev = states[1:m + 1].view(m * R, N, P), states[:m].view(m * R, N, P)
        self.G, self.G4, self.decay = G[:m].view(m * R, C, C), G[:m].view(m, R, C, C), decay[:m]
        self.x2 = x2[:, :m]
        self.u, self.u_to_end = self.x2.view(2, m * R, C, P)
        self.Bc, self.Cc = Bc[:m], Cc[:m]
        self.B3, self.C3 = self.Bc.view(m * R, C, N), self.Cc.view(m * R, C, N)
        self.y, self.y4, self.y6 = y[:m].view(m * R, C, P), y[:m].view(m, R, C, P), y[:m].view(m, Bsz, H, C, P)


def _segment(x6, B6, C6, fac, mask, v, out_BTHP):
    """One segment of m chunks from the state in v.S[0], in the buffers of v: y into out_BTHP, the state at
    every chunk's start into v.S (after the last one in v.S[m]). f_B is None unless factored."""
    hi, f_x, f_C, f_B, f_read, d_n = fac
    torch.mul(x6, f_x, out=v.x2)                                                   # (U, U exp(last - cum))
    torch.mul(C6, f_C, out=v.Cc)
    if f_B is None:
        v.Bc.copy_(B6)
    else:
        torch.mul(B6, f_B, out=v.Bc)
    G = torch.bmm(v.C3, v.B3.mT, out=v.G)
    if f_B is None:
        torch.sub(hi, hi.mT, out=v.decay).add_(mask)                               # log2 decay from s to r
        F.threshold_(v.decay, FLOOR2, -float("inf")).exp2_()
        v.G4.mul_(v.decay)
    else:
        G.tril_()
    torch.bmm(v.B3.mT, v.u_to_end, out=v.local)                                    # each chunk's own state
    for S_next, S, d in zip(v.S[1:], v.S[:-1], d_n, strict=True):   # sequential: S_{n+1} = local_n + d_n S_n
        S_next.addcmul_(S, d)
    torch.bmm(v.C3, v.prev, out=v.y)                                               # the read-out
    v.y4.mul_(f_read)
    v.y.baddbmm_(G, v.u)
    m, Bsz, H, C, P = v.y6.shape
    T = out_BTHP.shape[1]
    if m * C == T:   # straight into the caller's layout
        out_BTHP.view(Bsz, m, C, H, P).permute(1, 0, 3, 2, 4).copy_(v.y6)
    else:            # the last, padded segment
        out_BTHP.copy_(v.y6.permute(1, 0, 3, 2, 4).reshape(Bsz, m * C, H, P)[:, :T])


def _segment_autograd(x_BTHP, dt_BTH, A_R, B_BTHN, C_BTHN, S_T, C):
    """The same segment in out-of-place ops, for autograd: returns (y [B, T, H, P], the state after it).
    Its decays come straight from the float64 sums (no hi/lo split): a float32 hi_r - hi_s would pass its
    diagonal's large, cancelling gradients through float32 sums (dA off by 8e-5 at strong decay)."""
    Bsz, T, H, P = x_BTHP.shape
    R = Bsz * H
    dt, cum = in_chunk_decay_sums(dt_BTH, A_R, C)
    NC = cum.shape[0]
    x, Bm, Cm = (chunked_view(t.float(), C).reshape(NC, R, C, -1) for t in (x_BTHP, B_BTHN, C_BTHN))
    seg = cum.unsqueeze(-1) - cum.unsqueeze(-2) + causal_mask(C, cum.device).double()
    decay = F.threshold(seg, FLOAT32_EXP_FLOOR, -float("inf")).exp().float()
    u = x * dt.unsqueeze(-1)
    y = ((Cm @ Bm.mT) * decay) @ u
    last = cum[..., -1:]
    local = (Bm * exp_or_zero(last - cum)).mT @ u
    q, d = Cm * exp_or_zero(cum), exp_or_zero(last)
    reads = []
    for n in range(NC):
        reads.append(q[n] @ S_T)
        S_T = S_T * d[n] + local[n]
    y = (y + torch.stack(reads)).view(NC, Bsz, H, C, P).permute(1, 0, 3, 2, 4).reshape(Bsz, NC * C, H, P)
    return y[:, :T], S_T
