"""KDA, the definition: the gated delta rule with channel-wise decay, one token at a time.

Kimi Linear, arXiv 2510.26692; spec/kimi-k3.md section 2.1(a) step 6. Per head, state S [K, V]:

    S = diag(exp(g_t)) S                       # decay indexes the KEY dimension (rows)
    S = S + k_t (beta_t (v_t - S^T k_t))^T     # delta rule
    o_t = S^T (scale q_t)                      # read-out after the update

Legend: B batch, T tokens, H heads, K key dim, V value dim. q/k are used as given (the module does
the L2 norm); the gate transform lives in the module. Math in float32 (float64 inputs stay float64).
"""

from __future__ import annotations

import torch


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """float64 for float64 inputs, else float32 (the state and every product, whatever the inputs' dtype);
    the chunked form computes in the same one."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def kda_recurrent(q_BTHK, k_BTHK, v_BTHV, g_BTHK, beta_BTH, *, scale=None, initial_state=None,
                  output_final_state=False):
    """Returns (o [B, T, H, V] in q's dtype, final state [B, H, K, V] float32 or None)."""
    dt = compute_dtype(q_BTHK)
    B, T, H, K = k_BTHK.shape
    V = v_BTHV.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    g_BTHK = g_BTHK.unsqueeze(-1) if g_BTHK.dim() == 3 else g_BTHK   # one decay per head (Gated DeltaNet)
    q, k, v, g, beta = (x.to(dt) for x in (q_BTHK, k_BTHK, v_BTHV, g_BTHK, beta_BTH))
    S = (torch.zeros(B, H, K, V, dtype=dt, device=q.device) if initial_state is None
         else initial_state.to(dt).clone())
    out = torch.empty(B, T, H, V, dtype=dt, device=q.device)
    for t in range(T):
        S = S * g[:, t].exp().unsqueeze(-1)
        kt = k[:, t]
        delta = beta[:, t].unsqueeze(-1) * (v[:, t] - torch.einsum("bhkv,bhk->bhv", S, kt))
        S = S + kt.unsqueeze(-1) * delta.unsqueeze(-2)
        out[:, t] = torch.einsum("bhkv,bhk->bhv", S, q[:, t] * scale)
    final = S.to(torch.float32) if dt != torch.float64 else S
    return out.to(q_BTHK.dtype), (final if output_final_state else None)
