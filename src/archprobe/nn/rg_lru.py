"""Griffin's recurrent block with the RG-LRU (Real-Gated Linear Recurrent Unit), as RecurrentGemma lays it out.

Griffin, arXiv 2402.19427 (section 2.4). Per token, channels in blocks of heads x b:
  y = act(linear_y h);  x = causal depthwise conv(linear_x h) + bias
  i = sigmoid(x W_in + b_in);  r = sigmoid(x W_a + b_a)            # block-diagonal gates [heads, b, b]
  log a = -8 r softplus(a_param);  a = exp(log a)
  s_t = a_t s_{t-1} + sqrt(1 - a_t^2) (i_t x_t)                    # at position 0: s_0 = i_0 x_0
  out = linear_out(s * y)
The recurrence is the plain token-by-token loop (the definition). The decode cache holds the conv's last
(K - 1) inputs, the float32 state and the position (the first token has no sqrt(1 - a^2) factor).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from archprobe.nn.activations import plain
from archprobe.nn.conv import DepthwiseConv, causal_conv


@dataclass
class RGLRUCache:
    conv: torch.Tensor     # [B, C, kernel - 1] pre-conv x
    state: torch.Tensor    # [B, C] float32
    pos: int

    def nbytes(self) -> int:
        return self.conv.numel() * self.conv.element_size() + self.state.numel() * self.state.element_size()


class BlockDiagonal(nn.Module):
    """x [.., heads * b] -> per head x_h @ weight_h + bias_h; weight [heads, b, b] stored (in, out)."""

    def __init__(self, heads: int, block: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(heads, block, block))
        self.bias = nn.Parameter(torch.zeros(heads, block))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.unflatten(-1, (self.weight.shape[0], -1))
        return (torch.einsum("...hi,hio->...ho", h, self.weight) + self.bias).flatten(-2)


class RGLRUBlock(nn.Module):
    """Checkpoint names: x, y, o ([C, H], [C, H], [H, C], with biases), conv1d [C, 1, K] + bias,
    input_gate / recurrent_gate (BlockDiagonal), a_param [C]."""

    def __init__(self, hidden: int, width: int, heads: int, conv_kernel: int = 4, act: str = "gelu_pytorch_tanh"):
        super().__init__()
        self.x = nn.Linear(hidden, width)
        self.y = nn.Linear(hidden, width)
        self.o = nn.Linear(width, hidden)
        self.conv1d = DepthwiseConv(width, conv_kernel, bias=True)
        self.input_gate = BlockDiagonal(heads, width // heads)
        self.recurrent_gate = BlockDiagonal(heads, width // heads)
        self.a_param = nn.Parameter(torch.zeros(width))
        self.act = plain(act)

    def forward(self, h: torch.Tensor, cache: RGLRUCache | None = None, use_cache: bool = False):
        B, T, _ = h.shape
        y = self.act(self.y(h))
        xc, conv_cache = causal_conv(self.x(h).transpose(1, 2), self.conv1d.weight, self.conv1d.bias,
                                     cache.conv if cache is not None else None)
        x = xc.transpose(1, 2)
        gate_i = torch.sigmoid(self.input_gate(x).float())
        log_a = -8.0 * torch.sigmoid(self.recurrent_gate(x).float()) * F.softplus(self.a_param.float())
        a = torch.exp(log_a)
        start = cache.pos if cache is not None else 0
        first = (torch.arange(start, start + T, device=h.device) == 0)[None, :, None]
        scale = torch.where(first, torch.ones_like(a), torch.sqrt(1 - torch.exp(2 * log_a)))
        u = x.float() * gate_i * scale
        s = cache.state if cache is not None else h.new_zeros(B, x.shape[-1], dtype=torch.float32)
        outs = []
        for t in range(T):
            s = torch.where(first[:, t], torch.zeros_like(s), a[:, t] * s) + u[:, t]
            outs.append(s)
        out = self.o((torch.stack(outs, dim=1) * y.float()).to(h.dtype))
        return out, (RGLRUCache(conv_cache, s, start + T) if (use_cache or cache is not None) else None)
