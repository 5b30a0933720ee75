"""KDA, chunked: an exact rewrite of `kda_recurrent` as matmuls over chunks of C tokens.

spec/kimi-k3.md section 2.1(a) step 7 (the WY representation, as in FLA's chunk_kda). Within a chunk,
with G the cumulative log-decay (per key channel) and A(X, Y)[r, s] = sum_c x_r[c] y_s[c] exp(G_r[c] - G_s[c]):

    L = beta_r * A(K, K) strictly below the diagonal;  (I + L) [W | U] = [beta exp(G) K | beta V]
    V' = U - W S;   O = (Q exp(G)) S + tril(A(Q, K)) V';   S = exp(G_last) S + (exp(G_last - G) K)^T V'

Only the line for S is sequential. Everything else is batched over all chunks: the products, the
triangular inverse, W and U before the loop; tril(A(Q, K)) V' after it. The loop does V', the
(Q exp(G)) S term of O while S is in cache, and the state update.

Numerics: exp(G_r - G_s) is never formed from exp(G_r) * exp(-G_s) over a whole chunk (that overflows
once the decay sums past ~88). A is computed per sub-block of up to 32 rows as one matmul of two
factors taken relative to a per-channel reference in the middle of the sub-block's decay range, so
each factor stays within exp(+-MAX_SPAN) while their product is the exact exp(G_r - G_s) <= 1. With K3's
-5 bound a 32-token sub-block spans at most 155. Rows of a later sub-block meet an earlier one through
two factors <= 1 around the earlier block's end. When a sub-block's span exceeds 2 * MAX_SPAN (unbounded
gates), the exact but slower explicit form ([S, S, K] decay differences) is used instead.
Legend: B batch, T tokens, H heads, K key dim, V value dim, N chunks, C chunk size, R = B * H.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from archprobe.ops.chunking import chunk_major, decay_exp

SUB = 32            # rows per sub-block of the decayed products
MAX_SPAN = 80.0     # the largest exponent one factor may carry: exp(80) ~ 5.5e34, far from float32's 3.4e38
EXPLICIT_SUB = 16   # sub-blocks of the explicit form, whose [S, S, K] decay tensor grows with S^2


def _explicit_products(x_NRCK, y_NRCK, G_NRCK, include_diagonal: bool):
    """A(X, Y) [..., C, C] from the decay differences themselves (exact for any decay, slower):
    diagonal sub-blocks through an [S, S, K] decay tensor, earlier sub-blocks through factors <= 1."""
    *lead, C, K = x_NRCK.shape
    s = min(EXPLICIT_SUB, C)
    n_sub = C // s
    out = x_NRCK.new_zeros(*lead, C, C)
    xs = x_NRCK.view(*lead, n_sub, s, K)
    ys = y_NRCK.view(*lead, n_sub, s, K)
    Gs = G_NRCK.view(*lead, n_sub, s, K)
    diff = Gs.unsqueeze(-2) - Gs.unsqueeze(-3)                      # [.., s(r), s(s), K]
    keep = torch.ones(s, s, dtype=torch.bool, device=x_NRCK.device).tril(0 if include_diagonal else -1)
    decay = torch.where(keep[..., None], decay_exp(diff.clamp(max=0.0)), 0.0)   # above the diagonal diff > 0
    diag = torch.einsum("...irc,...isc,...irsc->...irs", xs, ys, decay)
    for i in range(n_sub):
        out[..., i * s:(i + 1) * s, i * s:(i + 1) * s] = diag[..., i, :, :]
        if i == 0:
            continue
        ref = G_NRCK[..., i * s - 1, :].unsqueeze(-2)                  # G at the end of the previous block
        xf = xs[..., i, :, :] * decay_exp(Gs[..., i, :, :] - ref)         # <= 1
        yf = y_NRCK[..., :i * s, :] * decay_exp(ref - G_NRCK[..., :i * s, :])   # <= 1
        out[..., i * s:(i + 1) * s, :i * s] = xf @ yf.mT
    return out


@dataclass
class Decayed:
    """The chunk's decay applied: the two products A and everything the solve, loop and read-out need."""
    A_kk: torch.Tensor         # [..., C, C] A(K, K), strictly lower
    P_qk: torch.Tensor         # [..., C, C] A(Q, K), lower incl. the diagonal
    q_decayed: torch.Tensor    # [..., C, K] exp(G) Q
    k_decayed: torch.Tensor    # [..., C, K] exp(G) K
    k_to_end: torch.Tensor     # [..., C, K] exp(G_last - G) K


def _with_direct_exps(A_kk, P_qk, q_NRCK, k_NRCK, G_NRCK) -> Decayed:
    """The products given; exp(G) and exp(G_last - G) each an exp of its own (both <= 1, any decay)."""
    exp_G, G_last = decay_exp(G_NRCK), G_NRCK[..., -1:, :]
    return Decayed(A_kk, P_qk, q_NRCK * exp_G, k_NRCK * exp_G, k_NRCK * decay_exp(G_last - G_NRCK))


def _explicit(q_NRCK, k_NRCK, G_NRCK) -> Decayed:
    """Any decay: the products from decay differences, every factor an exp of its own."""
    return _with_direct_exps(_explicit_products(k_NRCK, k_NRCK, G_NRCK, False),
                             _explicit_products(q_NRCK, k_NRCK, G_NRCK, True), q_NRCK, k_NRCK, G_NRCK)


def _factored(q_NRCK, k_NRCK, G_NRCK, inference: bool) -> Decayed | None:
    """The fast form; None when a sub-block's decay span is too wide for it.

    With ref the per-channel middle of a sub-block's G: exp(G_r - G_s) = exp(G_r - ref) exp(ref - G_s), two
    factors within exp(+-MAX_SPAN). When the chunk is one sub-block, exp(G) = exp(G - ref) exp(ref) and
    exp(G_last - G) = exp(ref - G) exp(G_last - ref) reuse the same factors: two exps in all (one exp
    and a division without autograd)."""
    *lead, C, K = k_NRCK.shape
    s = min(SUB, C)
    n = C // s
    Gs = G_NRCK.view(*lead, n, s, K)
    first, last = Gs[..., :1, :], Gs[..., -1:, :]                    # [..., n, 1, K]
    if (first - last).max() > 2 * MAX_SPAN:
        return None
    ref = (first + last) * 0.5
    offset = Gs - ref                                                # in [-MAX_SPAN, MAX_SPAN]
    row = offset.exp()                                               # exp(G_r - ref)
    # K exp(ref - G_s): K / row, but under autograd an exp (the gradient of 1 / row, 1 / row^2, would overflow)
    ks, qs = k_NRCK.view(*lead, n, s, K), q_NRCK.view(*lead, n, s, K)
    k_row, q_row = ks * row, qs * row
    k_inv = ks / row if inference else ks * offset.neg_().exp_()
    flat = (-1, s, K)   # 3-D bmm takes the transposed operand as is (a 5-D matmul would copy it)
    col = k_inv.view(flat).mT
    diag_k = torch.bmm(k_row.view(flat), col).view(*lead, n, s, s)
    diag_q = torch.bmm(q_row.view(flat), col).view(*lead, n, s, s)
    if n == 1 and ref.min() >= -MAX_SPAN:   # exp(ref) a normal float: exp(G) a product without underflow
        exp_ref, exp_last = ref.exp(), (G_NRCK[..., -1:, :] - ref.squeeze(-2)).exp()
        return Decayed(diag_k.view(*lead, C, C).tril_(-1), diag_q.view(*lead, C, C).tril_(0),
                       (q_row * exp_ref).view(*lead, C, K), (k_row * exp_ref).view(*lead, C, K),
                       (k_inv * exp_last.unsqueeze(-2)).view(*lead, C, K))
    out_k, out_q = k_NRCK.new_zeros(*lead, C, C), k_NRCK.new_zeros(*lead, C, C)
    for i in range(n):
        block = slice(i * s, (i + 1) * s)
        out_k[..., block, block] = diag_k[..., i, :, :]
        out_q[..., block, block] = diag_q[..., i, :, :]
    for j in range(n - 1):   # every later row against block j, around G at block j's end: two factors <= 1
        block, later = slice(j * s, (j + 1) * s), slice((j + 1) * s, C)
        end = last[..., j, :, :]
        col = (k_NRCK[..., block, :] * decay_exp(end - G_NRCK[..., block, :])).mT
        rows = decay_exp(G_NRCK[..., later, :] - end)
        out_k[..., later, block] = (k_NRCK[..., later, :] * rows) @ col
        out_q[..., later, block] = (q_NRCK[..., later, :] * rows) @ col
    return _with_direct_exps(out_k.tril_(-1), out_q.tril_(0), q_NRCK, k_NRCK, G_NRCK)


SEGMENT_BYTES = 4 << 20   # a segment's q, k, v in float32: small enough to stay in a core's cache


def segment_tokens(B: int, H: int, K: int, V: int, chunk: int) -> int:
    """Tokens per segment: long sequences run as a chain of segments (the state carried across),
    so the elementwise passes work in cache instead of streaming whole-sequence tensors through RAM."""
    per_token = B * H * (2 * K + V) * 4
    tokens = 1 << max(0, (SEGMENT_BYTES // max(1, per_token)).bit_length() - 1)
    tokens = min(2048, max(tokens, 256))
    return max(chunk, tokens // chunk * chunk)


def kda_chunked(q_BTHK, k_BTHK, v_BTHV, g_BTHK, beta_BTH, *, scale=None, initial_state=None,
                output_final_state=False, chunk_size=64):
    """Same contract as `kda_recurrent`; chunk_size a power of two (32 is the fastest on CPU)."""
    if chunk_size < 1 or chunk_size & (chunk_size - 1):
        raise ValueError(f"chunk_size {chunk_size} must be a power of two (16, 32, 64, ...)")
    B, T, H, K = k_BTHK.shape
    V = v_BTHV.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    out = torch.empty(B, T, H, V, dtype=q_BTHK.dtype, device=q_BTHK.device)
    L = segment_tokens(B, H, K, V, chunk_size)
    state = initial_state
    for s in range(0, max(T, 1), L):   # exact: a segment boundary is a chunk boundary with the state carried
        seg = slice(s, s + L)
        state = _kda_segment(q_BTHK[:, seg], k_BTHK[:, seg], v_BTHV[:, seg], g_BTHK[:, seg], beta_BTH[:, seg],
                             scale, state, out[:, seg], chunk_size)
    final = state.clone()   # already in the compute dtype (float32, or float64 for float64 inputs)
    return out, (final if output_final_state else None)


def _kda_segment(q_BTHK, k_BTHK, v_BTHV, g_BTHK, beta_BTH, scale, initial_state, out_BTHV, C):
    """One segment: writes its read-out into out_BTHV (a slice of the caller's output) and returns the
    state after its last token, [B, H, K, V] in the compute dtype."""
    dt = torch.float64 if q_BTHK.dtype == torch.float64 else torch.float32
    B, T, H, K = k_BTHK.shape
    V = v_BTHV.shape[-1]
    R = B * H
    pad = (-T) % C
    N = (T + pad) // C

    q, k, v, g = (chunk_major(x, C, dt) for x in (q_BTHK, k_BTHK, v_BTHV, g_BTHK))
    beta = chunk_major(beta_BTH.unsqueeze(-1), C, dt)              # [N, R, C, 1]
    G = torch.ones(C, C, dtype=dt, device=q.device).tril_() @ g     # the in-chunk cumsum, as a matmul (faster)
    grad = torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (q, k, v, g, beta, initial_state))
    d = _factored(q, k, G, inference=not grad) or _explicit(q, k, G)
    eye = torch.eye(C, dtype=dt, device=q.device)
    # (I + beta A)^-1 once (rhs width C), beta folded in as a column scale: [W | U] = inverse diag(beta) [exp(G) K | V]
    inverse = torch.linalg.solve_triangular(d.A_kk * beta, eye.expand_as(d.A_kk), upper=False, unitriangular=True)
    inverse = inverse * beta.mT
    W, U = inverse @ d.k_decayed, inverse @ v
    decay_last = decay_exp(G[..., -1:, :]).mT                        # [N, R, K, 1]
    S0 = (torch.zeros(R, K, V, dtype=dt, device=q.device) if initial_state is None
          else initial_state.to(dt).reshape(R, K, V))
    o, v_new, S = _state_loop(S0, U, W, decay_last, d.k_to_end, d.q_decayed, grad)
    # O = scale (Q exp(G) S + P V'), the scale folded into the matmul
    o = o.view(N * R, C, V).baddbmm_(d.P_qk.view(N * R, C, C), v_new.view(N * R, C, V), beta=scale, alpha=scale)
    o_BTHV = o.view(N, B, H, C, V).permute(1, 0, 3, 2, 4)            # [B, N, C, H, V]
    if pad:
        out_BTHV.copy_(o_BTHV.reshape(B, N * C, H, V)[:, :T])
    else:
        out_BTHV.view(B, N, C, H, V).copy_(o_BTHV)
    return S.view(B, H, K, V)


def _state_loop(S0, U, W, decay_last, k_to_end, q_decayed, grad: bool):
    """The sequential part, per chunk n: V' = U - W S, the read-out's Q exp(G) S while S is in cache, then
    S = exp(G_last) S + (exp(G_last - G) K)^T V'. Returns (Q exp(G) S [N, R, C, V], V' [N, R, C, V], the
    final S). Without autograd the loop works in place (V' overwrites U; two state buffers); with it every
    step makes new tensors (out= and in-place updates of saved tensors are not differentiable)."""
    N = U.shape[0]
    if grad:
        S, outs, v_new = S0, [], []
        for n in range(N):
            v_new.append(torch.baddbmm(U[n], W[n], S, alpha=-1))
            outs.append(q_decayed[n] @ S)
            S = torch.baddbmm(S * decay_last[n], k_to_end[n].mT, v_new[-1])
        return torch.stack(outs), torch.stack(v_new), S
    o = torch.empty_like(U)
    S, spare = S0.clone(), torch.empty_like(S0)
    # per-chunk views made once, in C++ (indexing inside the loop costs more than the smallest steps)
    for u, w, q, o_n, d, k_t in zip(U.unbind(0), W.unbind(0), q_decayed.unbind(0), o.unbind(0),
                                   decay_last.unbind(0), k_to_end.mT.unbind(0), strict=True):
        u.baddbmm_(w, S, alpha=-1)
        torch.bmm(q, S, out=o_n)
        torch.mul(S, d, out=spare)
        spare.baddbmm_(k_t, u)
        S, spare = spare, S
    return o, U, S
