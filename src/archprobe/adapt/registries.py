"""Each framework's architecture registry, read from its source text with `ast` (never imported, never run).

The formats, as the frameworks write them (each has a real excerpt in tests/adapt/registry_excerpts.py):
- vLLM `vllm/model_executor/models/registry.py` (older releases: `models/__init__.py`): module-level dicts
  named `_..._MODELS` mapping an architecture to `(module, class)`; entries whose module is `transformers`
  (`_TRANSFORMERS_SUPPORTED_MODELS`) run through the transformers backend; `_PREVIOUSLY_SUPPORTED_MODELS`
  maps a removed architecture to the last release that had it.
- SGLang `sglang/srt/models/<name>.py`: each model file names its classes in `EntryClass = X` or `[X, Y]`;
  the registry is the set of those class names.
- transformers `models/auto/modeling_auto.py`: `MODEL_..._MAPPING_NAMES = OrderedDict([(model_type, class)])`;
  `configuration_auto.py`: `CONFIG_MAPPING_NAMES` (the model types it knows).
- llama.cpp's `gguf/constants.py`: `MODEL_ARCH_NAMES = {MODEL_ARCH.X: "name"}` and `MODEL_TENSORS`
  (`{MODEL_ARCH.X: [MODEL_TENSOR.Y, ...]}`: the tensor kinds each architecture has).
- MLX-LM: one module per model type, `mlx_lm/models/<model_type>.py`, after `MODEL_REMAPPING` in `mlx_lm/utils.py`.
- TensorRT-LLM: `tensorrt_llm/models/__init__.py` `MODEL_MAP = {"Arch": Class}`, and the PyTorch backend's
  `@register_auto_model("Arch")` decorators in `tensorrt_llm/_torch/models/modeling_*.py`.
"""

from __future__ import annotations

import ast
import re


def parse(text: str) -> ast.Module | None:
    """The module's syntax tree, or None when it does not parse (a newer Python's syntax, or garbage)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _assignments(tree: ast.Module):
    """(name, value) for every module-level `NAME = value` / `NAME: T = value`."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.value is not None:
            for t in node.targets:
                if isinstance(t, ast.Name):
                    yield t.id, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
            yield node.target.id, node.value


def _str(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _pairs(node):
    """(key node, value node) of a dict literal, `OrderedDict([...])`, `dict(...)` or a list of 2-tuples."""
    if isinstance(node, ast.Dict):
        yield from ((k, v) for k, v in zip(node.keys, node.values, strict=True) if k is not None)
    elif isinstance(node, ast.Call) and node.args:
        yield from _pairs(node.args[0])
    elif isinstance(node, ast.List | ast.Tuple):
        for elt in node.elts:
            if isinstance(elt, ast.Tuple) and len(elt.elts) == 2:
                yield elt.elts[0], elt.elts[1]


# -- vLLM ---------------------------------------------------------------------------------------
def vllm_registry(text: str) -> dict | None:
    """{"native": {arch: module}, "backend": {arch: module}, "previously": {arch: last version}}."""
    tree = parse(text)
    if tree is None:
        return None
    out: dict = {"native": {}, "backend": {}, "previously": {}}
    found = False
    for name, value in _assignments(tree):
        if not name.endswith("_MODELS"):
            continue
        for k, v in _pairs(value):
            arch = _str(k)
            if arch is None:
                continue
            found = True
            if isinstance(v, ast.Tuple) and len(v.elts) == 2 and _str(v.elts[0]) is not None:
                module = _str(v.elts[0])
                (out["backend"] if module == "transformers" else out["native"])[arch] = module
            elif _str(v) is not None and "PREVIOUSLY" in name:
                out["previously"][arch] = _str(v)
    return out if found else None


# -- SGLang -------------------------------------------------------------------------------------
def entry_classes(text: str) -> list[str]:
    """The class names a SGLang model file registers through `EntryClass`."""
    tree = parse(text)
    if tree is None:
        return []
    out: list[str] = []
    for name, value in _assignments(tree):
        if name != "EntryClass":
            continue
        elts = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
        out += [e.id if isinstance(e, ast.Name) else e.attr for e in elts if isinstance(e, ast.Name | ast.Attribute)]
    return out


# -- transformers -------------------------------------------------------------------------------
def transformers_mappings(text: str, suffix: str = "_MAPPING_NAMES") -> dict[str, dict[str, list[str]]]:
    """{mapping name: {model_type: [class names]}} for every `..._MAPPING_NAMES` of an auto module."""
    tree = parse(text)
    if tree is None:
        return {}
    out: dict[str, dict[str, list[str]]] = {}
    for name, value in _assignments(tree):
        if not name.endswith(suffix):
            continue
        table = out.setdefault(name, {})
        for k, v in _pairs(value):
            key = _str(k)
            if key is None:
                continue
            names = [_str(v)] if _str(v) is not None else [
                _str(e) for e in getattr(v, "elts", []) if _str(e) is not None]
            table.setdefault(key, []).extend(n for n in names if n)
    return out


# -- gguf (llama.cpp) ---------------------------------------------------------------------------
def gguf_constants(text: str) -> dict | None:
    """{"names": {ENUM: "arch name"}, "tensors": {ENUM: [TENSOR kinds]}} from gguf/constants.py."""
    tree = parse(text)
    if tree is None:
        return None
    names: dict[str, str] = {}
    tensors: dict[str, list[str]] = {}
    for name, value in _assignments(tree):
        if name == "MODEL_ARCH_NAMES":
            for k, v in _pairs(value):
                if isinstance(k, ast.Attribute) and _str(v) is not None:
                    names[k.attr] = _str(v)
        elif name == "MODEL_TENSORS":
            for k, v in _pairs(value):
                if isinstance(k, ast.Attribute) and isinstance(v, ast.List):
                    tensors[k.attr] = [e.attr for e in v.elts if isinstance(e, ast.Attribute)]
    return {"names": names, "tensors": tensors} if names else None


# -- MLX-LM -------------------------------------------------------------------------------------
def mlx_remapping(text: str) -> dict[str, str]:
    tree = parse(text)
    if tree is None:
        return {}
    for name, value in _assignments(tree):
        if name == "MODEL_REMAPPING":
            return {k: v for k, v in ((_str(a), _str(b)) for a, b in _pairs(value)) if k and v}
    return {}


# -- TensorRT-LLM -------------------------------------------------------------------------------
def trtllm_model_map(text: str) -> set[str]:
    tree = parse(text)
    if tree is None:
        return set()
    for name, value in _assignments(tree):
        if name == "MODEL_MAP":
            return {k for k in (_str(a) for a, _ in _pairs(value)) if k}
    return set()


def trtllm_registered(text: str) -> list[str]:
    """Architectures a PyTorch-backend model file registers with `@register_auto_model("Arch")`."""
    tree = parse(text)
    if tree is None:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and getattr(d.func, "id", getattr(d.func, "attr", "")) == \
                        "register_auto_model":
                    out += [s for s in (_str(a) for a in d.args) if s]
    return out


# -- candidate files ----------------------------------------------------------------------------
SUFFIXES = re.compile(r"(ForCausalLM|ForConditionalGeneration|LMHeadModel|Model|ForCausalLMMTP)$")


def snake(arch: str) -> str:
    """KimiLinearForCausalLM -> kimi_linear."""
    core = SUFFIXES.sub("", arch)
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", core).lower()


def candidate_stems(stems: list[str], keys: list[str], limit: int) -> list[str]:
    """Model-file stems likeliest to hold these model types / architectures (exact, then same family)."""
    keys = [k.lower().replace("-", "_") for k in keys if k]
    families = {re.split(r"[_\d]", k)[0] for k in keys if re.split(r"[_\d]", k)[0]}

    def rank(stem: str) -> int | None:
        s = stem.lower()
        if s in keys:
            return 0
        if any(s.startswith(k) or k.startswith(s) for k in keys):
            return 1
        if re.split(r"[_\d]", s)[0] in families:
            return 2
        return None

    ranked = sorted((r, s) for s in stems if (r := rank(s)) is not None)
    return [s for _, s in ranked[:limit]]
