"""Dequantization of stored weight formats into a dense [out, in] matrix.

* MXFP4 (compressed-tensors `mxfp4-pack-quantized`): packed U8 [out, in/2], low nibble = even
  column; E2M1 codes (bit 3 sign, bits 0-2 index {0, .5, 1, 1.5, 2, 3, 4, 6}); E8M0 scale U8
  [out, in/32], value 2^(s - 127). spec/kimi-k3.md section 1.3.
* INT4 (compressed-tensors `pack-quantized`, Kimi K2 Thinking style): `weight_packed` I32
  [out, ceil(in/8)], element i of a row at bits 4i..4i+3 of the row's little-endian bit stream,
  stored as q + 8 (q in [-8, 7]); `weight_scale` [out, in/group] (group along the input);
  optional `weight_zero_point` (asymmetric; compressed-tensors packs it too, eight rows per I32 along the
  output dimension: [ceil(out/8), groups], each q + 8); `weight_shape` [2] the dense shape.
  value = (q - zero) * scale.
* NVFP4 (compressed-tensors `nvfp4-pack-quantized`): `weight_packed` U8 [out, in/2] (E2M1 codes as
  MXFP4), `weight_scale` F8_E4M3 [out, in/16], `weight_global_scale` F32 [1];
  value = code * (scale / global_scale).
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


def dequantize_int4_packed(packed: torch.Tensor, scale: torch.Tensor, shape, *, zero_point: torch.Tensor | None = None,
                           dtype=torch.bfloat16) -> torch.Tensor:
    out, inp = (int(x) for x in shape)
    if packed.dtype != torch.int32 or packed.shape[0] != out or packed.shape[1] * 8 < inp:
        raise ValueError(f"weight_packed {list(packed.shape)} {packed.dtype} cannot hold int4 [{out}, {inp}]")
    as_bytes = packed.contiguous().view(torch.uint8)           # little-endian: byte j holds elements 2j, 2j+1
    if as_bytes.device.type == "cpu" and __import__("sys").byteorder == "big":
        as_bytes = as_bytes.view(out, -1, 4).flip(-1).reshape(out, -1)
    q = torch.stack([as_bytes & 0x0F, as_bytes >> 4], dim=-1).reshape(out, -1)[:, :inp].to(torch.int32) - 8
    group = inp // scale.shape[1]
    if group * scale.shape[1] != inp:
        raise ValueError(f"weight_scale {list(scale.shape)} does not split {inp} input columns into equal groups")
    values = q.float()
    if zero_point is not None:
        zero_point = unpack_int4_rows(zero_point, out)
        values = values - zero_point.float().repeat_interleave(group, dim=1)
    return (values * scale.float().repeat_interleave(group, dim=1)).to(dtype)


def unpack_int4_rows(zero_point: torch.Tensor, out: int) -> torch.Tensor:
    """A zero point as compressed-tensors stores it (I32 [ceil(out/8), groups], eight 4-bit rows per word,
    each z + 8) -> [out, groups]; one already [out, groups] (unpacked) is returned as is."""
    if zero_point.dtype != torch.int32 or zero_point.shape[0] != -(-out // 8) or zero_point.dim() != 2:
        return zero_point
    words = zero_point.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(8, device=zero_point.device) * 4
    nibbles = (words.unsqueeze(1) >> shifts.view(1, 8, 1)) & 0x0F     # [rows/8, 8, groups]
    return (nibbles.reshape(-1, zero_point.shape[1])[:out] - 8).to(torch.int32)


def dequantize_nvfp4(packed: torch.Tensor, scale: torch.Tensor, global_scale: torch.Tensor, *, group: int = 16,
                     dtype=torch.bfloat16) -> torch.Tensor:
    packed = packed.to(torch.uint8)
    out, half = packed.shape
    if scale.shape != (out, half * 2 // group):
        raise ValueError(f"weight_scale {list(scale.shape)} does not give one scale per {group} values of "
                         f"[{out}, {half * 2}]")
    codes = torch.stack([packed & 0x0F, packed >> 4], dim=-1).reshape(out, half * 2).long()
    table = torch.tensor(E2M1 + tuple(-x for x in E2M1), dtype=torch.float32, device=packed.device)
    factors = scale.to(torch.float32) / global_scale.to(torch.float32).reshape(())
    return (table[codes].view(out, -1, group) * factors.unsqueeze(-1)).reshape(out, half * 2).to(dtype)


def dequantize_fp8_block(weight: torch.Tensor, scale_inv: torch.Tensor, *, block: int = 128,
                         dtype=torch.bfloat16) -> torch.Tensor:
    out, inp = weight.shape
    expected = (-(-out // block), -(-inp // block))
    if tuple(scale_inv.shape) != expected:
        raise ValueError(f"weight_scale_inv {list(scale_inv.shape)} does not match [{out}, {inp}] in {block}x{block} "
                         f"blocks (expected {list(expected)})")
    s = scale_inv.float().repeat_interleave(block, 0)[:out].repeat_interleave(block, 1)[:, :inp]
    return (weight.float() * s).to(dtype)
