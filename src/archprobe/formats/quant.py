"""Quantization schemes: what a stored element means, and which tensors are only metadata.

A packed 4-bit byte holds two parameters; scales, zero points and global scales are not parameters.
Each scheme is recognised from the tensors themselves (names of siblings, dtypes, shape ratios) and
confirmed by `quantization_config` when the config has one. `classify` assigns every tensor a
`QuantRole`: the scheme it belongs to, how many logical parameters one stored tensor holds, and
whether it is metadata.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archprobe.formats.dtypes import FLOATS, FP8, SCALE_ONLY
from archprobe.formats.gguf import ggml_type, gguf_dtype, is_gguf_dtype
from archprobe.formats.safetensors import TensorInfo

PLAIN_DTYPES = FLOATS | {gguf_dtype(f) for f in FLOATS}
FP8_DTYPES = FP8   # formats/dtypes.py
CT_META_SUFFIXES = ("weight_scale", "weight_zero_point", "weight_global_scale", "input_global_scale",
                    "weight_shape", "weight_g_idx", "input_scale", "output_scale", "k_scale", "v_scale")


@dataclass
class QuantRole:
    scheme: str | None          # None: plain floating point
    params: int                 # logical parameters per stored tensor (0 for metadata)
    metadata: bool = False
    bits: float | None = None
    group_size: int | None = None


def _qconfig_info(qconfig: dict | None) -> tuple[str, int | None, int | None]:
    """(format/method, bits, group_size) from a quantization_config of any flavour."""
    if not isinstance(qconfig, dict):
        return "", None, None
    fmt = str(qconfig.get("format") or qconfig.get("quant_method") or "")
    bits = qconfig.get("bits") or qconfig.get("num_bits")
    group = qconfig.get("group_size")
    groups = qconfig.get("config_groups")
    if isinstance(groups, dict):
        for g in groups.values():
            if isinstance(g, dict):
                fmt = str(g.get("format") or fmt)
                w = g.get("weights") if isinstance(g.get("weights"), dict) else {}
                bits = w.get("num_bits", bits)
                group = w.get("group_size", group)
                break
    if "weight_block_size" in qconfig and isinstance(qconfig["weight_block_size"], list):
        group = qconfig["weight_block_size"][-1]
    bits = bits if isinstance(bits, int) and not isinstance(bits, bool) and 0 < bits <= 64 else None
    return fmt.lower(), bits, (group if isinstance(group, int) and group > 0 else None)


def _gguf_role(t: TensorInfo) -> QuantRole:
    qtype = ggml_type(t.dtype)
    if t.dtype in PLAIN_DTYPES:
        return QuantRole(None, t.numel)
    bits = 8.0 * t.nbytes / t.numel if t.numel else None
    block = None
    try:
        import gguf

        block = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[qtype]][0]
    except (ImportError, KeyError):
        pass
    return QuantRole(f"gguf_{qtype.lower()}", t.numel, bits=round(bits, 3) if bits else None, group_size=block)


def classify(tensors: list[TensorInfo], qconfig: dict | None = None) -> dict[str, QuantRole]:
    """name -> QuantRole for every tensor (names as folded by the header reader)."""
    by_name = {t.name: t for t in tensors}
    fmt, cfg_bits, cfg_group = _qconfig_info(qconfig)
    roles: dict[str, QuantRole] = {}
    children = _children_table(by_name)

    def meta(name: str, scheme: str) -> None:
        if name in by_name:
            roles[name] = QuantRole(scheme, 0, metadata=True)

    for t in tensors:
        name = t.name
        if name in roles:
            continue
        if is_gguf_dtype(t.dtype):
            roles[name] = _gguf_role(t)
            continue
        base, _, leaf = name.rpartition(".")

        def sib(suffix: str, base: str = base) -> TensorInfo | None:
            return by_name.get(f"{base}.{suffix}" if base else suffix)

        if leaf == "weight_packed":
            scale = sib("weight_scale")
            if "nvfp4" in fmt or sib("weight_global_scale") is not None:
                scheme, bits = "nvfp4", 4
            elif "mxfp4" in fmt or (scale is not None and scale.dtype == "U8" and "pack-quantized" not in fmt):
                scheme, bits = "mxfp4", 4
            else:
                scheme, bits = "int4_pack", cfg_bits or 4
            per_elem = (32 if t.dtype in ("I32", "U32") else 8) // bits
            logical = t.numel * per_elem
            group = cfg_group
            if scale is not None and scale.shape and t.shape and scale.shape[-1]:
                group = (t.shape[-1] * per_elem) // scale.shape[-1]
            roles[name] = QuantRole(scheme, logical, bits=bits, group_size=group)
            for s in CT_META_SUFFIXES:
                meta(f"{base}.{s}", scheme)
        elif leaf == "qweight":
            scales = sib("scales")
            bits = cfg_bits or 4
            pack = 32 // bits
            scheme = "gptq"
            if "awq" in fmt or (scales is not None and len(t.shape) == 2 and len(scales.shape) == 2
                                and t.shape[1] * pack == scales.shape[1]):
                scheme = "awq"
            in_features = t.shape[0] * (pack if scheme == "gptq" else 1) if t.shape else 0
            group = cfg_group or (in_features // scales.shape[0] if scales is not None and scales.shape
                                  and scales.shape[0] else None)
            roles[name] = QuantRole(scheme, t.numel * pack, bits=bits, group_size=group)
            for s in ("qzeros", "scales", "g_idx"):
                meta(f"{base}.{s}", scheme)
        elif leaf == "weight" and t.dtype in FP8_DTYPES:
            inv = sib("weight_scale_inv")
            if inv is not None:
                block = None
                if len(inv.shape) == 2 and len(t.shape) == 2 and inv.shape[0]:
                    block = cfg_group or math.ceil(t.shape[0] / inv.shape[0])
                roles[name] = QuantRole("fp8_block", t.numel, bits=8, group_size=block)
                meta(f"{base}.weight_scale_inv", "fp8_block")
            else:
                roles[name] = QuantRole("fp8", t.numel, bits=8)
            for s in CT_META_SUFFIXES:
                meta(f"{base}.{s}", roles[name].scheme)
        elif leaf.endswith("_blocks") and t.dtype == "U8" and len(t.shape) >= 2 and (
                by_name.get(f"{name[: -len('_blocks')]}_scales") is not None or "mxfp4" in fmt):
            # gpt-oss: `<w>_blocks` [..., G, 16] bytes hold 32 FP4 values per group, `<w>_scales` [..., G] the
            # E8M0 exponents (quant_method: mxfp4)
            roles[name] = QuantRole("mxfp4", t.numel * 2, bits=4, group_size=t.shape[-1] * 2)
            meta(f"{name[: -len('_blocks')]}_scales", "mxfp4")
        elif leaf == "weight" and t.dtype == "U8" and sib("weight_scale") is not None and (
                sib("weight_scale_2") is not None or "modelopt" in fmt or "nvfp4" in fmt):
            # modelopt NVFP4: `weight` U8 [out, in/2], FP8 `weight_scale` per 16 values, F32 `weight_scale_2`
            scale = sib("weight_scale")
            group = cfg_group or ((t.shape[-1] * 2) // scale.shape[-1] if scale.shape and scale.shape[-1] else 16)
            roles[name] = QuantRole("nvfp4", t.numel * 2, bits=4, group_size=group)
            for s in (*CT_META_SUFFIXES, "weight_scale_2"):
                meta(f"{base}.{s}", "nvfp4")
        elif leaf == "weight" and t.dtype == "U8" and children.get(name):
            roles[name] = QuantRole("bnb", t.numel * 2, bits=4, group_size=cfg_group or 64)
            for n in children[name]:
                roles[n] = QuantRole("bnb", 0, metadata=True)
        elif leaf == "weight" and t.dtype == "I8" and sib("SCB") is not None:
            roles[name] = QuantRole("bnb", t.numel, bits=8)
            meta(f"{base}.SCB", "bnb")
            meta(f"{base}.weight_format", "bnb")
        elif leaf == "weight" and t.dtype == "U32" and sib("scales") is not None and sib("biases") is not None:
            bits = cfg_bits or 4
            roles[name] = QuantRole("mlx", t.numel * (32 // bits), bits=bits, group_size=cfg_group)
            meta(f"{base}.scales", "mlx")
            meta(f"{base}.biases", "mlx")
        elif t.dtype in SCALE_ONLY:   # exponent-only formats hold block scales, never weights
            roles[name] = QuantRole(None, 0, metadata=True)
        else:
            roles[name] = QuantRole(None, t.numel)
    return roles


def _children_table(by_name: dict[str, TensorInfo]) -> dict[str, list[str]]:
    """`X.weight` -> names under it (bitsandbytes stores its state as weight.absmax, weight.quant_map...)."""
    table: dict[str, list[str]] = {}
    for n in by_name:
        head, dot, _ = n.partition(".weight.")
        if dot:
            table.setdefault(head + ".weight", []).append(n)
    return table


def summarize(tensors: list[TensorInfo], roles: dict[str, QuantRole]) -> list[dict]:
    """The `quantization` list of inspect's JSON: one row per scheme, metadata excluded."""
    rows: dict[str, dict] = {}
    for t in tensors:
        r = roles[t.name]
        if r.scheme is None or r.metadata:
            continue
        row = rows.setdefault(r.scheme, {"scheme": r.scheme, "tensors": 0, "bits": r.bits,
                                         "group_size": r.group_size})
        row["tensors"] += t.count
    return sorted(rows.values(), key=lambda r: -r["tensors"])
