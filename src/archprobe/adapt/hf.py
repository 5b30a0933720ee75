"""transformers: its auto registries, its config class, and its own loading rules, asked directly.

The model is built on the meta device (no memory, no weights) from the checkpoint's config through
transformers' registered classes only; `auto_map` / custom code is never used. A checkpoint tensor
has a place when transformers' own key-renaming rules for that model (the ones `from_pretrained`
applies) turn its name into a parameter of the built model.
"""

from __future__ import annotations

import importlib.util

from archprobe.adapt.coverage import HANDLED, MISSING, UNVERIFIED, evidence_config_keys, feature_table
from archprobe.adapt.result import framework_result, not_installed, unknown

NAME = "transformers"
SKIP_KEYS = {"model_type", "auto_map", "architectures", "quantization_config", "text_config", "vision_config",
             "pad_token_id", "bos_token_id", "eos_token_id"}   # token ids are not structure; a tiny demo's exceed vocab


def probe(config: dict, features: list[dict], present: set[str], gguf_arch: str | None = None) -> dict:
    try:
        import torch
        import transformers
    except ImportError:
        return not_installed(NAME, "pip install 'archprobe[hf]'")
    from transformers.models.auto import modeling_auto
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    version = transformers.__version__
    transformers.logging.set_verbosity_error()
    if gguf_arch is not None:
        return _gguf(transformers, version, gguf_arch, features)
    declared = config.get("model_type")
    notes: list[str] = []
    target, wrapper_unknown = config, False
    if declared not in CONFIG_MAPPING_NAMES:
        text = config.get("text_config") or config.get("language_config")
        if isinstance(text, dict) and text.get("model_type") in CONFIG_MAPPING_NAMES:
            notes.append(f"{declared!r} is not known to transformers {version}; its text model "
                         f"{text['model_type']!r} is, so the text model is what was probed")
            target, wrapper_unknown = text, True
        else:
            return unknown(NAME, version, f"model_type {declared!r} is not in transformers {version}'s registry")
    model_type = target["model_type"]
    registered = _registered_architectures(modeling_auto)
    archs = [a for a in target.get("architectures") or [] if a in registered]
    try:
        kwargs = {k: v for k, v in target.items() if k not in SKIP_KEYS}
        cfg = transformers.AutoConfig.for_model(model_type, pad_token_id=None, **kwargs)
    except Exception as exc:
        notes.append(f"transformers rejects the config: {type(exc).__name__}: {str(exc)[:200]}")
        rows = feature_table(features, present, None, lambda f: None)
        return framework_result(NAME, version, model_type, rows, notes)
    act = getattr(cfg, "hidden_act", None)
    from transformers.activations import ACT2FN

    act_known = act is None or act in ACT2FN
    if not act_known:
        cfg.hidden_act = "silu"   # only to build the rest of the structure; the activation is reported missing
    model = None
    try:
        with torch.device("meta"):
            cls = getattr(transformers, archs[0]) if archs else None
            model = cls(cfg) if cls is not None else transformers.AutoModelForCausalLM.from_config(cfg)
    except Exception as exc:
        notes.append(f"building {archs[0] if archs else model_type} from this config failed: "
                     f"{type(exc).__name__}: {str(exc)[:200]}")
    tensor_ok = _placer(model, notes) if model is not None else None
    defaults = _default_config_keys(cfg)
    quant = (config.get("quantization_config") or target.get("quantization_config") or {})

    def judge(f: dict):
        fid = f["id"]
        if fid == "ffn.activation":
            return (HANDLED, f"activation {act!r} is in transformers' ACT2FN") if act_known else (
                MISSING, f"activation {act!r} is not in transformers {version}'s ACT2FN")
        if fid.startswith("quant."):
            return _quant(quant, version)
        if fid == "multimodal.vision" and wrapper_unknown:
            return MISSING, f"the multimodal model {declared!r} is not in transformers {version}"
        keys = evidence_config_keys(f)
        if keys and set(keys) == {"default"} and all(str(e.get("tensor", "")).startswith("config:")
                                                     for e in f.get("evidence", [])):
            return HANDLED, (f"fixed behaviour of {type(cfg).__name__}'s family (a default read from transformers' "
                             "modeling files, structure/family_defaults.py), not a config key")
        if keys and not [e for e in f.get("evidence", []) if not str(e.get("tensor", "")).startswith("config:")]:
            unread = [k for k in keys if k not in defaults]
            if unread:
                return UNVERIFIED, (f"config key(s) {', '.join(unread)} are not read by {type(cfg).__name__}; whether "
                                    "its fixed behaviour matches is not checked")
            return HANDLED, f"config key(s) {', '.join(keys)} are read by {type(cfg).__name__}"
        return None

    rows = feature_table(features, present, tensor_ok, judge)
    return framework_result(NAME, version, archs[0] if archs else model_type, rows, notes)


def _gguf(transformers, version: str, arch: str, features: list[dict]) -> dict:
    """A GGUF file goes through transformers' GGUF loader, which knows a list of architectures."""
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError:
        return unknown(NAME, version, "this transformers has no GGUF loader")
    if arch not in GGUF_SUPPORTED_ARCHITECTURES:
        return unknown(NAME, version, f"GGUF architecture {arch!r} is not in transformers {version}'s GGUF loader")
    rows = [{"feature": f["id"], "status": UNVERIFIED, "why": "GGUF input: transformers dequantizes it on load; "
             "features are not checked one by one"} for f in features]
    return framework_result(NAME, version, f"{arch} (GGUF loader)", rows, [])


def _registered_architectures(modeling_auto) -> set[str]:
    names: set[str] = set()
    for attr in dir(modeling_auto):
        if attr.startswith("MODEL_") and attr.endswith("_MAPPING_NAMES"):
            for value in getattr(modeling_auto, attr).values():
                names.update(value if isinstance(value, list | tuple) else [value])
    return names


def _default_config_keys(cfg) -> set[str]:
    try:
        return set(type(cfg)().to_dict())
    except Exception:
        return set(cfg.to_dict())


def _placer(model, notes: list[str]):
    """name -> does transformers' loader put this checkpoint tensor into the built model?"""
    state = dict(model.state_dict())
    prefix = getattr(model, "base_model_prefix", None)
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key

        transforms = get_model_conversion_mapping(model)
        renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
        converters = [t for t in transforms if isinstance(t, WeightConverter)]

        def rename(key: str) -> str:
            return rename_source_key(key, renamings, converters, prefix, state)[0]
    except Exception as exc:  # an internal API that moved: fall back to plain names, and say so
        notes.append(f"transformers' key-renaming rules were not usable ({type(exc).__name__}); plain names compared")

        def rename(key: str) -> str:
            return key

    def ok(name: str) -> bool:
        name = name.replace("*", "0")
        parts = name.split(".")
        for cut in range(min(3, len(parts) - 1)):   # a wrapper prefix such as `language_model.`
            if rename(".".join(parts[cut:])) in state:
                return True
        return False

    return ok


def _quant(quant: dict, version: str):
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING

    method = quant.get("quant_method")
    if not method:
        return UNVERIFIED, "no quantization_config to check"
    if method not in AUTO_QUANTIZER_MAPPING:
        return MISSING, f"quant_method {method!r} has no quantizer in transformers {version}"
    fmt = quant.get("format")
    extra = ""
    if method == "compressed-tensors" and importlib.util.find_spec("compressed_tensors") is None:
        extra = "; it needs the compressed-tensors package, which is not installed"
    return UNVERIFIED, f"quantizer {method!r} exists" + (f" (format {fmt!r} not checked)" if fmt else "") + extra
