"""vLLM and SGLang: their model registries, when the package is importable here.

Only the architecture list is read (importing their model code needs a GPU stack in most
installs); feature handling is reported as unverified rather than guessed.
"""

from __future__ import annotations

import importlib
import importlib.util

from archprobe.adapt.coverage import UNVERIFIED
from archprobe.adapt.result import framework_result, not_installed, unknown

REGISTRIES = {
    "vllm": ("vllm.model_executor.models", "ModelRegistry", "pip install vllm (GPU machine)"),
    "sglang": ("sglang.srt.models.registry", "ModelRegistry", "pip install 'sglang[all]' (GPU machine)"),
}


def probe(name: str, config: dict, features: list[dict]) -> dict:
    module_name, attr, how = REGISTRIES[name]
    if importlib.util.find_spec(name) is None:
        return not_installed(name, how)
    try:
        package = importlib.import_module(name)
        registry = getattr(importlib.import_module(module_name), attr)
        archs = set(registry.get_supported_archs())
    except Exception as exc:
        return unknown(name, None, f"{name} is installed but its registry could not be read: "
                                   f"{type(exc).__name__}: {str(exc)[:200]}")
    version = getattr(package, "__version__", None)
    declared = list(config.get("architectures") or [])
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    candidates = declared + list(text.get("architectures") or [])
    known = next((a for a in candidates if a in archs), None)
    if known is None:
        return unknown(name, version, f"none of {candidates} is in {name} {version}'s model registry")
    rows = [{"feature": f["id"], "status": UNVERIFIED, "why": f"{name}'s registry lists {known}; "
             "feature handling is not checked statically"} for f in features]
    return framework_result(name, version, known, rows, [])
