"""Mamba-2's state-space recurrence (SSD), in its recurrent reference form and chunked.

Mamba-2, arXiv 2405.21060, section 6 (the SSD algorithm). Per head, with a scalar log-decay
a_t = dt_t * A <= 0 per token, input u_t = dt_t x_t [P], key B_t [N] and query C_t [N]:

    S_t = exp(a_t) S_{t-1} + u_t B_t^T        (state [P, N], float32)
    y_t = S_t C_t

Chunked over C tokens, with seg[r, s] the sum of a over (s, r] (one number per token pair and head,
summed directly, see `segment_sums`) and cum the in-chunk cumsum of a:

    y   = ((C B^T) * L) U + exp(cum) (C S_prev^T),     L[r, s] = exp(seg[r, s]) for s <= r, else 0
    S   = exp(cum_last) S_prev + (L[last, :] U)^T B

Everything but the state line is batched over all chunks; the loop does the C S_prev^T read-out and the
state update. The D skip, the gate and the norm stay in the module (nn/mamba2.py).
Legend: B batch, T tokens, H heads, P head dim, N state size, C chunk size, R = B * H, NC chunks.
"""

from __future__ import annotations

import torch

from archprobe.ops.chunking import chunk_major, decay_exp


def segment_sums(a):
    """[..., C] -> [..., C, C]: the sum of a over (s, r] at [r, s] for s <= r (0 on the diagonal), -inf
    above. Each entry is a direct sum of its own segment, not cum_r - cum_s: two large cumulative sums
    would cancel to a difference carrying their rounding error (5 digits lost at a decay sum of ~1000)."""
    C = a.shape[-1]
    below = torch.ones(C, C, dtype=torch.bool, device=a.device).tril(-1)
    seg = a.unsqueeze(-1).expand(*a.shape, C).masked_fill(~below, 0.0).cumsum(-2)   # [r, s] = sum a_t, s < t <= r
    upper = torch.ones(C, C, dtype=torch.bool, device=a.device).triu(1)
    return seg.masked_fill(upper, -float("inf"))


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


SEGMENT_BYTES = 8 << 20   # a segment's x, B and C in float32: its [C, C] tensors and copies stay a few MB


def ssd_chunked(x_BTHP, dt_BTH, A_H, B_BTHN, C_BTHN, *, initial_state=None, output_final_state=False,
                chunk_size=64):
    """Same contract as `ssd_recurrent`: the chunked (matmul) form. Long sequences run as a chain of
    segments with the state carried across (exact), so the working memory does not grow with T."""
    Bsz, T, H, P = x_BTHP.shape
    N = B_BTHN.shape[-1]
    if T == 0:
        return ssd_recurrent(x_BTHP, dt_BTH, A_H, B_BTHN, C_BTHN, initial_state=initial_state,
                             output_final_state=output_final_state)
    per_token = Bsz * H * (P + 2 * N) * 4
    L = max(chunk_size, SEGMENT_BYTES // max(1, per_token) // chunk_size * chunk_size)
    S = (initial_state.float().reshape(Bsz * H, P, N) if initial_state is not None
         else x_BTHP.new_zeros(Bsz * H, P, N, dtype=torch.float32))
    parts = []
    for start in range(0, T, L):
        seg = slice(start, start + L)
        part, S = _ssd_segment(x_BTHP[:, seg], dt_BTH[:, seg], A_H, B_BTHN[:, seg], C_BTHN[:, seg], S, chunk_size)
        parts.append(part)
    y = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
    return y, (S.view(Bsz, H, P, N) if output_final_state else None)


def _ssd_segment(x_BTHP, dt_BTH, A_H, B_BTHN, C_BTHN, S, Cc):
    """One segment from state S [R, P, N]: returns (y [B, T, H, P] float32, the state after it)."""
    Bsz, T, H, P = x_BTHP.shape
    R = Bsz * H
    # [NC, R, C, X] float32, zero-padded to whole chunks (a zero dt adds nothing)
    dt = chunk_major(dt_BTH.unsqueeze(-1), Cc, torch.float32)                      # [NC, R, C, 1]
    NC = dt.shape[0]
    u = chunk_major(x_BTHP, Cc, torch.float32) * dt                                # dt x
    Bm, Cm = chunk_major(B_BTHN, Cc, torch.float32), chunk_major(C_BTHN, Cc, torch.float32)
    a = (dt * A_H.float().repeat(Bsz).view(1, R, 1, 1)).squeeze(-1)               # log-decay per token [NC, R, C]
    seg = segment_sums(a)                                                          # [NC, R, C, C]
    L = decay_exp(seg).masked_fill(seg == -float("inf"), 0.0)
    y = ((Cm @ Bm.mT) * L) @ u                                                     # intra-chunk, [NC, R, C, P]
    cum = a.cumsum(-1).unsqueeze(-1)                                               # a direct sum from the start
    q_decayed = Cm * decay_exp(cum)                                                # exp(cum_r) C_r
    u_to_end = u * L[:, :, -1, :].unsqueeze(-1)                                    # exp(sum of a after s) u_s
    decay_last = decay_exp(cum[:, :, -1:])                                         # [NC, R, 1, 1]
    if torch.is_grad_enabled() and any(t.requires_grad for t in (y, S, q_decayed, u_to_end, Bm)):
        outs = []
        for n in range(NC):   # the sequential part: read the state out, then carry it over the chunk
            outs.append(q_decayed[n] @ S.mT)
            S = S * decay_last[n] + u_to_end[n].mT @ Bm[n]
        y = y + torch.stack(outs)
    else:   # in place: the read-out accumulates into y, the state alternates between two buffers
        S, spare = S.clone(), torch.empty_like(S)
        for y_n, q_n, d_n, u_n, b_n in zip(y.unbind(0), q_decayed.unbind(0), decay_last.unbind(0),
                                           u_to_end.mT.unbind(0), Bm.unbind(0), strict=True):
            y_n.baddbmm_(q_n, S.mT)
            torch.mul(S, d_n, out=spare)
            spare.baddbmm_(u_n, b_n)
            S, spare = spare, S
    return y.view(NC, Bsz, H, Cc, P).permute(1, 0, 3, 2, 4).reshape(Bsz, NC * Cc, H, P)[:, :T], S
