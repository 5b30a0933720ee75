"""Quantized checkpoint tensors -> dense loaders, by the companions' names (the card binds them as
`<role>#weight_packed`, `#weight_scale`, `#weight_shape`, `#weight_zero_point`, `#weight_scale_inv`).

Per-expert tensors stay packed when the MoE keeps its experts packed (ExpertBank storage `mxfp4`).
"""

from __future__ import annotations

import torch

from archprobe.ops.quant import dequantize_fp8_block, dequantize_int4_packed, dequantize_mxfp4, dequantize_nvfp4
from archprobe.validate.plan import Unsupported

# the stored pieces of a quantized `X.weight` that lazy_dequantize turns into one loader of `X.weight`
COMPANIONS = (".weight_packed", ".weight_scale", ".weight_shape", ".weight_zero_point", ".weight_global_scale",
              ".weight_scale_inv")


def dequantized_name(name: str) -> str:
    """The module name a stored piece loads as once dequantized (`qkv.weight_packed` -> `qkv.weight`)."""
    for suffix in COMPANIONS:
        if name.endswith(suffix):
            return name[: -len(suffix)] + ".weight"
    return name


def lazy_dequantize(names: dict[str, str], get, dtype: torch.dtype, keep_packed_experts: bool = False) -> dict:
    """module name -> zero-argument loader of the dense tensor (`names`: module name -> checkpoint name).

    MXFP4 (`X.weight_packed` U8 + `X.weight_scale`), INT4 pack-quantized (`X.weight_packed` I32 +
    `X.weight_scale` + `X.weight_shape` [+ `X.weight_zero_point`]), NVFP4 (`X.weight_packed` U8 +
    `X.weight_scale` + `X.weight_global_scale`) and FP8 (`X.weight` +
    `X.weight_scale_inv`) become a loader of `X.weight`; nothing is read until the loader is called
    (experts: one at a time)."""
    out: dict = {}
    for m, n in names.items():
        companion = m.endswith((".weight_shape", ".weight_zero_point", ".weight_global_scale"))
        if companion and m.rsplit(".", 1)[0] + ".weight_packed" in names:
            continue
        if keep_packed_experts and ".experts." in m and m.endswith((".weight_packed", ".weight_scale")) \
                and m.rsplit(".", 1)[0] + ".weight_global_scale" not in names:   # MXFP4 only, not NVFP4
            out[m] = (lambda n=n: get(n))    # stays packed: ExpertBank(storage="mxfp4") dequantizes on use
            continue
        if m.endswith(".weight_scale") and m[: -len("_scale")] + "_packed" in names:
            continue
        if m.endswith(".weight_scale_inv"):
            continue
        if m.endswith(".weight_packed"):
            base = m[: -len("_packed")]
            scale = names.get(base + "_scale")
            if scale is None:
                raise Unsupported(f"{n}: packed weight without its weight_scale")
            shape_name = names.get(base + "_shape")
            global_scale = names.get(base + "_global_scale")
            if global_scale is not None:
                out[base] = (lambda n=n, s=scale, g=global_scale: dequantize_nvfp4(get(n), get(s), get(g),
                                                                                   dtype=dtype))
            elif shape_name is not None:   # int4 pack-quantized carries its dense shape; MXFP4 does not
                zp = names.get(base + "_zero_point")
                out[base] = (lambda n=n, s=scale, sh=shape_name, z=zp: dequantize_int4_packed(
                    get(n), get(s), get(sh).tolist(), zero_point=get(z) if z else None, dtype=dtype))
            else:
                out[base] = (lambda n=n, s=scale: dequantize_mxfp4(get(n), get(s), dtype=dtype))
        elif m + "_scale_inv" in names:
            out[m] = (lambda n=n, s=names[m + "_scale_inv"]: dequantize_fp8_block(get(n), get(s), dtype=dtype))
        else:
            out[m] = (lambda n=n: _cast(get(n), dtype))
    return out


def _cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t.to(dtype) if t.is_floating_point() else t
