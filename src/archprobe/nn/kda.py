"""Kimi Delta Attention as a module, in the K3 and Kimi Linear forms.

Kimi Linear, arXiv 2510.26692; spec/kimi-k3.md section 2.1(a). Per layer:
  q, k, v = SiLU(causal depthwise conv_4(W_{q,k,v} x));  q, k L2-normalised per head
  beta    = sigmoid(b_proj x)                                       [heads]
  g       = -5 * sigmoid(exp(A_log) * (f_b(f_a x) + dt_bias))    (K3, bounded "safe gate"), or
            -exp(A_log) * softplus(f_b(f_a x) + dt_bias)          (Kimi Linear, unbounded)
  o       = kda(q, k, v, g, beta);  o = o_norm(o, g_proj x) (or g_b_proj(g_a_proj x));  o_proj(o)
`decay_rank=0` is a full-rank decay projection `f_proj` [D, H] in place of f_b(f_a x) (Bailing / Ling 3).
`A_log` is one scalar per head. K3 stores it zero-padded to 128 entries and Kimi Linear as
[1, 1, heads, 1]; both load into `A_log_stored` shape and only the first `heads` entries are read.
The cache keeps the last (kernel - 1) pre-conv projections and the [heads, K, V] float32 state.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from archprobe.nn.conv import DepthwiseConv, causal_conv
from archprobe.nn.norm import GatedRMSNorm, l2norm
from archprobe.ops.kda import kda_chunked, kda_recurrent


def run_delta_rule(q, k, v, g, beta, state, chunk_size: int | None, scale=None):
    """(o, final state): the recurrence for one decoded token after a prefill (no chunk to fill), the
    chunked form otherwise. Shared by KDA and Gated DeltaNet."""
    if q.shape[1] == 1 and state is not None:
        return kda_recurrent(q, k, v, g, beta, scale=scale, initial_state=state, output_final_state=True)
    return kda_chunked(q, k, v, g, beta, scale=scale, initial_state=state, output_final_state=True,
                       chunk_size=chunk_size)


@dataclass
class KDACache:
    conv: torch.Tensor        # [B, q|k|v channels, kernel - 1] pre-conv projections
    state: torch.Tensor       # [B, H, K, V] float32

    def nbytes(self) -> int:
        return self.conv.numel() * self.conv.element_size() + self.state.numel() * self.state.element_size()


class KimiDeltaAttention(nn.Module):
    def __init__(self, hidden: int, heads: int, head_dim: int, *, conv_kernel: int = 4, gate: str = "bounded",
                 gate_lower_bound: float = -5.0, output_gate: str = "full_rank", a_log_len: int | None = None,
                 norm_eps: float = 1e-5, decay_rank: int | None = None, chunk_size: int | None = None):
        super().__init__()
        if gate not in ("bounded", "softplus"):
            raise ValueError(f"gate must be 'bounded' (K3) or 'softplus' (Kimi Linear), not {gate!r}")
        if output_gate not in ("full_rank", "low_rank"):
            raise ValueError(f"output_gate must be 'full_rank' or 'low_rank', not {output_gate!r}")
        D = heads * head_dim
        rank = head_dim if decay_rank is None else decay_rank
        self.heads, self.head_dim = heads, head_dim
        self.gate, self.gate_lower_bound, self.output_gate, self.chunk_size = gate, gate_lower_bound, output_gate, \
            chunk_size
        self.q_proj = nn.Linear(hidden, D, bias=False)
        self.k_proj = nn.Linear(hidden, D, bias=False)
        self.v_proj = nn.Linear(hidden, D, bias=False)
        self.q_conv1d, self.k_conv1d, self.v_conv1d = (DepthwiseConv(D, conv_kernel) for _ in range(3))
        if rank:
            self.f_a_proj = nn.Linear(hidden, rank, bias=False)
            self.f_b_proj = nn.Linear(rank, D, bias=False)
        else:
            self.f_proj = nn.Linear(hidden, D, bias=False)
        self.dt_bias = nn.Parameter(torch.zeros(D))
        self.A_log = nn.Parameter(torch.zeros(a_log_len or heads))
        self.b_proj = nn.Linear(hidden, heads, bias=False)
        if output_gate == "full_rank":
            self.g_proj = nn.Linear(hidden, D, bias=False)
        else:
            self.g_a_proj = nn.Linear(hidden, head_dim, bias=False)
            self.g_b_proj = nn.Linear(head_dim, D, bias=False)
        self.o_norm = GatedRMSNorm(head_dim, eps=norm_eps)
        self.o_proj = nn.Linear(D, hidden, bias=False)

    def decay(self, x: torch.Tensor) -> torch.Tensor:
        """Per-channel log-decay g [B, T, H, K] (<= 0)."""
        f = (self.f_b_proj(self.f_a_proj(x)) if hasattr(self, "f_a_proj") else self.f_proj(x)).float()
        f = f + self.dt_bias.float()
        f = f.unflatten(-1, (self.heads, self.head_dim))
        a = self.A_log.float().reshape(-1)[: self.heads].exp()[:, None]
        if self.gate == "bounded":
            return self.gate_lower_bound * torch.sigmoid(a * f)
        return -a * F.softplus(f)

    def _conv(self, mixed_BCT: torch.Tensor, cache: KDACache | None):
        """SiLU(causal depthwise conv); returns (out [B, 3D, T], new conv cache)."""
        weight = torch.cat([self.q_conv1d.weight, self.k_conv1d.weight, self.v_conv1d.weight], dim=0)
        out, new_cache = causal_conv(mixed_BCT, weight, None, cache.conv if cache is not None else None)
        return F.silu(out).to(mixed_BCT.dtype), new_cache

    def forward(self, x: torch.Tensor, cache: KDACache | None = None, use_cache: bool = False):
        B, T, _ = x.shape
        H, K = self.heads, self.head_dim
        mixed = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1).transpose(1, 2)
        conv_out, conv_cache = self._conv(mixed, cache)
        q, k, v = conv_out.transpose(1, 2).split(H * K, dim=-1)
        q = l2norm(q.unflatten(-1, (H, K)))
        k = l2norm(k.unflatten(-1, (H, K)))
        v = v.unflatten(-1, (H, K))
        g = self.decay(x)
        beta = torch.sigmoid(self.b_proj(x).float())
        o, new_state = run_delta_rule(q, k, v.float(), g, beta, cache.state if cache is not None else None,
                                      self.chunk_size)
        gate = self.g_proj(x) if self.output_gate == "full_rank" else self.g_b_proj(self.g_a_proj(x))
        o = self.o_norm(o, gate.unflatten(-1, (H, K))).to(x.dtype).flatten(-2)
        new_cache = KDACache(conv_cache, new_state) if (use_cache or cache is not None) else None
        return self.o_proj(o), new_cache
