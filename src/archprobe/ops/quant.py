"""Dequantization of stored weight formats into a dense [out, in] matrix.

* MXFP4 (compressed-tensors `mxfp4-pack-quantized`): packed U8 [out, in/2], low nibble = even
  column; E2M1 codes (bit 3 sign, bits 0-2 index {0, .5, 1, 1.5, 2, 3, 4, 6}); E8M0 scale U8
  [out, in/32], value 2^(s - 127). spec/kimi-k3.md section 1.3.
* FP8 with block scales (DeepSeek style): weight F8_E4M3 [out, in], `weight_scale_inv` F32
  [ceil(out/b), ceil(in/b)] multiplies each b x b block.
"""

from __future__ import annotations

import torch

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
MX_GROUP = 32


def dequantize_mxfp4(packed: torch.Tensor, scale: torch.Tensor, *, dtype=torch.bfloat16) -> torch.Tensor:
    packed = packed.to(torch.uint8)
    out, half = packed.shape
    codes = torch.stack([packed & 0x0F, packed >> 4], dim=-1).reshape(out, half * 2).long()
    table = torch.tensor(E2M1 + tuple(-x for x in E2M1), dtype=torch.float32, device=packed.device)
    values = table[codes]
    factors = torch.exp2(scale.to(torch.float32) - 127.0)
    return (values.view(out, -1, MX_GROUP) * factors.unsqueeze(-1)).reshape(out, half * 2).to(dtype)


def dequantize_fp8_block(weight: torch.Tensor, scale_inv: torch.Tensor, *, block: int = 128,
                         dtype=torch.bfloat16) -> torch.Tensor:
    out, inp = weight.shape
    expected = (-(-out // block), -(-inp // block))
    if tuple(scale_inv.shape) != expected:
        raise ValueError(f"weight_scale_inv {list(scale_inv.shape)} does not match [{out}, {inp}] in {block}x{block} "
                         f"blocks (expected {list(expected)})")
    s = scale_inv.float().repeat_interleave(block, 0)[:out].repeat_interleave(block, 1)[:, :inp]
    return (weight.float() * s).to(dtype)
