"""KDA, chunked: an exact rewrite of `kda_recurrent` as matmuls over chunks of C tokens.

spec/kimi-k3.md section 2.1(a) step 7 (the WY representation, as in FLA's chunk_kda). Within a chunk,
with G the cumulative log-decay (per key channel) and A(X, Y)[r, s] = sum_c x_r[c] y_s[c] exp(G_r[c] - G_s[c]):

    L = beta_r * A(K, K) strictly below the diagonal;  (I + L) [W | U] = [beta exp(G) K | beta V]
    V' = U - W S;   O = (Q exp(G)) S + tril(A(Q, K)) V';   S = exp(G_last) S + (exp(G_last - G) K)^T V'

Only the line for S is sequential. Everything else is batched over all chunks: the products, the
triangular inverse, W and U before the loop; tril(A(Q, K)) V' after it. The loop does V', the
(Q exp(G)) S term of O while S is in cache, and the state update.

Numerics: no subnormal float is ever produced (x86 computes those in microcode, 10-100x slower per
operation; exp of arguments below -87 ran 50x slower on the development host), with no process-wide
flush-to-zero flag. exp(G_r - G_s) is never formed as exp(G_r) * exp(-G_s) over a whole chunk; the
chunk is cut into sub-blocks whose decay spans at most 2 * HALF_SPAN in every channel (`sub_block`,
sized from the decay), each carrying factors within exp(+-HALF_SPAN); rows of later sub-blocks meet
earlier ones level by level through two factors <= 1 (`_decayed`). Every decay factor is clamped at
exp(-30) (`chunking.decay_exp`): what that changes is below 1e-12 of the exact value, and a product of two
factors and data stays a normal float. The triangular solve's entries fall with the chunk's slowest
channel; past SOLVE_SPAN it runs in float64 (`_solve`; never with one decay per head, `_decayed_per_head`),
and the default chunk (`choose_chunk`) is 16 wherever a chunk of 32 would need sub-block levels, so the
float64 solve is rare (with per-channel gates the chunk's slowest channel decays by at most 60 over 16
tokens unless every channel decays past ~4 per token; a token's decay is capped at the floor, `_capped`,
so even then the solve holds: 16 x 30 = 480 < float64's ~700).
Where every channel decays alike (K3's -5*sigmoid gates at their strong end) the decay all channels share
is taken out first (`_shared_decay`): the products and the solve see only the relative decay, which keeps
full sub-blocks, and the shared part comes back as factors exp(h_r - h_s) <= 1 (exact, as an E (.) E^-1
similarity of the triangular system).
Legend: B batch, T tokens, H heads, K key dim, V value dim, N chunks, C chunk size, R = B * H.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from archprobe.ops.chunking import chunk_major, decay_exp, exp_floor
from archprobe.ops.kda.naive import compute_dtype
from archprobe.ops.native import delta_rule as native

SUB = 32            # the most rows per diagonal sub-block of the decayed products
HALF_SPAN = 30.0    # a diagonal sub-block's factors stay within exp(+-30): products >= exp(-60) ~ 1e-26
SOLVE_SPAN = 60.0   # a chunk whose slowest channel decays more than this is solved in float64
SOLVE_FLOOR = 1e-15  # entries of the float64 inverse below this are zeroed before it returns to float32


def sub_block(G_NRCK, h_NRC1=None) -> int:
    """The largest power of two s <= SUB whose blocks of s tokens decay by at most 2 * HALF_SPAN in every
    channel (so the factored form's factors stay within exp(+-HALF_SPAN)); 1 for decays beyond that.
    With h, of the relative decay G - h, read at the blocks' ends only (G - h is not formed)."""
    *lead, C, K = G_NRCK.shape
    s = min(SUB, C)
    while s > 1:
        Gs = G_NRCK.view(*lead, C // s, s, K)
        span = Gs[..., 0, :] - Gs[..., -1, :]
        if h_NRC1 is not None:
            hs = h_NRC1.view(*lead, C // s, s, 1)
            span = span - (hs[..., 0, :] - hs[..., -1, :])
        if span.max() <= 2 * HALF_SPAN:
            break
        s //= 2
    return s


@dataclass
class Decayed:
    """The chunk's decay applied: the two products A and everything the solve, loop and read-out need."""
    A_kk: torch.Tensor         # [..., C, C] A(K, K), strictly lower
    P_qk: torch.Tensor         # [..., C, C] A(Q, K), lower incl. the diagonal
    q_decayed: torch.Tensor    # [..., C, K] exp(G) Q
    k_decayed: torch.Tensor    # [..., C, K] exp(G) K
    k_to_end: torch.Tensor     # [..., C, K] exp(G_last - G) K


def _bmm_t(x, y):
    """x [..., r, K] @ y[..., s, K]^T as one 3-D bmm (a 5-D matmul would copy the transposed operand)."""
    *lead, r, K = x.shape
    return torch.bmm(x.reshape(-1, r, K), y.reshape(-1, y.shape[-2], K).mT).view(*lead, r, y.shape[-2])


def _decayed(q_NRCK, k_NRCK, G_NRCK, inference: bool) -> Decayed:
    """A(K, K), A(Q, K) and the three decayed copies, with one full-size exp and no subnormal anywhere.

    Sub-blocks of s tokens (`sub_block`), each with ref = the per-channel middle of its G, carry the only
    full-size exps: row = exp(G_r - ref) and its reciprocal, both within exp(+-HALF_SPAN). Every other decay
    is row or 1/row times a per-block factor exp(x) with x raised to `ref_floor` (so the product stays a
    normal float), and the product raised to exp(floor) (so products of it with data do too):
    - diagonal sub-blocks: exp(G_r - G_s) = row_r / row_s, one product per block;
    - below them, level by level: in each block of 2b tokens (b = s, 2s, ..., C/2), the second half's rows
      against the first half's columns, around m = G at the end of the first half: exp(G_r - G_s) =
      exp(G_r - m) exp(m - G_s), both <= 1; each level one batched product over every block of every chunk;
    - exp(G_r) = row_r exp(ref) and exp(G_last - G_r) = exp(G_last - ref) / row_r.
    A factor raised to a floor was below exp(ref_floor + HALF_SPAN) ~ 2e-12 (float32): that is what the
    floors can change, in products whose exact value is at most 1."""
    N, R, C, K = k_NRCK.shape
    s = sub_block(G_NRCK)
    n = C // s
    low = math.exp(exp_floor(G_NRCK.dtype))
    ref_floor = math.log(torch.finfo(G_NRCK.dtype).tiny) + HALF_SPAN + 4.0

    def small_exp(x):   # the per-block factors
        return x.clamp(min=ref_floor).exp()

    def raised(x):      # a product of a full-size factor and a per-block one, raised to exp(floor)
        return x.clamp_min_(low) if inference else x.clamp_min(low)

    if s == C and G_NRCK.min().item() >= exp_floor(G_NRCK.dtype):
        return _one_block(q_NRCK, k_NRCK, G_NRCK, inference)
    Gs = G_NRCK.view(N, R, n, s, K)
    ref = (Gs[..., :1, :] + Gs[..., -1:, :]) * 0.5                  # [N, R, n, 1, K]
    offset = Gs - ref                                                # within +-HALF_SPAN
    row = offset.exp()                                               # exp(G_r - ref)
    # 1 / row by a reciprocal, but under autograd an exp (one less saved tensor in the gradient's chain)
    inv_row = row.reciprocal() if inference else offset.neg().exp()
    ks, qs = k_NRCK.view(N, R, n, s, K), q_NRCK.view(N, R, n, s, K)
    if s == C:   # one sub-block: its products are the whole chunk's (no zeros, no diagonal copies)
        col = (ks * inv_row).view(N, R, C, K)
        A_kk, P_qk = _bmm_t((ks * row).view(N, R, C, K), col), _bmm_t((qs * row).view(N, R, C, K), col)
    else:
        A_kk, P_qk = k_NRCK.new_zeros(N, R, C, C), k_NRCK.new_zeros(N, R, C, C)
    if 1 < s < C:
        col = ks * inv_row                                           # K exp(ref - G_s)
        for out, x in ((A_kk, ks), (P_qk, qs)):   # the diagonal blocks of out, as a [N, R, s, s, n] view
            out.view(N, R, n, s, n, s).diagonal(dim1=2, dim2=4).copy_(_bmm_t(x * row, col).permute(0, 1, 3, 4, 2))
    elif s == 1:   # one token per block: only A(Q, K)'s diagonal, q_r . k_r
        P_qk.diagonal(dim1=-2, dim2=-1).copy_((q_NRCK * k_NRCK).sum(-1))
    b = s
    while b < C:
        nb, per = C // (2 * b), b // s                                # blocks of 2b; sub-blocks per half
        m = G_NRCK.view(N, R, nb, 2, b, K)[:, :, :, 0, -1:, :].unsqueeze(-3)   # [N, R, nb, 1, 1, K]
        refs = ref.view(N, R, nb, 2, per, 1, K)
        rows = raised(row.view(N, R, nb, 2, per, s, K)[:, :, :, 1] * small_exp(refs[:, :, :, 1] - m))
        cols = raised(inv_row.view(N, R, nb, 2, per, s, K)[:, :, :, 0] * small_exp(m - refs[:, :, :, 0]))
        col = k_NRCK.view(N, R, nb, 2, b, K)[:, :, :, 0] * cols.view(N, R, nb, b, K)
        rows = rows.view(N, R, nb, b, K)
        for out, x in ((A_kk, k_NRCK), (P_qk, q_NRCK)):   # rows of the second halves, columns of the first
            block = out.view(N, R, nb, 2, b, nb, 2, b).diagonal(dim1=2, dim2=5)[:, :, 1, :, 0]   # [N, R, b, b, nb]
            block.copy_(_bmm_t(x.view(N, R, nb, 2, b, K)[:, :, :, 1] * rows, col).permute(0, 1, 3, 4, 2))
        b *= 2
    exp_G = raised(row * small_exp(ref)).view(N, R, C, K)
    exp_end = raised(inv_row * small_exp(G_NRCK[:, :, None, -1:, :] - ref)).view(N, R, C, K)
    return Decayed(A_kk.tril_(-1), P_qk.tril_(0), q_NRCK * exp_G, k_NRCK * exp_G, k_NRCK * exp_end)


def _one_block(q_NRCK, k_NRCK, G_NRCK, inference: bool) -> Decayed:
    """`_decayed` when the chunk is one sub-block and no decay in it is below exp(floor) (mild gates):
    row = exp(G) and its reciprocal are both within exp(+-|floor|), so they are the factors themselves:
    A = (K row)(K / row)^T, exp(G) Q = Q row, exp(G) K = K row, exp(G_last - G) K = (K / row) exp(G_last)
    (each product of a factor >= exp(floor) and data stays a normal float). Six passes over [C, K], no
    zeros, diagonal copies or clamps (measured ~1.3x the general path's CPU time on mild gates)."""
    row = G_NRCK.exp()
    inv_row = row.reciprocal() if inference else G_NRCK.neg().exp()
    k_row, q_row, col = k_NRCK * row, q_NRCK * row, k_NRCK * inv_row
    A_kk, P_qk = _bmm_t(k_row, col).tril_(-1), _bmm_t(q_row, col).tril_(0)
    exp_end = G_NRCK[..., -1:, :].exp()
    return Decayed(A_kk, P_qk, q_row, k_row, col.mul_(exp_end) if inference else col * exp_end)


def _decayed_per_head(q_NRCK, k_NRCK, G_NRC1) -> tuple[Decayed, torch.Tensor]:
    """The same with one decay per head (Gated DeltaNet), and the [C, C] decay exp(G_r - G_s) per chunk, taken
    directly (C exps per token instead of K). The whole decay is shared by the head's channels, so (as in
    `_shared_decay`) A(K, K) is returned undecayed: the solve runs on the plain K K^T in float32 at any
    decay, and the caller multiplies its inverse by the returned decay (exact: a similarity transform)."""
    decay = decay_exp((G_NRC1 - G_NRC1.mT).clamp_(max=0.0))          # [N, R, C, C]; above the diagonal 1
    exp_G, exp_end = decay_exp(G_NRC1), decay_exp(G_NRC1[..., -1:, :] - G_NRC1)
    return (Decayed(_bmm_t(k_NRCK, k_NRCK).tril_(-1), (_bmm_t(q_NRCK, k_NRCK) * decay).tril_(0),
                    q_NRCK * exp_G, k_NRCK * exp_G, k_NRCK * exp_end), decay)


def _solve(A_kk, beta, slowest_span: float):
    """(I + diag(beta) A)^-1 diag(beta), by one batched triangular solve. Its entries fall like the decay of
    the chunk's slowest channel; past SOLVE_SPAN (float32 steps could turn subnormal) it is solved in
    float64, and entries below SOLVE_FLOOR (contributions < 1e-15) are zeroed on the way back."""
    L = A_kk * beta
    dt = L.dtype
    if dt != torch.float64 and slowest_span > SOLVE_SPAN:
        L = L.double()
    eye = torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)
    inverse = torch.linalg.solve_triangular(L, eye.expand_as(L), upper=False, unitriangular=True)
    if inverse.dtype != dt:
        inverse = inverse.masked_fill(inverse.abs() < SOLVE_FLOOR, 0.0).to(dt)
    return inverse * beta.mT


SHARED_MIN = 8.0   # the least shared decay (per chunk, somewhere in the segment) worth taking out


def slowest_span(G_NRCK) -> float:
    """How far the slowest channel of the most decaying chunk decays over the chunk (what the solve's
    entries fall by)."""
    return -G_NRCK[..., -1, :].amax(-1).amin().item()


def _shared_decay(g_NRCK, G_NRCK):
    """(h, G - h): h [N, R, C, 1] the in-chunk cumsum of each token's smallest decay over the channels (max_c g <= 0),
    the part of the decay every channel shares; None unless taking it out helps (some chunk shares more
    than SHARED_MIN, and the sub-blocks grow).

    With G' = G - h every product and the solve are exact in the factored form: exp(G_r - G_s) =
    exp(h_r - h_s) exp(G'_r - G'_s), and (I + diag(beta) A)^-1 = E (I + diag(beta) A')^-1 E^-1 for
    E = diag(exp(h)), so the inverse is the relative one times exp(h_r - h_s) <= 1. When the channels decay
    alike (K3's -5*sigmoid gates at their strong end: ~5 per token in every channel) G' hardly decays:
    full sub-blocks and a float32 solve instead of small sub-blocks and a float64 one."""
    m = g_NRCK.detach().amax(-1, keepdim=True).clamp_(max=0.0)   # detached: the result does not depend on h
    h = m.cumsum(-2)
    if -h[..., -1, :].amin().item() <= SHARED_MIN:
        return None
    # measured (benchmarks/kda.py's gates, T=2048, CPU time): 1.04-1.10x where the sub-blocks grow (K3's
    # strong end, s 8 -> 32), 0.93-0.96x where only the float64 solve would go (K3's typical gates)
    return (h, G_NRCK - h) if sub_block(G_NRCK, h) > sub_block(G_NRCK) else None


def _with_shared_decay(d: Decayed, inverse, h):
    """The products of the relative decay G - h and its solve's inverse, with the shared decay h put back:
    factors exp(h_r - h_s) on A(Q, K) and the inverse, exp(h) on the decayed Q and K, exp(h_last - h) on
    the keys to the chunk's end (each a decay factor <= 1, clamped as `decay_exp` does)."""
    pair = decay_exp((h - h.mT).clamp_(max=0.0))                     # [N, R, C, C]; above the diagonal 1
    to_row, to_end = decay_exp(h), decay_exp(h[..., -1:, :] - h)
    return (Decayed(d.A_kk, d.P_qk * pair, d.q_decayed * to_row, d.k_decayed * to_row, d.k_to_end * to_end),
            inverse * pair)


SEGMENT_BYTES = 4 << 20   # a segment's q, k, v in float32: small enough to stay in a core's cache
SHAPE_CHUNK = 32          # the largest chunk the op picks
MIN_CHUNK = 16            # the smallest
SMALL_HEAD = 64 * 64      # K * V up to which chunks of 16 ran faster at every decay (benchmarks/kda.py)
CHUNK_SOLVE_SPAN = 500.0  # the most a chunk's slowest channel may decay: float64 holds exp(-700)


def choose_chunk(g_BTHK: torch.Tensor, K: int, V: int) -> int:
    """The chunk size when the caller gives none. Per-channel gates: SHAPE_CHUNK where it is one sub-block
    (no channel decays by more than 2 * HALF_SPAN over a chunk, so no levels and a float32 solve) and the
    heads are large (K * V > SMALL_HEAD: the state's products dominate and larger ones run nearer the
    peak); MIN_CHUNK otherwise, where the in-chunk work (its sub-block levels, its float64 solve, or its
    share of small heads) is what halving the chunk halves. Measured at T=8192, 2 threads: 16 ran
    1.02-1.11x 32 at H=4, K=V=64 in every regime; at H=8, K=V=128, 32 ran 1.15x 16 on mild gates, 16 ran
    1.02-1.15x 32 on the others. One-decay-per-head gates (Gated DeltaNet, solved undecayed):
    SHAPE_CHUNK, halved while some chunk decays by more than CHUNK_SOLVE_SPAN. One pass over g."""
    B, T, H, Kg = g_BTHK.shape

    def most_decay(C: int) -> float:   # the most any whole chunk of C tokens decays, in any channel
        n = T // C
        return -g_BTHK[:, :n * C].float().reshape(B, n, C, H, Kg).sum(2).amin().item()

    C = SHAPE_CHUNK
    if T < C:
        return C
    if Kg > 1:
        return C if K * V > SMALL_HEAD and most_decay(C) <= 2 * HALF_SPAN else MIN_CHUNK
    while C > MIN_CHUNK and most_decay(C) > CHUNK_SOLVE_SPAN:
        C //= 2
    return C


def segment_tokens(B: int, H: int, K: int, V: int, chunk: int) -> int:
    """Tokens per segment: long sequences run as a chain of segments (the state carried across),
    so the elementwise passes work in cache instead of streaming whole-sequence tensors through RAM."""
    per_token = B * H * (2 * K + V) * 4
    tokens = 1 << max(0, (SEGMENT_BYTES // max(1, per_token)).bit_length() - 1)
    tokens = min(2048, max(tokens, 256))
    return max(chunk, tokens // chunk * chunk)


def per_head_gate(g: torch.Tensor) -> torch.Tensor:
    """g as [B, T, H, K], or [B, T, H, 1] when it holds one decay per head: given as [B, T, H] or
    expanded over K (stride 0, as Gated DeltaNet passes it), which the op then runs in its per-head form."""
    if g.dim() == 3:
        return g.unsqueeze(-1)
    if g.shape[-1] > 1 and g.stride(-1) == 0:
        return g[..., :1]
    return g


def kda_chunked(q_BTHK, k_BTHK, v_BTHV, g_BTHK, beta_BTH, *, scale=None, initial_state=None,
                output_final_state=False, chunk_size=None):
    """Same contract as `kda_recurrent`. chunk_size: a power of two, or None (the default) for the op's
    own choice: forward-only float32 on the CPU runs the fused C recurrence (`native.forward`, one pass over
    the state per token, no chunk at all), anything else the chunk `choose_chunk` picks from the shape
    and the decay."""
    B, T, H, K, V = _shapes(q_BTHK, k_BTHK, v_BTHV, g_BTHK, beta_BTH, initial_state)
    if T == 0:   # no tokens: an empty read-out, the state as given (as kda_recurrent returns them)
        dt = compute_dtype(q_BTHK)
        state = (torch.zeros(B, H, K, V, dtype=dt, device=q_BTHK.device) if initial_state is None
                 else initial_state.to(dt).clone())
        return q_BTHK.new_empty(B, 0, H, V), (state if output_final_state else None)
    g_BTHK = per_head_gate(g_BTHK)
    scale = K ** -0.5 if scale is None else scale
    if chunk_size is None:   # the op's choice: the fused recurrence where it applies, else a chunk size
        fused = native.forward(q_BTHK, k_BTHK, v_BTHV, g_BTHK, beta_BTH, scale, initial_state)
        if fused is not None:
            return fused[0], (fused[1] if output_final_state else None)
        chunk_size = choose_chunk(g_BTHK, K, V)
    if chunk_size < 1 or chunk_size & (chunk_size - 1):
        raise ValueError(f"chunk_size {chunk_size} must be a power of two (16, 32, 64, ...)")
    out = torch.empty(B, T, H, V, dtype=q_BTHK.dtype, device=q_BTHK.device)
    L = segment_tokens(B, H, K, V, chunk_size)
    state = initial_state
    for s in range(0, max(T, 1), L):   # exact: a segment boundary is a chunk boundary with the state carried
        seg = slice(s, s + L)
        state = _kda_segment(q_BTHK[:, seg], k_BTHK[:, seg], v_BTHV[:, seg], g_BTHK[:, seg], beta_BTH[:, seg],
                             scale, state, out[:, seg], chunk_size)
    final = state.clone()   # already in the compute dtype (float32, or float64 for float64 inputs)
    return out, (final if output_final_state else None)


def _shapes(q, k, v, g, beta, initial_state) -> tuple[int, int, int, int, int]:
    """(B, T, H, K, V), or a ValueError naming the input that disagrees (a mismatch would otherwise run on
    silently, cut to the shortest input)."""
    if k.dim() != 4 or q.shape != k.shape:
        raise ValueError(f"q and k must be [B, T, H, K] alike, got {tuple(q.shape)} and {tuple(k.shape)}")
    B, T, H, K = k.shape
    if v.dim() != 4 or v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v must be [B, T, H, V] with B, T, H = {(B, T, H)}, got {tuple(v.shape)}")
    if g.shape[:3] != k.shape[:3] or g.dim() not in (3, 4) or (g.dim() == 4 and g.shape[-1] not in (1, K)):
        raise ValueError(f"g must be [B, T, H, K] or one decay per head [B, T, H], got {tuple(g.shape)}")
    if tuple(beta.shape) != (B, T, H):
        raise ValueError(f"beta must be [B, T, H] = {(B, T, H)}, got {tuple(beta.shape)}")
    V = v.shape[-1]
    if initial_state is not None and tuple(initial_state.shape) != (B, H, K, V):
        raise ValueError(f"initial_state must be [B, H, K, V] = {(B, H, K, V)}, got {tuple(initial_state.shape)}")
    return B, T, H, K, V


def _capped(g_NRCK):
    """Each token's log-decay raised to exp_floor. Exact to the floors' tolerance: every use of G is a
    decay exp(G_r - G_s) over tokens (s, r] of one chunk, and where one of those tokens decays past the
    floor the true factor and the capped one are both below exp(floor), as `decay_exp` clamps them anyway.
    It bounds the sub-blocks from below (`sub_block` >= 2 at HALF_SPAN = -floor): a gate with a few
    channels decaying ~60 per token (Kimi Linear's unbounded -exp(A) softplus) no longer cuts every chunk
    into single tokens."""
    floor = exp_floor(g_NRCK.dtype)
    return g_NRCK.clamp(min=floor) if g_NRCK.min().item() < floor else g_NRCK


def _kda_segment(q_BTHK, k_BTHK, v_BTHV, g_BTHK, beta_BTH, scale, initial_state, out_BTHV, C):
    """One segment: writes its read-out into out_BTHV (a slice of the caller's output) and returns the
    state after its last token, [B, H, K, V] in the compute dtype."""
    dt = compute_dtype(q_BTHK)
    B, T, H, K = k_BTHK.shape
    V = v_BTHV.shape[-1]
    R = B * H
    pad = (-T) % C
    N = (T + pad) // C

    q, k, v, g = (chunk_major(x, C, dt) for x in (q_BTHK, k_BTHK, v_BTHV, g_BTHK))
    beta = chunk_major(beta_BTH.unsqueeze(-1), C, dt)              # [N, R, C, 1]
    grad = torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (q, k, v, g, beta, initial_state))
    # a token's decay below exp(floor) counts as exp(floor) (`_capped`), then the in-chunk cumsum; the shared
    # decay is taken from the same capped gates (from the raw ones, G - h could grow past 0 and overflow)
    g = _capped(g)
    G = g.cumsum(-2)
    shared = _shared_decay(g, G) if G.shape[-1] > 1 else None
    if shared is None:
        if G.shape[-1] == 1 < K:   # one decay per head: solved undecayed, the decay put back on the inverse
            d, decay = _decayed_per_head(q, k, G)
            inverse = _solve(d.A_kk, beta, 0.0) * decay
        else:
            d = _decayed(q, k, G, inference=not grad)
            inverse = _solve(d.A_kk, beta, slowest_span(G))
    else:   # the decay every channel shares taken out of the products and the solve, put back after them
        h, relative = shared
        d = _decayed(q, k, relative, inference=not grad)
        inverse = _solve(d.A_kk, beta, slowest_span(relative))
        d, inverse = _with_shared_decay(d, inverse, h)
    decay_last = decay_exp(G[..., -1:, :]).mT                        # [N, R, K, 1]
    S0 = (torch.zeros(R, K, V, dtype=dt, device=q.device) if initial_state is None
          else initial_state.to(dt).reshape(R, K, V))
    if grad:
        W, U = inverse @ d.k_decayed, inverse @ v
        o, v_new, S = _state_loop_autograd(S0, U, W, decay_last, d.k_to_end, d.q_decayed)
        # O = scale (Q exp(G) S + P V'), the scale folded into the matmul
        o = o.view(N * R, C, V).baddbmm(d.P_qk.view(N * R, C, C), v_new.view(N * R, C, V), beta=scale, alpha=scale)
    else:
        W, v_new = inverse @ d.k_decayed, inverse @ v                   # v_new holds U until the loop
        states = torch.empty(N, R, K, V, dtype=dt, device=q.device)     # S at the start of each chunk
        S = _state_loop(S0, v_new, W, decay_last, d.k_to_end, states)
        # O = scale (Q exp(G) S + P V'): the read-out of every chunk's state in one batched product after
        # the loop (the loop keeps only what is sequential), the scale folded into the second product
        o = torch.bmm(d.q_decayed.view(N * R, C, K), states.view(N * R, K, V))
        o = o.baddbmm_(d.P_qk.view(N * R, C, C), v_new.view(N * R, C, V), beta=scale, alpha=scale)
    o_BTHV = o.view(N, B, H, C, V).permute(1, 0, 3, 2, 4)            # [B, N, C, H, V]
    if pad:
        out_BTHV.copy_(o_BTHV.reshape(B, N * C, H, V)[:, :T])
    else:
        out_BTHV.view(B, N, C, H, V).copy_(o_BTHV)
    return S.view(B, H, K, V)


def _state_loop_autograd(S0, U, W, decay_last, k_to_end, q_decayed):
    """The sequential part under autograd, per chunk n: V' = U - W S, the read-out's Q exp(G) S, then
    S = exp(G_last) S + (exp(G_last - G) K)^T V', every step making new tensors (out= and in-place updates
    of saved tensors are not differentiable). Returns (Q exp(G) S [N, R, C, V], V' [N, R, C, V], final S)."""
    S, outs, v_new = S0, [], []
    for n in range(U.shape[0]):
        v_new.append(torch.baddbmm(U[n], W[n], S, alpha=-1))
        outs.append(q_decayed[n] @ S)
        S = torch.baddbmm(S * decay_last[n], k_to_end[n].mT, v_new[-1])
    return torch.stack(outs), torch.stack(v_new), S


def _state_loop(S0, U, W, decay_last, k_to_end, states):
    """The sequential part without autograd, in place, per chunk n: V' = U - W S (into U), then
    S = exp(G_last) S + (exp(G_last - G) K)^T V', each chunk's S written into `states` [N, R, K, V] (the
    read-out reads them after the loop). Returns the final S."""
    states[0].copy_(S0)
    final = torch.empty_like(S0)
    nexts = list(states.unbind(0)[1:]) + [final]
    # per-chunk views made once, in C++ (indexing inside the loop costs more than the smallest steps)
    for u, w, d, k_t, S, nxt in zip(U.unbind(0), W.unbind(0), decay_last.unbind(0), k_to_end.mT.unbind(0),
                                    states.unbind(0), nexts, strict=True):
        u.baddbmm_(w, S, alpha=-1)
        torch.mul(S, d, out=nxt)
        nxt.baddbmm_(k_t, u)
    return final
