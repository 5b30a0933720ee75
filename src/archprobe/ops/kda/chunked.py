"""KDA, chunked: an exact rewrite of `kda_recurrent` as matmuls over chunks of C tokens.

spec/kimi-k3.md section 2.1(a) step 7 (the WY representation, as in FLA's chunk_kda). Within a chunk,
with G the cumulative log-decay (per key channel) and A(X, Y)[r, s] = sum_c x_r[c] y_s[c] exp(G_r[c] - G_s[c]):

    L = beta_r * A(K, K) strictly below the diagonal;  (I + L) [W | U] = [beta exp(G) K | beta V]
    V' = U - W S;   O = (Q exp(G)) S + tril(A(Q, K)) V';   S = exp(G_last) S + (exp(G_last - G) K)^T V'

Numerics: exp(G_r - G_s) is never formed from exp(G_r) * exp(-G_s) over a whole chunk (that overflows
once the decay sums past ~88). A is computed per sub-block of S <= 16 query rows as one matmul of
two factors taken relative to a reference point at the start of that sub-block: the row factor is
<= 1, the column factor <= 1 for earlier tokens and at most exp(the sub-block's own decay span)
inside it (<= exp(80) with K3's -5 bound). When a sub-block's span exceeds that (unbounded gates),
the exact but slower explicit form ([S, S, K] decay differences) is used instead. The triangular
system is solved once per chunk, batched (torch.linalg.solve_triangular).
Legend: B batch, T tokens, H heads, K key dim, V value dim, N chunks, C chunk size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

SUB = 16
MAX_SPAN = 80.0  # exp(80) ~ 5.5e34: far from float32's 3.4e38 even after a K-term sum


def _explicit_products(x_BHNCK, y_BHNCK, G_BHNCK, include_diagonal: bool):
    """A(X, Y) [B, H, N, C, C] from the decay differences themselves (exact for any decay, slower):
    diagonal sub-blocks through an [S, S, K] decay tensor, earlier sub-blocks through factors <= 1."""
    B, H, N, C, K = x_BHNCK.shape
    s = min(SUB, C)
    n_sub = C // s
    out = x_BHNCK.new_zeros(B, H, N, C, C)
    xs = x_BHNCK.view(B, H, N, n_sub, s, K)
    ys = y_BHNCK.view(B, H, N, n_sub, s, K)
    Gs = G_BHNCK.view(B, H, N, n_sub, s, K)
    diff = Gs.unsqueeze(-2) - Gs.unsqueeze(-3)                      # [.., s(r), s(s), K]
    keep = torch.ones(s, s, dtype=torch.bool, device=x_BHNCK.device).tril(0 if include_diagonal else -1)
    decay = torch.where(keep[..., None], diff, torch.full_like(diff, -float("inf"))).exp()
    diag = torch.einsum("bhnirc,bhnisc,bhnirsc->bhnirs", xs, ys, decay)
    for i in range(n_sub):
        out[..., i * s:(i + 1) * s, i * s:(i + 1) * s] = diag[:, :, :, i]
        if i == 0:
            continue
        ref = G_BHNCK[:, :, :, i * s - 1].unsqueeze(-2)              # G at the end of the previous block
        xf = xs[:, :, :, i] * (Gs[:, :, :, i] - ref).exp()             # <= 1
        yf = y_BHNCK[:, :, :, :i * s] * (ref - G_BHNCK[:, :, :, :i * s]).exp()   # <= 1
        out[..., i * s:(i + 1) * s, :i * s] = xf @ yf.transpose(-1, -2)
    return out


def _decayed_products(q_BHNCK, k_BHNCK, G_BHNCK):
    """(A(K, K) strictly lower, A(Q, K) lower incl. diagonal), each [B, H, N, C, C].

    Fast path, per sub-block of s rows, with E_j = G at the end of sub-block j (E_-1 = 0):
      exp(G_r - G_s) = exp(G_r - E_{i-1}) * exp(E_{i-1} - E_j) * exp(E_j - G_s)   (r in block i, s in j < i)
    three factors <= 1, and inside a sub-block exp(G_r - G_s) = exp(G_r - E_{i-1}) * exp(E_{i-1} - G_s),
    the second factor <= exp(MAX_SPAN). Two exps per element; the rest are products. When a
    sub-block's decay span exceeds MAX_SPAN (unbounded gates), the explicit path is taken instead.
    """
    B, H, N, C, K = k_BHNCK.shape
    s = min(SUB, C)
    n = C // s
    Gs = G_BHNCK.view(B, H, N, n, s, K)
    end = Gs[..., -1, :]                                              # E_j  [B, H, N, n, K]
    start = F.pad(end, (0, 0, 1, 0))[..., :n, :]                     # E_{i-1}
    if (start - end).max() > MAX_SPAN:
        return (_explicit_products(k_BHNCK, k_BHNCK, G_BHNCK, False),
                _explicit_products(q_BHNCK, k_BHNCK, G_BHNCK, True), None)
    row = (Gs - start.unsqueeze(-2)).exp()                           # <= 1, >= exp(-MAX_SPAN)
    # exp(E_{i-1} - G_s) <= exp(MAX_SPAN); an exp, not 1 / row, whose gradient (1 / row^2) would overflow
    inv = (start.unsqueeze(-2) - Gs).exp()
    col = (end - start).exp().unsqueeze(-2) * inv                    # exp(E_i - G_s) <= 1, a product
    ks = k_BHNCK.view(B, H, N, n, s, K)
    k_rows = ks * row                                                # the two left factors, apart: no
    q_rows = q_BHNCK.view(B, H, N, n, s, K) * row                    # stacked copy, no broadcast copies
    k_diag = (ks * inv).transpose(-1, -2)                            # [B, H, N, n, K, s]
    k_col = (ks * col).transpose(-1, -2)                             # [B, H, N, n, K, s]
    out_k = k_BHNCK.new_zeros(B, H, N, C, C)
    out_q = k_BHNCK.new_zeros(B, H, N, C, C)
    diag_k, diag_q = k_rows @ k_diag, q_rows @ k_diag                # [B, H, N, n, s, s]
    for i in range(n):
        rows = slice(i * s, (i + 1) * s)
        if i:
            pair = (start[..., i:i + 1, :] - end[..., :i, :]).exp()   # exp(E_{i-1} - E_j) <= 1, [.., i, K]
            # earlier sub-blocks' key factors, scaled into block i's frame, side by side: [B, H, N, K, i*s]
            earlier = (k_col[..., :i, :, :] * pair.unsqueeze(-1)).permute(0, 1, 2, 4, 3, 5).reshape(
                B, H, N, K, i * s)
            out_k[..., rows, : i * s] = k_rows[..., i, :, :] @ earlier
            out_q[..., rows, : i * s] = q_rows[..., i, :, :] @ earlier
        out_k[..., rows, rows] = diag_k[..., i, :, :]
        out_q[..., rows, rows] = diag_q[..., i, :, :]
    return out_k.tril_(-1), out_q.tril_(0), (start, row, end, col)


SEGMENT_BYTES = 6 << 20   # a segment's q, k, v in float32: small enough to stay in a core's cache


def segment_tokens(B: int, H: int, K: int, V: int, chunk: int) -> int:
    """Tokens per segment: long sequences run as a chain of segments (the state carried across),
    so the elementwise passes work in cache instead of streaming whole-sequence tensors through RAM."""
    per_token = B * H * (2 * K + V) * 4
    tokens = 1 << max(0, (SEGMENT_BYTES // max(1, per_token)).bit_length() - 1)
    tokens = min(2048, max(tokens, 256))
    return max(chunk, tokens // chunk * chunk)


def kda_chunked(q_BTHK, k_BTHK, v_BTHV, g_BTHK, beta_BTH, *, scale=None, initial_state=None,
                output_final_state=False, chunk_size=64):
    """Same contract as `kda_recurrent`; chunk_size a power of two (16, 32, 64, ...)."""
    if chunk_size < 1 or (chunk_size > SUB and chunk_size % SUB):
        raise ValueError(f"chunk_size {chunk_size} must be <= {SUB} or a multiple of {SUB}")
    B, T, H, K = k_BTHK.shape
    L = segment_tokens(B, H, K, v_BTHV.shape[-1], chunk_size)
    if T <= L:
        return _kda_chunked(q_BTHK, k_BTHK, v_BTHV, g_BTHK, beta_BTH, scale, initial_state, output_final_state,
                            chunk_size)
    outs, state = [], initial_state
    for s in range(0, T, L):   # exact: a segment boundary is a chunk boundary with the state carried
        o, state = _kda_chunked(q_BTHK[:, s:s + L], k_BTHK[:, s:s + L], v_BTHV[:, s:s + L], g_BTHK[:, s:s + L],
                                beta_BTH[:, s:s + L], scale, state, True, chunk_size)
        outs.append(o)
    return torch.cat(outs, dim=1), (state if output_final_state else None)


def _kda_chunked(q_BTHK, k_BTHK, v_BTHV, g_BTHK, beta_BTH, scale, initial_state, output_final_state, chunk_size):
    dt = torch.float64 if q_BTHK.dtype == torch.float64 else torch.float32
    B, T, H, K = k_BTHK.shape
    V = v_BTHV.shape[-1]
    C = chunk_size
    scale = K ** -0.5 if scale is None else scale
    pad = (-T) % C
    N = (T + pad) // C

    def prep(x, last):  # [B, T, H, X] -> [B, H, N, C, X] in the compute dtype, zero-padded
        x = x.to(dt).transpose(1, 2)
        if pad:
            x = F.pad(x, (0, 0, 0, pad))
        return x.reshape(B, H, N, C, last)

    q = prep(q_BTHK, K) * scale
    k = prep(k_BTHK, K)
    v = prep(v_BTHV, V)
    g = prep(g_BTHK, K)
    beta = prep(beta_BTH.unsqueeze(-1), 1)                          # [B, H, N, C, 1]
    G = g.cumsum(dim=-2)
    A_kk, P_qk, factors = _decayed_products(q, k, G)
    eye = torch.eye(C, dtype=dt, device=q.device)
    system = eye + beta * A_kk                                       # unit lower triangular
    G_last = G[..., -1:, :]                                          # [B, H, N, 1, K]
    if factors is None:
        rhs_decay, to_end = G.exp(), (G_last - G).exp()
    else:  # exp(G) = exp(E_{i-1}) row and exp(G_last - G) = exp(G_last - E_i) col: products, no new exps
        start, row, end, col = factors
        shape = G.shape
        rhs_decay = (start.exp().unsqueeze(-2) * row).reshape(shape)
        to_end = ((G_last.unsqueeze(-2) - end.unsqueeze(-2)).exp() * col).reshape(shape)
    # inverse of the unit triangular system once (rhs width C), then one batched matmul for [W | U]
    inverse = torch.linalg.solve_triangular(system, eye.expand_as(system), upper=False, unitriangular=True)
    W = inverse @ (beta * rhs_decay * k)
    U = inverse @ (beta * v)
    q_decayed = q * rhs_decay
    k_to_end = k * to_end
    decay_last = G_last.squeeze(-2).exp().unsqueeze(-1)              # [B, H, N, K, 1]
    # chunk-major copies, once: each step of the sequential loop then reads contiguous [B, H, C, *]
    # blocks (a slice along N of [B, H, N, ...] would be copied by every matmul in the loop)
    U, W, q_decayed, P_qk, k_to_end, decay_last = (
        x.movedim(2, 0).contiguous() for x in (U, W, q_decayed, P_qk, k_to_end, decay_last))
    S = (torch.zeros(B, H, K, V, dtype=dt, device=q.device) if initial_state is None
         else initial_state.to(dt).clone())
    outs = []
    for n in range(N):
        v_new = U[n] - W[n] @ S
        outs.append(q_decayed[n] @ S + P_qk[n] @ v_new)
        S = decay_last[n] * S + k_to_end[n].transpose(-1, -2) @ v_new
    o = torch.stack(outs).permute(1, 0, 3, 2, 4).reshape(B, N * C, H, V)[:, :T].to(q_BTHK.dtype)
    final = S if dt == torch.float64 else S.to(torch.float32)
    return o, (final if output_final_state else None)
