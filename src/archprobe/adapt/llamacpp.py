"""llama.cpp: the GGUF architecture list and tensor-name map shipped in the `gguf` package.

`gguf.MODEL_ARCH_NAMES` is the list of architectures llama.cpp's converter and loader know;
`gguf.get_tensor_name_map(arch, n_blocks)` is the table that maps Hugging Face tensor names onto
GGUF tensor kinds for that architecture. A tensor with no entry has no place in llama.cpp's model.
"""

from __future__ import annotations

import re

from archprobe.adapt.coverage import HANDLED, UNVERIFIED, feature_table
from archprobe.adapt.result import framework_result, not_installed, unknown

NAME = "llama.cpp"
ALIASES = {"deepseek_v3": "deepseek2", "deepseek_v2": "deepseek2", "mistral": "llama", "kimi_k2": "deepseek2"}
EXPERT_INDEX = re.compile(r"\.experts\.(\d+|\*)\.")
DT_BIAS = re.compile(r"\.dt_bias$")


def arch_name(model_type: str, moe: bool, names: set[str]) -> str | None:
    for cand in (ALIASES.get(model_type), model_type, model_type.replace("_", "-"), model_type.replace("_", "")):
        if cand and moe and f"{cand}_moe" in names:
            return f"{cand}_moe"
        if cand in names:
            return cand
    return None


def probe(config: dict, features: list[dict], present: set[str], num_layers: int, gguf_arch: str | None,
          moe: bool) -> dict:
    try:
        import gguf
    except ImportError:
        return not_installed(NAME, "pip install gguf")
    version = getattr(gguf, "__version__", None)
    names = set(gguf.MODEL_ARCH_NAMES.values())
    notes: list[str] = []
    if gguf_arch is not None:   # already a GGUF file: its tensors are llama.cpp's by construction
        if gguf_arch not in names:
            return unknown(NAME, version, f"GGUF architecture {gguf_arch!r} is not in gguf {version}'s list")
        rows = feature_table(features, present, lambda n: True, lambda f: None)
        return framework_result(NAME, version, gguf_arch, rows, ["a GGUF file: tensor names are llama.cpp's own"])
    model_type = config.get("model_type") or ""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    arch = arch_name(model_type, moe, names)
    if arch is None and text:
        arch = arch_name(text.get("model_type") or "", moe, names)
        if arch:
            notes.append(f"{model_type!r} is not a GGUF architecture; its text model maps to {arch!r}")
    if arch is None:
        return unknown(NAME, version, f"no GGUF architecture for model_type {model_type!r} in gguf {version}")
    arch_enum = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch)
    tmap = gguf.get_tensor_name_map(arch_enum, max(1, num_layers))

    def ok(name: str) -> bool:
        name = EXPERT_INDEX.sub(".experts.", name)   # the converter stacks experts before it maps names
        name = DT_BIAS.sub(".dt_proj.bias", name)     # the converter's rename of a bare dt_bias
        parts = name.split(".")
        for cut in range(min(3, len(parts) - 1)):
            if tmap.get_name(".".join(parts[cut:]), try_suffixes=(".weight", ".bias", "_bias")) is not None:
                return True
        return False

    def judge(f: dict):
        fid = f["id"]
        if fid.startswith("quant."):
            scheme = fid.split(".", 1)[1].upper()
            if scheme in gguf.GGMLQuantizationType.__members__:
                return UNVERIFIED, f"GGML type {scheme} exists; converting this checkpoint's layout is not checked"
            return UNVERIFIED, f"no GGML type {scheme}: the converter would have to dequantize"
        if fid == "ffn.activation":
            return UNVERIFIED, "llama.cpp's activations are compiled code, not listed in the gguf package"
        if fid == "multimodal.vision":
            return UNVERIFIED, "vision towers go to a separate mmproj GGUF; not checked"
        if f.get("evidence") and all(str(e.get("tensor", "")).startswith("config:") for e in f["evidence"]):
            return UNVERIFIED, "a config-only feature: llama.cpp's handling is compiled code"
        return None

    rows = feature_table(features, present, ok, judge)
    notes.append("tensor names checked against gguf's shared name table (plus the converter's stacking of "
                 "experts); a model-specific rename in convert_hf_to_gguf.py beyond that is not seen")
    if all(r["status"] == HANDLED for r in rows):
        notes.append("every evidence tensor has a GGUF tensor kind")
    return framework_result(NAME, version, arch, rows, notes)
